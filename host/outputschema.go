package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/host/jsonpath"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/schemacheck"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/internal/telemetry"
)

// What a tool publishes of its results is what it returns. Every tool's
// output schema comes from outputSchema, which derives it from the
// pipeline the tool's results go through — a unary tool's declared or
// adapter-derived schema, a window's envelope with its items as
// window.ItemSchema makes them (items_path, redaction, truncation), a
// session's and a job's tools likewise — and every result is checked
// against the schema its tool published before it leaves the host
// (checkOutput): a client that validates structuredContent (the
// TypeScript SDK and the agent frameworks on it throw -32602 on a
// mismatch) never gets a result that breaks the promise.
//
// On a mismatch the result is not refused, and no client gets a protocol
// error: the data is delivered as text, behind a note naming the first
// mismatch by JSON pointer, with isError set and without
// structuredContent — the one shape every client takes for a tool with
// an output schema (the TypeScript SDK throws -32600 for a result
// without structuredContent unless isError is set). The mismatch is
// counted (crank_output_mismatch_total{tool}, the console's tool table)
// and logged once per tool and mismatchLogInterval.

// mismatchLogInterval is how often a tool's mismatches are logged.
const mismatchLogInterval = time.Minute

// outputSchema is the output schema a tool of op publishes: the one
// derivation of every mode's. A unary tool's is op's own (declared, or
// derived by the adapter and made lenient in expand); a window's is the
// window envelope (window.OutputSchema); a family tool's is its role's.
func outputSchema(op *opsfile.Operation, role string) json.RawMessage {
	if role != "" {
		return familyOutputSchema(op, role)
	}
	if op.Execution != nil {
		return window.OutputSchema(op.Execution)
	}
	return op.OutputSchema
}

func familyOutputSchema(op *opsfile.Operation, role string) json.RawMessage {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	dateTime := map[string]any{"type": "string", "format": "date-time"}
	failure := map[string]any{"type": "object", "description": "Why it failed: a code and a message.",
		"properties": map[string]any{"code": str, "message": str}}
	var props map[string]any
	var required []string
	var defs map[string]any
	if op.Mode == opsfile.ModeSession {
		status := map[string]any{"type": "string", "enum": []string{"active", "stopping", "stopped", "completed", "failed"},
			"description": "active: open, items may still arrive; stopping: a stop is under way; stopped, completed (the upstream ended) and failed are final."}
		switch role {
		case opsfile.RoleStart:
			props = map[string]any{"session_id": str, "status": status, "expires_at": dateTime,
				"idle_timeout_ms": integer, "max_session_lifetime_ms": integer, "poll_tool": str, "stop_tool": str}
			required = []string{"session_id", "status"}
		case opsfile.RolePoll:
			items := map[string]any{"type": "array", "description": "Items that arrived after the cursor, oldest first."}
			var item any
			if item, defs = window.ItemSchema(op.Execution); item != nil {
				items["items"] = item
			}
			props = map[string]any{"session_id": str, "status": status,
				"items":      items,
				"cursor":     map[string]any{"type": "string", "description": "Pass it to the next poll."},
				"has_more":   map[string]any{"type": "boolean", "description": "More items are buffered now: poll again at once."},
				"gaps":       map[string]any{"type": "integer", "description": "Points where the session missed items (skipped or unreadable items, reconnects)."},
				"partial":    map[string]any{"type": "integer", "description": "Items the upstream delivered incomplete (data with errors beside it); they are among the items."},
				"error":      failure,
				"expires_at": dateTime, "end_reason": str}
			required = []string{"session_id", "status", "items", "cursor", "has_more"}
		default:
			props = map[string]any{"session_id": str, "status": status, "buffered_items": integer}
			required = []string{"session_id", "status"}
		}
	} else {
		status := map[string]any{"type": "string", "enum": []string{"queued", "running", "canceling", "succeeded", "failed", "canceled"},
			"description": "succeeded, failed and canceled are final."}
		switch role {
		case opsfile.RoleStart:
			props = map[string]any{"job_id": str, "status": status, "status_tool": str, "result_tool": str, "cancel_tool": str}
			required = []string{"job_id", "status"}
		case opsfile.RoleStatus:
			props = map[string]any{"job_id": str, "status": status, "progress": map[string]any{"description": "The job's latest progress."},
				"created_at": dateTime, "updated_at": dateTime, "finished_at": dateTime, "expires_at": dateTime,
				"error": failure}
			required = []string{"job_id", "status"}
		case opsfile.RoleResult:
			var result map[string]any
			result, defs = jobResultSchema(op)
			props = map[string]any{"job_id": str, "status": status,
				"ready":  map[string]any{"type": "boolean", "description": "The job finished and its outcome is here."},
				"result": result, "text": str,
				"error": failure}
			required = []string{"job_id", "status", "ready"}
		default:
			props = map[string]any{"job_id": str, "status": status}
			required = []string{"job_id", "status"}
		}
	}
	s := map[string]any{"type": "object", "properties": props, "required": required}
	if len(defs) > 0 {
		s["$defs"] = defs
	}
	b, _ := json.Marshal(s)
	return b
}

