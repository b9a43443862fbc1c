package window

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/redact"
)

// CursorArgument is the argument a window tool takes to continue where
// the previous window ended.
const CursorArgument = "cursor"

// InputSchema adds the cursor argument to a window tool's input schema
// when its windows continue (Continues). A schema that already has a
// cursor property is refused either way: the name is the window's.
func InputSchema(raw json.RawMessage, continues bool) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON Schema object: %v", err)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	if _, ok := props[CursorArgument]; ok {
		return nil, fmt.Errorf("property %q is reserved in mode window: it carries the cursor of the previous window", CursorArgument)
	}
	if !continues {
		return raw, nil
	}
	props[CursorArgument] = map[string]any{
		"type":        "string",
		"description": "Continue after the previous window: pass the cursor it returned, unchanged (no other is taken). Omit for a fresh window.",
	}
	m["properties"] = props
	return json.Marshal(m)
}

// OutputSchema is the JSON Schema of a window result's
// structuredContent (Result), exactly: every member Result and its
// summary and stats may have, of the type they have, none other, and the
// items described by ItemSchema where they are the upstream's own.
func OutputSchema(ex *Config) json.RawMessage {
	integer := map[string]any{"type": "integer"}
	num := map[string]any{"type": "number"}
	exact := func(props map[string]any, required ...string) map[string]any {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	item, defs := ItemSchema(ex)
	itemOrAny := func() map[string]any {
		if item == nil {
			return map[string]any{}
		}
		m, ok := item.(map[string]any)
		if !ok { // a boolean schema
			return map[string]any{"anyOf": []any{item}}
		}
		return m
	}
	items := map[string]any{"type": "array", "description": "The window's items (aggregation_mode " + ex.Aggregation.Mode + ")."}
	var summary map[string]any
	switch ex.Aggregation.Mode {
	case AggStats:
		summary = exact(map[string]any{
			"count": integer, "numeric": integer, "non_numeric": integer,
			"min": num, "max": num, "avg": num, "p50": num, "p95": num, "sum": num,
		}, "count", "numeric", "non_numeric")
		items["maxItems"], items["description"] = 0, "Empty: aggregation_mode stats returns statistics in summary."
	case AggLatestState:
		state := map[string]any{"type": "object", "description": "The last item seen for each key."}
		if item != nil {
			state["additionalProperties"] = item
		}
		summary = exact(map[string]any{"count": integer, "keys": integer, "state": state}, "count", "keys", "state")
		items["maxItems"], items["description"] = 0, "Empty: aggregation_mode latest_state returns the last item per key in summary.state."
	case AggText:
		summary = exact(map[string]any{
			"text":          map[string]any{"type": "string", "description": "The chunks' text, joined."},
			"finish_reason": map[string]any{"type": "string"},
			"usage":         map[string]any{"description": "The upstream's token usage, when it sent one."},
			"chunks":        integer,
		}, "text", "chunks")
		items["maxItems"], items["description"] = 0, "Empty: aggregation_mode text returns the joined text in summary.text."
	default:
		summary = exact(map[string]any{
			"count":    map[string]any{"type": "integer", "description": "Items counted in the window."},
			"counts":   map[string]any{"type": "object", "description": "Items per value of the group_by field.", "additionalProperties": integer},
			"upstream": map[string]any{"description": "The upstream's own summary (summary_path) of the last answer."},
		}, "count")
		if ex.Aggregation.Mode == AggSummaryOnly {
			items["maxItems"], items["description"] = 0, "Empty: aggregation_mode summary_only returns counts in summary."
		} else if item != nil {
			items["items"] = itemOrAny()
		}
	}
	schema := exact(map[string]any{
		"items":   items,
		"summary": summary,
		"stats": exact(map[string]any{
			"received": integer, "counted": integer, "returned": integer, "dropped_duplicates": integer,
			"sampled_out": integer, "skipped_oversize": integer, "fields_truncated": integer, "redacted": integer,
			"partial": integer, "bytes": integer, "duration_ms": integer, "polls": integer, "retries": integer,
		}, "received", "counted", "returned", "dropped_duplicates", "sampled_out", "skipped_oversize",
			"fields_truncated", "redacted", "bytes", "duration_ms"),
		"truncated":       map[string]any{"type": "boolean", "description": "Data was left out: a limit cut the window, or items or fields were cut or skipped."},
		"window_complete": map[string]any{"type": "boolean", "description": "The window ran its course: its duration elapsed, the upstream said it was done, or the stream ended."},
		"has_more":        map[string]any{"type": "boolean", "description": HasMoreDescription(ex)},
		"cursor":          map[string]any{"type": "string", "description": "Pass it back as the cursor argument to get the next window."},
		"end_reason": map[string]any{"type": "string", "enum": []string{
			EndWindowDuration, EndMaxItems, EndMaxBytes, EndUpstreamTimeout, EndIdleTimeout, EndDone, EndUpstreamEnd, EndUpstreamError, EndCancelled}},
		"status":  map[string]any{"description": "The upstream's status (status_path) in its last answer."},
		"gaps":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Points where items were missed (skipped or unreadable items, reconnects)."},
		"partial": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Why items the upstream delivered incomplete are (a GraphQL event's field errors): the items are in items, nothing was missed."},
		"error":   map[string]any{"type": "string", "description": "Why the upstream failed, when it did."},
	}, "items", "summary", "stats", "truncated", "window_complete", "has_more", "end_reason")
	if !Continues(ex) {
		delete(schema["properties"].(map[string]any), "cursor")
	}
	if len(defs) > 0 {
		schema["$defs"] = defs
	}
	b, _ := json.Marshal(schema)
	return b
}

// ItemSchema is the JSON Schema of one item as the window engine hands
// it out — a window's items and samples, latest_state's values, a
// session's polled items, a window job's: the adapter's schema of one
// upstream document (Config.ItemSchema) after items_path (without it, a
// document that is an array is split into its elements), redacted_paths
// (a member they end in may be the redaction mark) and max_field_length
// (a string cut may end in the truncation mark). defs are the
// definitions its references resolve in ("#/$defs/…"), for the root of
// the schema that holds it. A nil item describes nothing (any item): no
// item schema, an items_path it cannot follow, a redacted path that may
// hit any value, or references it cannot carry over.
func ItemSchema(ex *Config) (item any, defs map[string]any) {
	if len(ex.ItemSchema) == 0 {
		return nil, nil
	}
	var doc any
	if json.Unmarshal(ex.ItemSchema, &doc) != nil {
		return nil, nil
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, nil
	}
	delete(root, "$schema")
	delete(root, "$id")
	rootDefs := map[string]any{}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := root[k].(map[string]any); ok {
			delete(root, k)
			for name, s := range d {
				rootDefs[k+"/"+name] = s
			}
		}
	}
	w := walker{defs: rootDefs}
	if ex.Aggregation.ItemsPath != "" {
		steps, ok := jsonpath.Steps(ex.Aggregation.ItemsPath)
		if !ok {
			return nil, nil
		}
		for _, st := range steps {
			if doc = w.step(doc, st); doc == nil {
				return nil, nil
			}
		}
	} else if doc = w.split(doc); doc == nil {
		return nil, nil
	}
	names, ok := jsonpath.EndNames(ex.Safety.RedactedPaths)
	if !ok || !refsResolveIn(doc, rootDefs) {
		return nil, nil
	}
	wd := widening{names: names}
	if ex.Safety.TruncateItemFields {
		wd.cut = ex.Safety.MaxFieldLength
	}
	if len(rootDefs) > 0 {
		defs = map[string]any{}
		for k, d := range rootDefs {
			// One $defs at the root: "definitions/X" references are
			// rewritten below.
			defs[defName(k)] = wd.schema(d)
		}
	}
	item = wd.schema(rewriteRefs(doc))
	if m, ok := item.(map[string]any); ok && len(m) == 0 {
		return nil, nil
	}
	return item, defs
}

// defName is the name under the root's $defs of a definition kept as
// "$defs/X" or "definitions/X".
func defName(k string) string {
	if name, ok := strings.CutPrefix(k, "$defs/"); ok {
		return name
	}
	return "definitions." + strings.TrimPrefix(k, "definitions/")
}

// rewriteRefs points the "#/definitions/X" references of s at the root's
// $defs (defName), in place.
func rewriteRefs(s any) any {
	switch t := s.(type) {
	case map[string]any:
		for k, v := range t {
			if ref, ok := v.(string); ok && k == "$ref" {
				if name, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
					t[k] = "#/$defs/definitions." + name
				}
				continue
			}
			t[k] = rewriteRefs(v)
		}
	case []any:
		for i, v := range t {
			t[i] = rewriteRefs(v)
		}
	}
	return s
}

