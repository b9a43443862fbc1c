package catalog

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/host"
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

// ProblemsOf turns what the host reported while loading the document
// (host.ConfigError values, joined) into problems placed for a form: the
// pointer of the entry's field, or the body's root for an entry the body
// does not hold (a tool an adapter derived, a file's operation, another
// entry of the catalog), with the message naming it.
func ProblemsOf(err error, doc *Document, place Place) Problems {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var out Problems
	for _, e := range errs {
		var ce *host.ConfigError
		if !errors.As(e, &ce) {
			if p, ok := e.(Problems); ok {
				out = append(out, p...)
				continue
			}
			out = append(out, Problem{Message: e.Error()})
			continue
		}
		out = append(out, problemOf(ce, doc, place))
	}
	return out
}

var hashLabelRE = regexp.MustCompile(`^#(\d+)$`)

func problemOf(ce *host.ConfigError, doc *Document, place Place) Problem {
	p := Problem{Operation: ce.Operation, Message: ce.Reason}
	idx := -1
	if m := hashLabelRE.FindStringSubmatch(ce.Operation); m != nil {
		n, _ := strconv.Atoi(m[1])
		idx, p.Operation = n-1, ""
	} else if ce.Operation != "" {
		idx = doc.Index(ce.Operation)
	}
	field := FieldPointer(ce.Field)
	switch {
	case ce.Operation == "":
		p.Pointer = field
	case idx >= 0 && idx < len(doc.Operations):
		at, inBody := place(idx)
		if inBody {
			p.Pointer = at + field
		} else {
			p.Message = fmt.Sprintf("operation %q of the catalog: %s: %s", ce.Operation, strings.TrimPrefix(field, "/"), ce.Reason)
		}
	default:
		// A tool an adapter derived from an entry, or an operation of an
		// operations file: named, since the body holds no field for it.
		where := ""
		if ce.File != "" && !strings.HasPrefix(ce.File, "catalog ") {
			where = " in " + ce.File
		}
		p.Message = fmt.Sprintf("operation %q%s: %s: %s", ce.Operation, where, ce.Field, ce.Reason)
	}
	return p
}

// FieldPointer turns a field path as the host and adapters name it
// ("limits.max_items", "config.headers[0]", "paths./users") into a JSON
// pointer ("/limits/max_items", "/config/headers/0", "/paths/~1users").
func FieldPointer(field string) string {
	if field == "" {
		return ""
	}
	var b strings.Builder
	for _, seg := range strings.Split(field, ".") {
		for seg != "" {
			key, rest, _ := strings.Cut(seg, "[")
			if key != "" {
				b.WriteString("/" + escape(key))
			}
			if rest == "" {
				break
			}
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				b.WriteString("/" + escape("["+rest))
				break
			}
			b.WriteString("/" + escape(idx))
			seg = after
		}
	}
	return b.String()
}

// Lines adds to each problem placed at a field the line of that field in
// body, the YAML or JSON text its pointer points into (a request body);
// problems about the body as a whole, or of a body that does not parse,
// are left as they are.
func Lines(body []byte, ps Problems) Problems {
	var root yaml.Node
	if len(ps) == 0 || yaml.Unmarshal(body, &root) != nil {
		return ps
	}
	for i := range ps {
		if ps[i].Line == 0 && ps[i].Pointer != "" {
			ps[i].Line = lineOf(&root, ps[i].Pointer)
		}
	}
	return ps
}