// jobResultSchema is the schema of a finished job's result: a window's
// result, the operation's own structured content, or — for a job that
// follows the upstream's (status_operation) — what result_path selects
// in its status answer, which nothing here describes. Definitions the
// schema refers to come back apart, for the root.
func jobResultSchema(op *opsfile.Operation) (map[string]any, map[string]any) {
	result := map[string]any{"type": "object", "description": "The operation's result (its structured content)."}
	var rs json.RawMessage
	switch {
	case op.Family != nil && op.Family.Job != nil && op.Family.Job.StatusOperation != "":
		result["description"] = "The upstream job's result: what job.result_path selects in the status operation's last answer (an object; any other value under result)."
		return result, nil
	case op.Execution != nil:
		rs = window.OutputSchema(op.Execution)
	default:
		rs = op.OutputSchema
	}
	var s map[string]any
	if json.Unmarshal(rs, &s) != nil || s == nil {
		return result, nil
	}
	defs, _ := s["$defs"].(map[string]any)
	delete(s, "$defs")
	delete(s, "$schema")
	return s, defs
}

// lenientSchema is an adapter-derived output or item schema as a tool
// publishes it: as derived with strict, else lenient where vendors'
// answers drift from their documents — objects admit members the
// document does not name (additionalProperties and unevaluatedProperties
// false are dropped), and a format is said in the description instead of
// being a keyword that clients check (ajv-formats refuses a "byte" that
// is not base64, a "date-time" without a zone, …). Types, required
// members, enums and the rest stay: they are what a client relies on.
func lenientSchema(raw json.RawMessage, strict bool) json.RawMessage {
	if strict || len(raw) == 0 || !bytes.Contains(raw, []byte(`"format"`)) && !bytes.Contains(raw, []byte(`Properties"`)) {
		return raw
	}
	s, err := jsonpath.Decode(raw)
	if err != nil {
		return raw // its check reports it
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(lenient(s)) != nil {
		return raw
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// lenient loosens one schema (and its subschemas) in place.
func lenient(s any) any {
	t, ok := s.(map[string]any)
	if !ok {
		return s // a boolean schema
	}
	for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
		if v, ok := t[k].(bool); ok && !v {
			delete(t, k)
		}
	}
	if f, ok := t["format"].(string); ok {
		delete(t, "format")
		note := "Format: " + f + "."
		if d, _ := t["description"].(string); d != "" {
			note = strings.TrimRight(d, " ") + " (" + note + ")"
		}
		t["description"] = note
	}
	for k, v := range t {
		switch k {
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
			if m, ok := v.(map[string]any); ok {
				for name, sub := range m {
					m[name] = lenient(sub)
				}
			}
		case "items", "prefixItems", "additionalItems", "contains", "allOf", "anyOf", "oneOf",
			"if", "then", "else", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames":
			if list, ok := v.([]any); ok {
				for i, sub := range list {
					list[i] = lenient(sub)
				}
			} else {
				t[k] = lenient(v)
			}
		}
	}
	return s
}

// outputChecks are the compiled output schemas of a host's tools, by the
// tool resolved (a Tool's boundOp): compiled on a tool's first result.
type outputChecks struct {
	off    atomic.Bool // SetOutputCheck(false): for benchmarks of its cost
	byTool sync.Map    // *boundOp → *outputCheck
	logged sync.Map    // tool name → *atomic.Int64, when its mismatch was last logged (unix ns)
}

type outputCheck struct {
	once   sync.Once
	schema *schemacheck.Schema // nil: the tool publishes none, or it does not compile
}

// compiled returns op's published output schema, compiled.
func (oc *outputChecks) compiled(op *boundOp) *schemacheck.Schema {
	v, ok := oc.byTool.Load(op)
	if !ok {
		v, _ = oc.byTool.LoadOrStore(op, &outputCheck{})
	}
	c := v.(*outputCheck)
	c.once.Do(func() {
		if len(op.OutputSchema) == 0 {
			return
		}
		c.schema, _ = schemacheck.Compile(op.OutputSchema, schemacheck.Results)
	})
	return c.schema
}

// SetOutputCheck turns the check of results against their tools'
// output schemas on (the default) or off. Only benchmarks turn it off,
// to measure what it costs a call in the same run.
func (h *Host) SetOutputCheck(on bool) { h.outputs.off.Store(!on) }

// checkOutput returns res when its structured content matches the output
// schema op publishes, else res delivered as text with a note naming the
// first mismatch (see the top of this file), counted and logged.
func (h *Host) checkOutput(op *boundOp, res *Result) *Result {
	if res == nil || len(res.Structured) == 0 || len(op.OutputSchema) == 0 || h.outputs.off.Load() {
		return res
	}
	schema := h.outputs.compiled(op)
	if schema == nil {
		return res
	}
	var v any
	if err := json.Unmarshal(res.Structured, &v); err != nil {
		return h.outputMismatch(op, res, "", "structuredContent is not JSON: "+err.Error())
	}
	f := schema.Check(v)
	if f == nil {
		return res
	}
	return h.outputMismatch(op, res, f.Pointer, f.Reason)
}

// outputMismatch is res delivered as text behind a note, counted and
// logged once per tool and interval.
func (h *Host) outputMismatch(op *boundOp, res *Result, ptr, reason string) *Result {
	telemetry.OutputMismatch(op.Name)
	at := ptr
	if at == "" {
		at = "the root"
	}
	reason = h.redact.String(reason)
	v, _ := h.outputs.logged.LoadOrStore(op.Name, new(atomic.Int64))
	last := v.(*atomic.Int64)
	now := time.Now().UnixNano()
	if prev := last.Load(); now-prev >= int64(mismatchLogInterval) && last.CompareAndSwap(prev, now) {
		h.log.Warn("a result does not match its tool's published output schema; delivered as text",
			zap.String("tool", op.Name), zap.String("pointer", ptr), zap.String("mismatch", reason),
			zap.Duration("logged_at_most_every", mismatchLogInterval))
	}
	note := fmt.Sprintf("The answer does not match the output schema tool %q publishes (at %s: %s), so it comes as text, not as structuredContent.",
		op.Name, at, reason)
	out := *res
	out.Structured, out.IsError = nil, true
	if out.class == "" {
		out.class = OutcomeOutputMismatch
	}
	if c := bytes.TrimSpace(res.Content); len(c) > 1 && c[0] == '[' {
		// The adapter's own content blocks (an MCP upstream's), the note
		// first.
		block, _ := json.Marshal(map[string]string{"type": "text", "text": note})
		rest := bytes.TrimSpace(c[1:])
		if rest[0] != ']' {
			block = append(block, ',')
		}
		out.Content = append(append([]byte{'['}, block...), rest...)
		return &out
	}
	data := string(res.Structured)
	if res.Text != "" && res.Text != data {
		data = res.Text + "\n\n" + data
	}
	out.Text = note + "\n\n" + data
	return &out
}