// refsResolveIn reports whether every reference in s (and in the
// definitions it reaches) is to a definition of defs, which the schema
// holding it carries at its root.
func refsResolveIn(s any, defs map[string]any) bool {
	ok := true
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				if ref, isRef := x.(string); isRef && (k == "$ref" || k == "$dynamicRef") {
					name, cut := strings.CutPrefix(ref, "#/")
					if _, has := defs[name]; !cut || !has {
						ok = false
					}
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(s)
	for _, d := range defs {
		walk(d)
	}
	return ok
}

// walker follows the steps of an items_path through a document schema.
type walker struct{ defs map[string]any }

// resolve is s with references to definitions followed and a nullable
// union (anyOf or oneOf with one branch that is not null, an allOf of
// one) reduced to its one other branch, for the next step: nil when s
// is not one object schema to step into.
func (w walker) resolve(s any) map[string]any {
	for range 16 { // references of references, bounded
		m, ok := s.(map[string]any)
		if !ok {
			return nil
		}
		if ref, ok := m["$ref"].(string); ok {
			name, cut := strings.CutPrefix(ref, "#/")
			d, has := w.defs[name]
			if !cut || !has {
				return nil
			}
			s = d
			continue
		}
		var branch any
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			list, ok := m[k].([]any)
			if !ok {
				continue
			}
			var others []any
			for _, b := range list {
				if bm, ok := b.(map[string]any); ok && bm["type"] == "null" {
					continue
				}
				others = append(others, b)
			}
			if len(others) != 1 || branch != nil {
				return nil
			}
			branch = others[0]
		}
		if branch == nil {
			return m
		}
		if _, ok := m["properties"]; ok {
			return nil // both its own members and a branch's
		}
		s = branch
	}
	return nil
}

