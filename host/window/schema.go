package window

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/redact"
)

// CursorArgument is the argument a window tool takes to continue where
// the previous window ended.
const CursorArgument = "cursor"

// InputSchema adds the cursor argument to a window tool's input schema.
// A schema that already has a cursor property is refused.
func InputSchema(raw json.RawMessage) (json.RawMessage, error) {
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
	props[CursorArgument] = map[string]any{
		"type":        "string",
		"description": "Continue after the previous window: pass the cursor it returned, unchanged (no other is taken). Omit for a fresh window.",
	}
	m["properties"] = props
	return json.Marshal(m)
}

// OutputSchema is the JSON Schema of a window result's
// structuredContent (Result).
func OutputSchema(ex *Config) json.RawMessage {
	var summary map[string]any
	switch ex.Aggregation.Mode {
	case AggStats:
		num := map[string]any{"type": "number"}
		summary = map[string]any{"type": "object", "properties": map[string]any{
			"count": map[string]any{"type": "integer"}, "numeric": map[string]any{"type": "integer"},
			"non_numeric": map[string]any{"type": "integer"},
			"min":         num, "max": num, "avg": num, "p50": num, "p95": num, "sum": num,
		}}
	case AggLatestState:
		summary = map[string]any{"type": "object", "properties": map[string]any{
			"count": map[string]any{"type": "integer"}, "keys": map[string]any{"type": "integer"},
			"state": map[string]any{"type": "object", "description": "The last value seen for each key."},
		}}
	case AggText:
		summary = map[string]any{"type": "object", "properties": map[string]any{
			"text":          map[string]any{"type": "string", "description": "The chunks' text, joined."},
			"finish_reason": map[string]any{"type": "string"},
			"usage":         map[string]any{"description": "The upstream's token usage, when it sent one."},
			"chunks":        map[string]any{"type": "integer"},
		}}
	default:
		summary = map[string]any{"type": "object", "properties": map[string]any{
			"count":    map[string]any{"type": "integer", "description": "Items counted in the window."},
			"counts":   map[string]any{"type": "object", "description": "Items per value of the group_by field.", "additionalProperties": map[string]any{"type": "integer"}},
			"upstream": map[string]any{"description": "The upstream's own summary (summary_path) of the last answer."},
		}}
	}
	integer := map[string]any{"type": "integer"}
	items := map[string]any{"type": "array", "description": "The window's items (aggregation_mode " + ex.Aggregation.Mode + ")."}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"items":   items,
			"summary": summary,
			"stats": map[string]any{"type": "object", "properties": map[string]any{
				"received": integer, "counted": integer, "returned": integer, "dropped_duplicates": integer,
				"sampled_out": integer, "skipped_oversize": integer, "fields_truncated": integer, "redacted": integer,
				"bytes": integer, "duration_ms": integer, "polls": integer, "retries": integer,
			}},
			"truncated":       map[string]any{"type": "boolean", "description": "Data was left out: a limit cut the window, or items or fields were cut or skipped."},
			"window_complete": map[string]any{"type": "boolean", "description": "The window ran its course: its duration elapsed, the upstream said it was done, or the stream ended."},
			"has_more":        map[string]any{"type": "boolean", "description": "The upstream may have more after cursor."},
			"cursor":          map[string]any{"type": "string", "description": "Pass it back as the cursor argument to get the next window."},
			"end_reason": map[string]any{"type": "string", "enum": []string{
				EndWindowDuration, EndMaxItems, EndMaxBytes, EndUpstreamTimeout, EndIdleTimeout, EndDone, EndUpstreamEnd, EndUpstreamError, EndCancelled}},
			"status": map[string]any{"description": "The upstream's status (status_path) in its last answer."},
			"gaps":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Points where items may have been lost."},
			"error":  map[string]any{"type": "string", "description": "Why the upstream failed, when it did."},
		},
		"required": []string{"items", "summary", "stats", "truncated", "window_complete", "has_more", "end_reason"},
	}
	itemsWithSchema(schema, items, ex)
	b, _ := json.Marshal(schema)
	return b
}

// itemsWithSchema describes a window's items with the schema of one
// upstream item, for the aggregation modes whose items are the upstream's
// own. Its $defs move to the output schema's root, where its "#/$defs/..."
// references then resolve. The schema is widened to what the safety layer
// makes of items: a member a redacted path ends in may be "[REDACTED]",
// and a string max_field_length may cut ends with the truncation mark;
// when a redacted path does not end in member names, any value may be
// redacted, and the items are left undescribed.
func itemsWithSchema(root, items map[string]any, ex *Config) {
	if len(ex.ItemSchema) == 0 || ex.Aggregation.Mode != AggRawItems && ex.Aggregation.Mode != AggSummaryPlusSamples {
		return
	}
	var item any
	if json.Unmarshal(ex.ItemSchema, &item) != nil {
		return
	}
	names, ok := jsonpath.EndNames(ex.Safety.RedactedPaths)
	if !ok {
		return
	}
	w := widening{names: names}
	if ex.Safety.TruncateItemFields {
		w.cut = ex.Safety.MaxFieldLength
	}
	if m, ok := item.(map[string]any); ok {
		delete(m, "$schema")
		if defs, ok := m["$defs"].(map[string]any); ok {
			delete(m, "$defs")
			for k, d := range defs {
				defs[k] = w.schema(d)
			}
			root["$defs"] = defs
		}
	}
	items["items"] = w.schema(item)
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
