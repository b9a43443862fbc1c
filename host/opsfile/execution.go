package opsfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/window"

	"github.com/crankmcp/crank/plugins/sdk"
)

// What the tags of Limits and JobConfig cannot state: the defaults that
// differ by mode, and the bounds of a session's buffer and of a window's
// cursor. The other defaults and bounds are the tags'.
const (
	// DefaultStreamSessionIdleTimeout is a session's idle_timeout_ms when
	// the entry sets none (at most its max_session_lifetime_ms); a window
	// has no idle timeout unless it sets one.
	DefaultStreamSessionIdleTimeout = 2 * time.Minute
	// maxStreamSessionBufferItems bounds a session's max_items (the
	// store's item buffer).
	maxStreamSessionBufferItems = 100_000

	// DefaultJobRuntime bounds an async_job of one request that sets no
	// timeout.
	DefaultJobRuntime = time.Hour
	// WindowGrace is added to the window duration for the default call
	// timeout: time to end the upstream and build the result.
	WindowGrace = 5 * time.Second
)

// ExecutionDecl is how an entry (or a tool its adapter derived, in its
// execution_json) reads its upstream and bounds what it collects: a
// window, a session's reader, or the window an async_job collects.
type ExecutionDecl struct {
	TransportBehavior window.TransportBehavior `json:"transport_behavior,omitempty" enum:"server_stream,request_response" jsonschema:"How a window, session or async_job reads its upstream: its stream (server_stream, the default) or repeated requests (request_response, polling). A unary operation makes requests."`
	Limits            window.Limits            `json:"limits,omitzero" jsonschema:"Bounds of what is collected; every limit applies, a field left out takes its default."`
	Aggregation       window.Aggregation       `json:"aggregation,omitzero" jsonschema:"How the items become the result; paths are RFC 9535 JSONPath queries."`
	Safety            window.Safety            `json:"safety,omitzero" jsonschema:"What every item goes through where it leaves the adapter boundary, in this order."`
}

// preset is a named set of defaults for an operation.
type preset struct {
	mode        Mode
	transport   window.TransportBehavior
	limits      window.Limits
	aggregation window.Aggregation
	input       string
	describe    string
}

// presets: openai_chat turns an OpenAI-compatible chat completions stream
// (vLLM, Ollama, llama.cpp server, ...) into a streaming text tool.
var presets = map[string]preset{
	"openai_chat": {
		mode:      ModeWindow,
		transport: window.ServerStream,
		limits:    window.Limits{WindowDurationMS: 120_000, UpstreamTimeoutMS: 60_000, MaxItems: 100_000, MaxBytes: 8 << 20},
		aggregation: window.Aggregation{Mode: window.AggText, TextPath: "$.choices[0].delta.content",
			FinishPath: "$.choices[0].finish_reason", UsagePath: "$.usage"},
		input: `{"type":"object","properties":{` +
			`"messages":{"type":"array","minItems":1,"description":"The conversation, oldest first.","items":{"type":"object",` +
			`"properties":{"role":{"type":"string","enum":["system","user","assistant"]},"content":{"type":"string"}},"required":["role","content"]}},` +
			`"temperature":{"type":"number","minimum":0,"maximum":2},` +
			`"max_tokens":{"type":"integer","minimum":1}},` +
			`"required":["messages"]}`,
	},
}

// execDecl is the execution part of an entry, decoded: has says whether
// the entry wrote the field at a pointer within it.
type execDecl struct {
	ExecutionDecl
	mode   Mode
	preset string
	has    func(ptr string) bool
}

// underPreset sets the fields of *dst (Limits or Aggregation) the entry
// left out to the preset's src, where it has one.
func underPreset[T any](dst *T, src T, block string, has func(string) bool) {
	dv, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for i := range sv.NumField() {
		name, _, _ := strings.Cut(sv.Type().Field(i).Tag.Get("json"), ",")
		if f := sv.Field(i); !f.IsZero() && !has(block+"/"+name) {
			dv.Field(i).Set(f)
		}
	}
}

// ParseExecutionJSON checks an execution config written as JSON (a
// derived tool's execution_json, an ExecutionDecl) as an entry's in mode.
func ParseExecutionJSON(mode Mode, raw json.RawMessage, fail func(ptr, format string, args ...any)) *window.Config {
	d := execDecl{mode: mode}
	dec, diags := sdk.Decode(raw, &d.ExecutionDecl)
	if errs, _ := DiagnosticProblems("", diags); len(errs) > 0 {
		for _, p := range errs {
			fail(p.Pointer, "%s", p.Message)
		}
		return nil
	}
	d.has = dec.Has
	return parseExecution(d, fail)
}