// step is the schema of what one step of a query selects in a value of
// schema s: {} (any value) where s does not say, nil where the walk
// cannot go on.
func (w walker) step(s any, st jsonpath.Step) any {
	m := w.resolve(s)
	if m == nil {
		return nil
	}
	if st.Name != "" {
		if props, ok := m["properties"].(map[string]any); ok {
			if p, ok := props[st.Name]; ok {
				return p
			}
		}
		if ap, ok := m["additionalProperties"]; ok {
			if _, isBool := ap.(bool); !isBool {
				return ap
			}
		}
		return map[string]any{}
	}
	if it, ok := m["items"]; ok {
		if _, isBool := it.(bool); !isBool {
			return it
		}
	}
	return map[string]any{}
}

// split is the schema of the items of a document without items_path: an
// array's elements, anything else whole; nil when s may be either.
func (w walker) split(s any) any {
	m := w.resolve(s)
	if m == nil {
		return nil
	}
	switch t := m["type"].(type) {
	case string:
		if t == "array" {
			return w.step(m, jsonpath.Step{})
		}
		return s
	case []any:
		if !slices.Contains(t, any("array")) {
			return s
		}
	}
	if _, ok := m["properties"]; ok {
		return nil
	}
	return nil
}

// widening loosens an item schema to what the safety layer makes of
// items: members named in names may be the redaction mark, and strings
// longer than cut bytes (0: none are cut) may end in the truncation mark.
type widening struct {
	names map[string]bool
	cut   int
}

// Keywords whose value is a schema, a list of schemas, or a map of them.
// Others (values such as const, enum, default; not, whose widening would
// narrow; propertyNames, since names are never changed) are left alone.
var (
	subschemaKeywords = []string{"items", "prefixItems", "additionalItems", "contains", "allOf", "anyOf", "oneOf",
		"if", "then", "else", "unevaluatedItems", "unevaluatedProperties"}
	schemaMapKeywords = []string{"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"}
)

// truncatedString matches a string the safety layer cut (truncatedMark).
var truncatedString = map[string]any{"type": "string", "pattern": `…\[truncated [0-9]+ bytes\]$`}

func (w widening) schema(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s // a boolean schema
	}
	for k, v := range m {
		switch {
		case slices.Contains(schemaMapKeywords, k):
			sub, ok := v.(map[string]any)
			if !ok {
				continue
			}
			for name, ps := range sub {
				ps = w.schema(ps)
				if k == "properties" && w.names[name] || k == "patternProperties" && len(w.names) > 0 {
					ps = orRedacted(ps)
				}
				sub[name] = ps
			}
		case k == "additionalProperties":
			m[k] = w.schema(v)
			if len(w.names) > 0 {
				m[k] = orRedacted(m[k])
			}
		case slices.Contains(subschemaKeywords, k):
			if list, ok := v.([]any); ok {
				for i, e := range list {
					list[i] = w.schema(e)
				}
			} else {
				m[k] = w.schema(v)
			}
		}
	}
	if w.cut > 0 && w.mayCut(m) {
		return map[string]any{"anyOf": []any{m, truncatedString}}
	}
	return m
}

// mayCut tells whether a string the schema accepts may no longer match
// it once cut to w.cut bytes and marked: when it constrains the string's
// form (pattern, format, a long enum or const value) or its length beyond
// what an uncut string can reach.
func (w widening) mayCut(m map[string]any) bool {
	if _, ok := m["pattern"]; ok {
		return true
	}
	if _, ok := m["format"]; ok {
		return true
	}
	long := func(v any) bool { str, ok := v.(string); return ok && len(str) > w.cut }
	if long(m["const"]) {
		return true
	}
	if list, ok := m["enum"].([]any); ok && slices.ContainsFunc(list, long) {
		return true
	}
	// A string of at most maxLength characters has at most 4×maxLength
	// bytes: within w.cut, no string the schema accepts is cut. A cut
	// string keeps at least w.cut/4 characters.
	if n, ok := m["maxLength"].(float64); ok && 4*n > float64(w.cut) {
		return true
	}
	if n, ok := m["minLength"].(float64); ok && n > float64(w.cut/4) {
		return true
	}
	return false
}

// orRedacted widens a schema to also accept the redaction mark. A
// boolean schema stays: true accepts it already, and false (no such
// member) has no value to redact.
func orRedacted(s any) any {
	if _, ok := s.(bool); ok {
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"const": redact.Mark}}}
}
