package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/crankmcp/crank/host/jsonpath"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/crankmcp/crank/store"
)

// Change is what one catalog version did to one operation, compared with
// another version.
type Change struct {
	// Operation names the operation changed; RateLimit, for a change of
	// the catalog's rate limits, the limit (Operation is empty then).
	Operation string `json:"operation,omitempty"`
	RateLimit string `json:"rate_limit,omitempty"`
	// Change is "added", "removed" or "changed".
	Change string `json:"change"`
	// Fields lists a changed operation's differing fields.
	Fields []FieldChange `json:"fields,omitempty"`
}

// FieldChange is one differing field: its JSON pointer within the entry
// and its values before and after (absent where the field is).
type FieldChange struct {
	Pointer string          `json:"pointer"`
	From    json.RawMessage `json:"from,omitempty"`
	To      json.RawMessage `json:"to,omitempty"`
}

// Diff compares two documents entry by entry (by name): added and changed
// entries in the order of to, then removed ones in the order of from.
// Placeholders are compared as written (nothing is expanded).
func Diff(from, to *Document) []Change {
	out := []Change{}
	for _, e := range to.Operations {
		name := entryName(e)
		old := from.Entry(name)
		switch {
		case old == nil:
			out = append(out, Change{Operation: name, Change: "added"})
		case !bytes.Equal(old, e):
			a, _ := jsonpath.Decode(old)
			b, _ := jsonpath.Decode(e)
			out = append(out, Change{Operation: name, Change: "changed", Fields: diffValues("", a, b, nil)})
		}
	}
	for _, e := range from.Operations {
		if name := entryName(e); to.Entry(name) == nil {
			out = append(out, Change{Operation: name, Change: "removed"})
		}
	}
	return append(out, diffLimits(from.RateLimits, to.RateLimits)...)
}

// diffLimits compares two lists of rate limits by name, as Diff compares
// entries.
func diffLimits(from, to []json.RawMessage) []Change {
	var out []Change
	find := func(ls []json.RawMessage, name string) json.RawMessage {
		for _, l := range ls {
			if entryName(l) == name {
				return l
			}
		}
		return nil
	}
	for _, l := range to {
		name := entryName(l)
		switch old := find(from, name); {
		case old == nil:
			out = append(out, Change{RateLimit: name, Change: "added"})
		case !bytes.Equal(old, l):
			a, _ := jsonpath.Decode(old)
			b, _ := jsonpath.Decode(l)
			out = append(out, Change{RateLimit: name, Change: "changed", Fields: diffValues("", a, b, nil)})
		}
	}
	for _, l := range from {
		if name := entryName(l); find(to, name) == nil {
			out = append(out, Change{RateLimit: name, Change: "removed"})
		}
	}
	return out
}

// StoreChanges is the summary a version records.
func StoreChanges(cs []Change) []store.CatalogChange {
	out := make([]store.CatalogChange, len(cs))
	for i, c := range cs {
		op := c.Operation
		if c.RateLimit != "" {
			op = "rate_limit:" + c.RateLimit
		}
		out[i] = store.CatalogChange{Operation: op, Change: c.Change}
	}
	return out
}

func diffValues(at string, a, b any, out []FieldChange) []FieldChange {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(av)) {
			p := at + "/" + pointer.Key(k)
			if be, ok := bv[k]; ok {
				out = diffValues(p, av[k], be, out)
			} else {
				out = append(out, FieldChange{Pointer: p, From: canonical(av[k])})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(bv)) {
			if _, ok := av[k]; !ok {
				out = append(out, FieldChange{Pointer: at + "/" + pointer.Key(k), To: canonical(bv[k])})
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			out = diffValues(fmt.Sprintf("%s/%d", at, i), av[i], bv[i], out)
		}
		return out
	}
	ca, cb := canonical(a), canonical(b)
	if !bytes.Equal(ca, cb) {
		out = append(out, FieldChange{Pointer: at, From: ca, To: cb})
	}
	return out
}
