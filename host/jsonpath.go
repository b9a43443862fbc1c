package host

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

// compilePath parses an RFC 9535 JSONPath. Paths come from the operations
// file; their errors are reported at load.
func compilePath(s string) (*jsonpath.Path, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("must not be empty")
	}
	if !strings.HasPrefix(strings.TrimSpace(s), "$") {
		return nil, fmt.Errorf("not a valid RFC 9535 JSONPath: a query starts with $ (got %q)", s)
	}
	p, err := parsePath(s)
	if err != nil {
		return nil, fmt.Errorf("not a valid RFC 9535 JSONPath: %s", strings.TrimPrefix(err.Error(), "jsonpath: "))
	}
	return p, nil
}

// parsePath parses s, turning a panic of the parser into an error: a bad
// path in the operations file must never take the gateway down.
func parsePath(s string) (p *jsonpath.Path, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("cannot parse %q", s)
		}
	}()
	return jsonpath.Parse(s)
}

// selectAll returns the nodes p selects from v.
func selectAll(p *jsonpath.Path, v any) []any {
	if p == nil {
		return nil
	}
	return p.Select(v)
}

// selectFirst returns the first node p selects from v.
func selectFirst(p *jsonpath.Path, v any) (any, bool) {
	if p == nil {
		return nil, false
	}
	nodes := p.Select(v)
	if len(nodes) == 0 {
		return nil, false
	}
	return nodes[0], true
}

// redactPaths replaces every node the paths select in root with Redacted
// and returns the (possibly replaced) root and the number of replaced
// nodes. Objects and arrays are changed in place.
func redactPaths(paths []*jsonpath.Path, root any) (any, int) {
	n := 0
	for _, p := range paths {
		for _, loc := range p.SelectLocated(root) {
			if len(loc.Path) == 0 {
				return Redacted, n + 1
			}
			if setAt(root, loc.Path, Redacted) {
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

// decodeJSON decodes one JSON value keeping numbers exact (json.Number).
func decodeJSON(raw []byte) (any, error) {
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

// encodeJSON renders v compactly without HTML escaping (log lines keep
// their <, > and &), in a new slice.
func encodeJSON(v any) []byte {
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

// scalarText renders a selected scalar as plain text (strings unquoted,
// numbers and booleans as written); objects and arrays as compact JSON.
func scalarText(v any) string {
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
	return string(encodeJSON(v))
}

// truthy reports whether a done_path value means "done": true, a non-zero
// number, or a non-empty string other than "false", "0", "no".
func truthy(v any) bool {
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
