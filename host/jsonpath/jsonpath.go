// Package jsonpath is the gateway's one use of RFC 9535 JSONPath
// (github.com/theory/jsonpath) over decoded JSON: a query compiled with
// an error an operator can read (a parser's panic is an error too), the
// values it selects, values replaced in place (redacted_paths), the
// member names queries end in, and the decoding and encoding of the JSON
// values queries read (numbers kept exact, no HTML escaping). It reads no
// files and calls nothing; the operations file compiles its paths with
// it and the window engine and the runtime read documents with them.
package jsonpath

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// Path is a compiled query.
type Path = jsonpath.Path

// Compile parses an RFC 9535 JSONPath. Paths come from the operations
// file; their errors are reported at load.
func Compile(s string) (*Path, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("must not be empty")
	}
	if !strings.HasPrefix(strings.TrimSpace(s), "$") {
		return nil, fmt.Errorf("not a valid RFC 9535 JSONPath: a query starts with $ (got %q)", s)
	}
	p, err := parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a valid RFC 9535 JSONPath: %s", strings.TrimPrefix(err.Error(), "jsonpath: "))
	}
	return p, nil
}

// parse parses s, turning a panic of the parser into an error: a bad
// path in the operations file must never take the gateway down.
func parse(s string) (p *Path, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("cannot parse %q", s)
		}
	}()
	return jsonpath.Parse(s)
}

// All returns the nodes p selects from v (none for a nil p).
func All(p *Path, v any) []any {
	if p == nil {
		return nil
	}
	return p.Select(v)
}

// First returns the first node p selects from v (none for a nil p).
func First(p *Path, v any) (any, bool) {
	if p == nil {
		return nil, false
	}
	nodes := p.Select(v)
	if len(nodes) == 0 {
		return nil, false
	}
	return nodes[0], true
}

// Replace replaces every node the paths select in root with with, and
// returns the (possibly replaced) root and the number of replaced nodes.
// Objects and arrays are changed in place.
func Replace(paths []*Path, root, with any) (any, int) {
	n := 0
	for _, p := range paths {
		for _, loc := range p.SelectLocated(root) {
			if len(loc.Path) == 0 {
				return with, n + 1
			}
			if setAt(root, loc.Path, with) {
				n++
			}
		}
	}
	return root, n
}

// setAt sets the value at a normalized path inside root.
func setAt(root any, path spec.NormalizedPath, val any) bool {
	cur := root
	for i, sel := range path {
		last := i == len(path)-1
		switch s := sel.(type) {
		case spec.Name:
			m, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if last {
				m[string(s)] = val
				return true
			}
			cur = m[string(s)]
		case spec.Index:
			a, ok := cur.([]any)
			if !ok || int(s) < 0 || int(s) >= len(a) {
				return false
			}
			if last {
				a[int(s)] = val
				return true
			}
			cur = a[int(s)]
		default:
			return false
		}
	}
	return false
}

// Decode decodes one JSON value keeping numbers exact (json.Number).
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

var encPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Encode renders v compactly without HTML escaping (log lines keep
// their <, > and &), in a new slice.
func Encode(v any) []byte {
	b := encPool.Get().(*bytes.Buffer)
	b.Reset()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		encPool.Put(b)
		return []byte("null")
	}
	out := bytes.Clone(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	if b.Cap() <= 1<<20 {
		encPool.Put(b)
	}
	return out
}

// Text renders a selected scalar as plain text (strings unquoted,
// numbers and booleans as written); objects and arrays as compact JSON.
func Text(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case json.Number:
		return t.String()
	case bool:
		if t {
			return "true"
		}
		return "false"
	}
	return string(Encode(v))
}

// Truthy reports whether a done_path value means "done": true, a non-zero
// number, or a non-empty string other than "false", "0", "no".
func Truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case json.Number:
		f, err := t.Float64()
		return err == nil && f != 0
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "", "false", "0", "no":
			return false
		}
		return true
	case []any:
		return len(t) > 0
	case map[string]any:
		return len(t) > 0
	}
	return true
}

// EndNames returns the member names the queries end in; ok is false when
// one ends elsewhere (an index, a wildcard, a filter or the root) or does
// not parse.
func EndNames(queries []string) (names map[string]bool, ok bool) {
	names = map[string]bool{}
	for _, s := range queries {
		p, err := parse(s)
		if err != nil {
			return nil, false
		}
		segs := p.Query().Segments()
		if len(segs) == 0 {
			return nil, false
		}
		for _, sel := range segs[len(segs)-1].Selectors() {
			n, isName := sel.(spec.Name)
			if !isName {
				return nil, false
			}
			names[string(n)] = true
		}
	}
	return names, true
}

// Step is one step of a query that Steps can follow in a document's
// schema: a member by name (Name set), or any element of an array (Name
// empty: a wildcard, an index or a slice).
type Step struct {
	Name string
}

// Steps returns the steps of a query made of child segments of one
// selector each, every one a member name, a wildcard, an index or a
// slice ($.a.b, $.items[*], $.pages[0].rows); ok is false for any other
// query (a descendant segment, a filter, several selectors in one
// segment) or one that does not parse.
func Steps(query string) (steps []Step, ok bool) {
	p, err := parse(query)
	if err != nil {
		return nil, false
	}
	for _, seg := range p.Query().Segments() {
		sels := seg.Selectors()
		if seg.IsDescendant() || len(sels) != 1 {
			return nil, false
		}
		switch s := sels[0].(type) {
		case spec.Name:
			steps = append(steps, Step{Name: string(s)})
		case spec.WildcardSelector, spec.Index, spec.SliceSelector, *spec.SliceSelector:
			steps = append(steps, Step{})
		default:
			return nil, false
		}
	}
	return steps, true
}
