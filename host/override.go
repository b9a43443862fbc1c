package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
)

// toolExecution gives op, one tool expanded from entry, the mode, window
// config and item schema its adapter derived (Tool.mode, execution_json,
// item_schema_json), checked as an entry's are. The entry itself (self)
// keeps a window config its operator wrote; a derived tool's own config
// replaces its entry's. Problems name the tool and the field. A tool's
// execution_json is an ExecutionDecl: the execution part of an entry,
// without mode and preset (the tool's mode travels in Tool.mode; presets
// are the operator's).
func toolExecution(entry, op *Operation, t *sdk.Tool, self bool, sup *Supervisor) error {
	mode := t.Mode
	raw := bytes.TrimSpace(t.Execution)
	item := bytes.TrimSpace(t.ItemSchema)
	if self && entry.Execution != nil || entry.Family != nil {
		// The operator's config wins: a window entry's own, and always a
		// session's or async_job's (its tools read the upstream the way
		// the entry says; a derived item schema still describes items).
		mode, raw = 0, nil
	}
	var problems []string
	fail := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	m := entry.Mode
	switch mode {
	case 0: // the entry's
	case sdk.ModeUnary:
		m = ModeUnary
	case sdk.ModeWindow:
		m = ModeWindow
	default:
		fail("/mode", "the adapter gave it mode %s; a derived tool is unary or window", mode)
	}
	if len(problems) == 0 && (m != entry.Mode || len(raw) > 0) {
		if m != entry.Mode && !sup.Description().Serves(sdkMode(m)) {
			fail("/mode", "adapter %q does not serve mode %q", entry.Adapter, m)
		}
		var ex *Execution
		if len(problems) == 0 {
			ex = parseExecutionJSON(m, raw, fail)
		}
		if ex != nil && ex.TransportBehavior == ServerStream && !sup.Description().Capabilities.Stream {
			fail("/transport_behavior", "adapter %q cannot stream: use request_response to poll it", entry.Adapter)
		}
		op.Mode, op.Execution = m, ex
		if ex != nil {
			// The window bounds the call; the entry's timeout is for
			// its unary tools.
			op.Timeout = ex.Window() + windowGrace
		}
	}
	if len(problems) == 0 && len(item) > 0 && op.Execution != nil {
		ex := *op.Execution
		ex.itemSchema = json.RawMessage(item)
		if err := checkOutputSchema(windowOutputSchema(&ex)); err != nil {
			fail("/item_schema", "the derived item schema is not usable: %v", err)
		}
		op.Execution = &ex
	}
	if len(problems) > 0 {
		return fmt.Errorf("tool %q: %s", op.Name, strings.Join(problems, "; "))
	}
	return nil
}

// itemsWithSchema describes a window's items with the schema of one
// upstream item, for the aggregation modes whose items are the upstream's
// own. Its $defs move to the output schema's root, where its "#/$defs/..."
// references then resolve. The schema is widened to what the safety layer
// makes of items: a member a redacted path ends in may be "[REDACTED]",
// and a string max_field_length may cut ends with the truncation mark;
// when a redacted path does not end in member names, any value may be
// redacted, and the items are left undescribed.
func itemsWithSchema(root, items map[string]any, ex *Execution) {
	if len(ex.itemSchema) == 0 || ex.Aggregation.Mode != AggRawItems && ex.Aggregation.Mode != AggSummaryPlusSamples {
		return
	}
	var item any
	if json.Unmarshal(ex.itemSchema, &item) != nil {
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