// parseExecution checks the execution config of one entry: a window, a
// session's upstream reader, or the window an async_job collects. It
// returns nil for an operation that collects nothing (unary, or an
// async_job of one request). What one field's tags say, decoding
// checked; fail reports what only the entry as a whole says, at a
// pointer within the entry.
func parseExecution(d execDecl, fail func(ptr, format string, args ...any)) *window.Config {
	pr, hasPreset := presets[d.preset]
	blocks := d.has("/limits") || d.has("/aggregation") || d.has("/safety")
	collects := d.mode == ModeWindow || d.mode == ModeSession ||
		(d.mode == ModeAsyncJob && (d.TransportBehavior != "" || hasPreset || blocks))
	if !collects {
		if hasPreset {
			fail("/preset", "preset %q needs mode window (this operation is %s)", d.preset, d.mode)
		}
		if d.TransportBehavior == window.ServerStream {
			fail("/transport_behavior", "server_stream needs mode window, session or async_job (a %s operation is request_response): a stream must be bounded", d.mode)
		}
		for _, b := range []string{"/limits", "/aggregation", "/safety"} {
			if d.has(b) {
				fail(b, "only applies to modes window, session and async_job (this operation is %s)", d.mode)
			}
		}
		return nil
	}

	ex := &window.Config{TransportBehavior: window.ServerStream, Preset: d.preset, Limits: d.Limits, Aggregation: d.Aggregation, Safety: d.Safety}
	if hasPreset {
		ex.TransportBehavior = pr.transport
		underPreset(&ex.Limits, pr.limits, "/limits", d.has)
		underPreset(&ex.Aggregation, pr.aggregation, "/aggregation", d.has)
	}
	if d.TransportBehavior != "" {
		ex.TransportBehavior = d.TransportBehavior
	}

	// limits
	l := &ex.Limits
	if d.mode == ModeSession {
		// A session reads until stopped, idle or its lifetime ends; the
		// lifetime stands in for the window duration of its reader.
		if d.has("/limits/window_duration_ms") {
			fail("/limits/window_duration_ms", "does not apply to mode session: idle_timeout_ms and max_session_lifetime_ms bound a session")
		}
		if l.MaxItems > maxStreamSessionBufferItems {
			fail("/limits/max_items", "must be at most %d for a session (its buffer in the store), got %d", maxStreamSessionBufferItems, l.MaxItems)
		}
		switch {
		case !d.has("/limits/idle_timeout_ms"):
			l.IdleTimeoutMS = min(DefaultStreamSessionIdleTimeout.Milliseconds(), l.MaxSessionLifetimeMS)
		case l.IdleTimeoutMS == 0:
			fail("/limits/idle_timeout_ms", "must be at least 1 for a session, got 0")
		case l.IdleTimeoutMS > l.MaxSessionLifetimeMS:
			fail("/limits/idle_timeout_ms", "must not exceed max_session_lifetime_ms (%d)", l.MaxSessionLifetimeMS)
		}
		l.WindowDurationMS = l.MaxSessionLifetimeMS
	} else {
		if d.has("/limits/max_session_lifetime_ms") {
			fail("/limits/max_session_lifetime_ms", "only applies to mode session (this operation is %s: its window_duration_ms bounds it)", d.mode)
		}
		l.MaxSessionLifetimeMS = 0
		if d.has("/limits/idle_timeout_ms") && l.IdleTimeoutMS >= l.WindowDurationMS {
			fail("/limits/idle_timeout_ms", "must be shorter than window_duration_ms (%d)", l.WindowDurationMS)
		}
	}
	if ex.TransportBehavior == window.ServerStream {
		if d.has("/limits/poll_interval_ms") {
			fail("/limits/poll_interval_ms", "only applies to transport_behavior request_response (this window reads a stream)")
		}
		l.PollIntervalMS = 0
	}

	// aggregation
	a := &ex.Aggregation
	if d.mode == ModeSession {
		if a.Mode != window.AggRawItems {
			fail("/aggregation/aggregation_mode", "a session hands out its items: aggregation_mode must be raw_items (got %s)", a.Mode)
		}
		for _, k := range []string{"group_by", "summary_path", "sample_size"} {
			if d.has("/aggregation/" + k) {
				fail("/aggregation/"+k, "not used by mode session (its polls return items, not a summary)")
			}
		}
	}
	for _, pf := range []struct {
		key string
		dst *string
		out **jsonpath.Path
	}{
		{"items_path", &a.ItemsPath, &ex.Paths.Items},
		{"summary_path", &a.SummaryPath, &ex.Paths.Summary},
		{"cursor_path", &a.CursorPath, &ex.Paths.Cursor},
		{"status_path", &a.StatusPath, &ex.Paths.Status},
		{"done_path", &a.DonePath, &ex.Paths.Done},
		{"group_by", &a.GroupBy, &ex.Paths.GroupBy},
		{"value_path", &a.ValuePath, &ex.Paths.Value},
		{"key_path", &a.KeyPath, &ex.Paths.Key},
		{"text_path", &a.TextPath, &ex.Paths.Text},
		{"finish_reason_path", &a.FinishPath, &ex.Paths.Finish},
		{"usage_path", &a.UsagePath, &ex.Paths.Usage},
	} {
		if *pf.dst == "" {
			continue
		}
		p, err := jsonpath.Compile(*pf.dst)
		if err != nil {
			fail("/aggregation/"+pf.key, "%v", err)
			continue
		}
		*pf.out = p
	}
	// Fields that only one mode reads are refused elsewhere, so a typo in
	// the mode does not silently ignore them.
	onlyFor := func(key string, set bool, modes ...string) {
		if set && !slices.Contains(modes, a.Mode) {
			fail("/aggregation/"+key, "only used by aggregation_mode %s (this window uses %s)", strings.Join(modes, " or "), a.Mode)
		}
	}
	onlyFor("group_by", a.GroupBy != "", window.AggRawItems, window.AggSummaryOnly, window.AggSummaryPlusSamples)
	onlyFor("sample_size", d.has("/aggregation/sample_size"), window.AggSummaryPlusSamples)
	onlyFor("value_path", a.ValuePath != "", window.AggStats)
	onlyFor("key_path", a.KeyPath != "", window.AggLatestState)
	onlyFor("text_path", a.TextPath != "", window.AggText)
	onlyFor("finish_reason_path", a.FinishPath != "", window.AggText)
	onlyFor("usage_path", a.UsagePath != "", window.AggText)
	if a.Mode != window.AggSummaryPlusSamples {
		a.SampleSize = 0
	}
	switch a.Mode {
	case window.AggStats:
		if a.ValuePath == "" {
			fail("/aggregation/value_path", "is required by aggregation_mode stats: the JSONPath of the numeric value, e.g. $.latency_ms")
		}
	case window.AggLatestState:
		if a.KeyPath == "" {
			fail("/aggregation/key_path", "is required by aggregation_mode latest_state: the JSONPath of the key, e.g. $.host")
		}
	case window.AggText:
		if a.TextPath == "" {
			fail("/aggregation/text_path", "is required by aggregation_mode text: the JSONPath of each chunk's text")
		}
	}

	// safety
	s := &ex.Safety
	if !s.TruncateItemFields {
		if d.has("/safety/max_field_length") {
			fail("/safety/max_field_length", "is set but truncate_item_fields is false")
		}
		s.MaxFieldLength = 0
	}
	for i, rp := range s.RedactedPaths {
		p, err := jsonpath.Compile(rp)
		if err != nil {
			fail(fmt.Sprintf("/safety/redacted_paths/%d", i), "%v", err)
			continue
		}
		ex.Paths.Redact = append(ex.Paths.Redact, p)
	}
	return ex
}

