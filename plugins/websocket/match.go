package websocket

import (
	"encoding/json"
	"strconv"

	"github.com/theory/jsonpath"
)

// matchFilter reports whether the message is an item: the filter
// expression holds for it.
func matchFilter(p *jsonpath.Path, doc any) bool {
	return len(p.Select([]any{doc})) > 0
}

// matches reports whether the message acknowledges the subscription.
func (a *ackMatcher) matches(doc, want any) bool {
	nodes := a.path.Select(doc)
	if len(nodes) == 0 {
		return false
	}
	if a.equals == nil {
		return true
	}
	for _, n := range nodes {
		if jsonEqual(n, want) {
			return true
		}
	}
	return false
}

// jsonEqual compares decoded JSON values; numbers by value (1 == 1.0).
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, err1 := strconv.ParseFloat(string(x), 64)
		fy, err2 := strconv.ParseFloat(string(y), 64)
		return err1 == nil && err2 == nil && fx == fy
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// idOf is the item id id_path selects from a message, "" when none: a
// string as is, another value as its JSON text.
func idOf(p *jsonpath.Path, doc any) string {
	nodes := p.Select(doc)
	if len(nodes) == 0 {
		return ""
	}
	switch v := nodes[0].(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return string(mustMarshal(nodes[0]))
}
