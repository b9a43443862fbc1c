package opsfile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Problem is one problem of an operations file or catalog, placed for
// whoever fixes it: the file (or "catalog <name>"), the line of the field
// when the text is known, the operation it concerns, and the field as an
// RFC 6901 JSON pointer into the document ("/operations/<index>/<field>"
// for an operation's; "" for the document as a whole). It is the one
// problem type of a load: the file path, the catalog path and the admin
// API report it alike.
type Problem struct {
	File      string `json:"-"`
	Pointer   string `json:"pointer"`
	Operation string `json:"operation,omitempty"`
	Line      int    `json:"line,omitempty"`
	Message   string `json:"message"`
}

// Error renders the problem as the file path reports it:
// "ops.yaml:7: operation "a": /limits/max_items: must be ...", the pointer
// within the operation when one is named.
func (p Problem) Error() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.File, p.Line)
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	ptr := p.Pointer
	if p.Operation != "" {
		fmt.Fprintf(&b, "operation %q: ", p.Operation)
		_, ptr = EntryOf(ptr)
	}
	if ptr != "" {
		b.WriteString(ptr + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems are the problems of one load, as one error (nil when there are
// none: see Err).
type Problems []Problem

func (ps Problems) Error() string {
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "\n")
}

// Err is ps as an error, nil when it is empty.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// ProblemsIn lists the problems err holds (Problems, a Problem, or
// errors joining them); any other error is a problem of its own, its text
// the message.
func ProblemsIn(err error) Problems {
	var out Problems
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case Problems:
			out = append(out, e...)
		case Problem:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		default:
			out = append(out, Problem{Message: err.Error()})
		}
	}
	walk(err)
	return out
}

// EntryPointer is the pointer of the operation at index in a document.
func EntryPointer(index int) string { return "/operations/" + strconv.Itoa(index) }

// EntryOf splits a document's pointer into the index of the operation it
// lies in (-1 for none) and the pointer within that operation.
func EntryOf(ptr string) (index int, within string) {
	rest, ok := strings.CutPrefix(ptr, "/operations/")
	if !ok {
		return -1, ptr
	}
	num, within, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 {
		return -1, ptr
	}
	if within != "" {
		within = "/" + within
	}
	return i, within
}

// DiagnosticProblems are the diagnostics of a decoding or an adapter, at
// base (the pointer of what their fields lie in), errors and warnings
// apart.
func DiagnosticProblems(base string, diags []sdk.Diagnostic) (errs, warns Problems) {
	for _, d := range diags {
		p := Problem{Pointer: base + d.Where(), Message: d.Message}
		if d.Severity == sdk.SeverityWarning {
			warns = append(warns, p)
		} else {
			errs = append(errs, p)
		}
	}
	return errs, warns
}

// positions finds where a field is written in a YAML or JSON text (JSON is
// YAML), for problems that name the line: the one line finder of the
// operations file, the catalog and the admin API.
type positions struct{ root *yaml.Node }

// positionsOf are the positions of a parsed document.
func positionsOf(doc *yaml.Node) positions {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return positions{}
	}
	return positions{root: doc.Content[0]}
}

// line is the line of the field at ptr: of the deepest part of it the
// text has, so a field that is missing points at what would hold it; 0
// when unknown.
func (p positions) line(ptr string) int {
	n := p.root
	if n == nil {
		return 0
	}
	line := n.Line
	if ptr == "" {
		return line
	}
	for seg := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		seg = pointer.Unkey(seg)
		next, l := child(n, seg)
		if next == nil {
			break
		}
		n, line = next, l
	}
	return line
}

// child is a mapping's value under key (with the key's line), or a
// sequence's item at an index.
func child(n *yaml.Node, key string) (*yaml.Node, int) {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return resolve(n.Content[i+1]), n.Content[i].Line
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(n.Content) {
			return resolve(n.Content[i]), n.Content[i].Line
		}
	}
	return nil, 0
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// PlaceLines sets the line of each problem placed at a field and without
// one, from text, the YAML or JSON its pointers point into (a request
// body); a text that does not parse leaves them as they are.
func PlaceLines(text []byte, ps Problems) Problems {
	var doc yaml.Node
	if len(ps) == 0 || yaml.Unmarshal(text, &doc) != nil {
		return ps
	}
	pos := positionsOf(&doc)
	for i := range ps {
		if ps[i].Line == 0 && ps[i].Pointer != "" {
			ps[i].Line = pos.line(ps[i].Pointer)
		}
	}
	return ps
}

// Problem is a problem of the operation's field at ptr (a pointer within
// the operation), placed in its file.
func (op *Operation) Problem(ptr, message string) Problem {
	if op.at == "" {
		return Problem{File: op.File, Operation: op.Name, Message: message, Pointer: ptr}
	}
	return Problem{File: op.File, Line: op.pos.line(op.at + ptr), Operation: op.Name, Pointer: op.at + ptr, Message: message}
}
