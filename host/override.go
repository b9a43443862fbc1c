package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/theory/jsonpath/spec"

	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// hostCapabilities are what the host reads in an ExpandOperation answer
// beyond the protocol's first release (ExpandOperationRequest.
// host_capabilities).
var hostCapabilities = []string{sdk.HostToolExecution}

// executionFields are the fields of a tool's execution_json: the
// execution part of an operations-file entry, without mode and preset
// (the tool's mode travels in Tool.mode; presets are the operator's).
var executionFields = []string{"transport_behavior", "limits", "aggregation", "safety"}

// toolExecution gives op, one tool expanded from entry, the mode, window
// config and item schema its adapter derived (Tool.mode, execution_json,
// item_schema_json), checked as an entry's are. The entry itself (self)
// keeps a window config its operator wrote; a derived tool's own config
// replaces its entry's. Problems name the tool and the field.
func toolExecution(entry, op *Operation, t *adapterv1.Tool, self bool, sup *Supervisor) error {
	mode := t.GetMode()
	raw := bytes.TrimSpace(t.GetExecutionJson())
	item := bytes.TrimSpace(t.GetItemSchemaJson())
	if self && entry.Execution != nil {
		mode, raw = adapterv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED, nil
	}
	var problems []string
	fail := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	m := entry.Mode
	switch mode {
	case adapterv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED:
	case adapterv1.ExecutionMode_EXECUTION_MODE_UNARY:
		m = ModeUnary
	case adapterv1.ExecutionMode_EXECUTION_MODE_WINDOW:
		m = ModeWindow
	default:
		fail("mode", "the adapter gave it mode %s; a derived tool is unary or window", strings.ToLower(strings.TrimPrefix(mode.String(), "EXECUTION_MODE_")))
	}
	if len(problems) == 0 && (m != entry.Mode || len(raw) > 0) {
		if m != entry.Mode && !hasMode(sup.Description(), protoMode(m)) {
			fail("mode", "adapter %q does not serve mode %q", entry.Adapter, m)
		}
		d := execDecl{label: op.Name, mode: m}
		if len(raw) > 0 {
			blocks := openBlock("execution", raw, executionFields, fail)
			blocks.str("transport_behavior", &d.transport) // checked by parseExecution
			d.limits, d.aggregation, d.safety = blocks.fields["limits"], blocks.fields["aggregation"], blocks.fields["safety"]
		}
		var ex *Execution
		if len(problems) == 0 {
			ex = parseExecution(d, fail)
		}
		if ex != nil && ex.TransportBehavior == ServerStream && !hasCapability(sup.Description(), "stream") {
			fail("transport_behavior", "adapter %q cannot stream: use request_response to poll it", entry.Adapter)
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
			fail("item_schema", "the derived item schema is not usable: %v", err)
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
// references then resolve. Values the window redacts may be "[REDACTED]"
// wherever the schema says otherwise; when a redacted path does not end in
// member names, any value may be, and the items are left undescribed.
func itemsWithSchema(root, items map[string]any, ex *Execution) {
	if len(ex.itemSchema) == 0 || ex.Aggregation.Mode != AggRawItems && ex.Aggregation.Mode != AggSummaryPlusSamples {
		return
	}
	var item any
	if json.Unmarshal(ex.itemSchema, &item) != nil {
		return
	}
	if m, ok := item.(map[string]any); ok {
		if defs, ok := m["$defs"]; ok {
			root["$defs"] = defs
			delete(m, "$defs")
		}
		delete(m, "$schema")
	}
	redacted, ok := redactedNames(ex.Safety.RedactedPaths)
	if !ok {
		return
	}
	if len(redacted) > 0 {
		item = allowRedacted(item, redacted)
		if defs, ok := root["$defs"]; ok {
			root["$defs"] = allowRedacted(defs, redacted)
		}
	}
	items["items"] = item
}

// redactedNames returns the member names redacted_paths end in; ok is
// false when one path ends elsewhere (an index, a wildcard, a filter or
// the root), so that any value may be redacted.
func redactedNames(paths []string) (names map[string]bool, ok bool) {
	names = map[string]bool{}
	for _, s := range paths {
		p, err := parsePath(s)
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

// allowRedacted lets every property named in names (at any depth of the
// schema s, and any property an additionalProperties or patternProperties
// schema covers) also be the redaction mark.
func allowRedacted(s any, names map[string]bool) any {
	switch t := s.(type) {
	case map[string]any:
		for k, v := range t {
			switch k {
			case "const", "enum", "default", "examples", "example", "not":
				// Values, not schemas; or a schema whose widening
				// would narrow.
				continue
			case "properties":
				props, ok := v.(map[string]any)
				if !ok {
					continue
				}
				for name, ps := range props {
					props[name] = allowRedacted(ps, names)
					if names[name] {
						props[name] = orRedacted(props[name])
					}
				}
			case "additionalProperties":
				t[k] = orRedacted(allowRedacted(v, names))
			case "patternProperties":
				if pp, ok := v.(map[string]any); ok {
					for pk, pv := range pp {
						pp[pk] = orRedacted(allowRedacted(pv, names))
					}
				}
			default:
				t[k] = allowRedacted(v, names)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = allowRedacted(e, names)
		}
	}
	return s
}

// orRedacted widens a schema to also accept the redaction mark. A
// boolean schema stays: true accepts it already, and false (no such
// member) has no value to redact.
func orRedacted(s any) any {
	if _, ok := s.(bool); ok {
		return s
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"const": Redacted}}}
}
