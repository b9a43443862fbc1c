package catalog

import (
	"fmt"

	"github.com/crankmcp/crank/host/opsfile"
)

// Place says where an entry of a document is in a request body: its JSON
// pointer, and whether it is in the body at all (an entry of the stored
// catalog that a request for another entry did not send is not).
type Place func(index int) (pointer string, inBody bool)

// InFile places entries as an operations file body does:
// /operations/<index>.
func InFile(index int) (string, bool) { return fmt.Sprintf("/operations/%d", index), true }

// AsEntry places the entry at index as the whole body (a request for one
// entry) and every other one outside it.
func AsEntry(index int) Place {
	return func(i int) (string, bool) { return "", i == index }
}

// ProblemsOf places what the host reported while loading the document
// (compiled as source, "catalog <name>") for a form: a problem of one of
// its entries at that entry's place in the body, and one of an entry the
// body does not hold (a tool an adapter derived, an operation of a file,
// another entry of the catalog) at the body's root, its message naming
// it.
func ProblemsOf(err error, source string, doc *Document, place Place) opsfile.Problems {
	var out opsfile.Problems
	for _, p := range opsfile.ProblemsIn(err) {
		idx, within := opsfile.EntryOf(p.Pointer)
		ours := p.File == source || p.File == ""
		switch {
		case ours && idx < 0: // the document as a whole
		case ours && idx < len(doc.Operations) && (p.Operation == "" || p.Operation == entryName(doc.Operations[idx])):
			if at, inBody := place(idx); inBody {
				p.Pointer = at + within
			} else {
				p.Message = fmt.Sprintf("operation %q of the catalog: %s: %s", p.Operation, within, p.Message)
				p.Pointer = ""
			}
		default: // a tool an entry expanded to, or what an operations file holds
			where := ""
			if !ours {
				where = " in " + p.File
			}
			p.Message = fmt.Sprintf("operation %q%s: %s: %s", p.Operation, where, within, p.Message)
			p.Pointer = ""
		}
		p.File, p.Line = "", 0
		out = append(out, p)
	}
	return out
}