// ToolMeta is a tool's _meta: what its adapter derived for it (op.Meta, an
// MCP upstream's own such as MCP Apps' "ui"; not on the tools of a family,
// which are the gateway's) and, over it, what the gateway says of its
// execution (executionMeta).
func (op *Operation) ToolMeta() map[string]any {
	own := op.executionMeta()
	if len(op.Meta) == 0 || op.Role != "" {
		return own
	}
	meta := maps.Clone(op.Meta)
	maps.Copy(meta, own)
	return meta
}

// executionMeta is what a tool's _meta says about its execution, so
// clients can tell a streaming tool: {"io.crank/execution": {...}} and,
// for text streams, "stream_type": "text".
//
// The tools of a session or async_job family say which family and role
// they are: {"io.crank/execution": {"mode": "session", "role": "poll",
// "tools": {"start": ..., "poll": ..., "stop": ...}, ...}}.
func (op *Operation) executionMeta() map[string]any {
	if op.Family != nil && op.Role != "" {
		m := map[string]any{"mode": string(op.Mode), "role": op.Role, "tools": op.Family.Names}
		if op.Mode == ModeSession {
			l := op.Execution.Limits
			m["transport_behavior"] = string(op.Execution.TransportBehavior)
			m["limits"] = map[string]any{"idle_timeout_ms": l.IdleTimeoutMS, "max_session_lifetime_ms": l.MaxSessionLifetimeMS,
				"max_items": l.MaxItems, "max_bytes": l.MaxBytes}
		} else {
			m["timeout_ms"] = op.Timeout.Milliseconds()
			m["retention_ms"] = op.Family.Job.RetentionMS
		}
		return map[string]any{"io.crank/execution": m}
	}
	ex := op.Execution
	if ex == nil {
		return nil
	}
	progress := "items"
	if ex.Aggregation.Mode == window.AggText {
		progress = "text"
	}
	meta := map[string]any{
		"io.crank/execution": map[string]any{
			"mode":               string(op.Mode),
			"transport_behavior": string(ex.TransportBehavior),
			"aggregation_mode":   ex.Aggregation.Mode,
			"limits":             ex.Limits,
			"progress":           progress,
		},
	}
	if progress == "text" {
		meta["stream_type"] = "text"
	}
	return meta
}
