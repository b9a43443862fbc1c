package host

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/host/jsonpath"

	"github.com/crankmcp/crank/plugins/sdk"
)

// TransportBehavior says how a window operation reads its upstream.
type TransportBehavior string

// Transport behaviours.
const (
	// RequestResponse: the upstream answers requests; a window polls it
	// repeatedly (every poll_interval_ms, following cursor_path until
	// done_path).
	RequestResponse TransportBehavior = "request_response"
	// ServerStream: the upstream streams (SSE, gRPC server streaming); a
	// window reads the adapter's Stream until a limit ends it.
	ServerStream TransportBehavior = "server_stream"
)

// Aggregation modes of a window.
const (
	AggRawItems           = "raw_items"
	AggSummaryOnly        = "summary_only"
	AggSummaryPlusSamples = "summary_plus_samples"
	AggStats              = "stats"
	AggLatestState        = "latest_state"
	AggText               = "text"
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
	// store's item buffer); maxItemsLimit is Limits.MaxItems' maximum,
	// which bounds a window cursor's skip too.
	maxStreamSessionBufferItems = 100_000
	maxItemsLimit               = 1_000_000

	// DefaultJobRuntime bounds an async_job of one request that sets no
	// timeout.
	DefaultJobRuntime = time.Hour
	// windowGrace is added to the window duration for the default call
	// timeout: time to end the upstream and build the result.
	windowGrace = 5 * time.Second
)

// ExecutionDecl is how an entry (or a tool its adapter derived, in its
// execution_json) reads its upstream and bounds what it collects: a
// window, a session's reader, or the window an async_job collects.
type ExecutionDecl struct {
	TransportBehavior TransportBehavior `json:"transport_behavior,omitempty" enum:"server_stream,request_response" jsonschema:"How a window, session or async_job reads its upstream: its stream (server_stream, the default) or repeated requests (request_response, polling). A unary operation makes requests."`
	Limits            Limits            `json:"limits,omitzero" jsonschema:"Bounds of what is collected; every limit applies, a field left out takes its default."`
	Aggregation       Aggregation       `json:"aggregation,omitzero" jsonschema:"How the items become the result; paths are RFC 9535 JSONPath queries."`
	Safety            Safety            `json:"safety,omitzero" jsonschema:"What every item goes through where it leaves the adapter boundary, in this order."`
}

// Limits bound a window. Durations are in milliseconds, as written.
type Limits struct {
	WindowDurationMS     int64 `json:"window_duration_ms,omitempty" default:"10000" minimum:"1" maximum:"600000" jsonschema:"How long a window collects, in ms (not for a session: its lifetime bounds its reader)."`
	PollIntervalMS       int64 `json:"poll_interval_ms,omitempty" default:"1000" minimum:"10" maximum:"600000" jsonschema:"request_response only: the pause between polls, in ms."`
	UpstreamTimeoutMS    int64 `json:"upstream_timeout_ms,omitempty" default:"10000" minimum:"1" maximum:"600000" jsonschema:"Bounds each upstream request (a poll, or a stream until the upstream answers), in ms."`
	IdleTimeoutMS        int64 `json:"idle_timeout_ms,omitempty" minimum:"0" maximum:"86400000" jsonschema:"A window: ends early after this long without an item (0 or none: never), shorter than window_duration_ms. A session: ends after this long without a poll (default 120000, at most max_session_lifetime_ms). In ms."`
	MaxSessionLifetimeMS int64 `json:"max_session_lifetime_ms,omitempty" default:"1800000" minimum:"1" maximum:"86400000" jsonschema:"A session only: it ends this long after its start, polled or not, in ms."`
	MaxItems             int   `json:"max_items,omitempty" default:"1000" minimum:"1" maximum:"1000000" jsonschema:"Items counted in a window (a session: its buffer in the store, at most 100000)."`
	MaxBytes             int64 `json:"max_bytes,omitempty" default:"1048576" minimum:"1" maximum:"33554432" jsonschema:"Bytes of items received (a session: its buffer's, and the largest item)."`
}

// Aggregation says how a window's items become its result. Paths are RFC
// 9535 JSONPath queries.
type Aggregation struct {
	Mode        string `json:"aggregation_mode,omitempty" enum:"raw_items,summary_only,summary_plus_samples,stats,latest_state,text" default:"raw_items" jsonschema:"What the result holds: every item (raw_items), counts (summary_only), counts and samples per group (summary_plus_samples), statistics of a value (stats), the last item per key (latest_state), or the items' text joined (text). A session: raw_items."`
	ItemsPath   string `json:"items_path,omitempty" jsonschema:"The items of one upstream document (one stream event's data, one poll answer); without it a JSON array is split into its elements and anything else is one item."`
	SummaryPath string `json:"summary_path,omitempty" jsonschema:"The upstream's own summary of a document, reported in summary.upstream."`
	CursorPath  string `json:"cursor_path,omitempty" jsonschema:"The cursor after a document (polls; a stream uses its event ids)."`
	StatusPath  string `json:"status_path,omitempty" jsonschema:"The upstream's status, reported as the result's status."`
	DonePath    string `json:"done_path,omitempty" jsonschema:"True ends the window (end_reason done)."`
	GroupBy     string `json:"group_by,omitempty" jsonschema:"Counts per value of this path (raw_items, summary_only, summary_plus_samples)."`
	SampleSize  int    `json:"sample_size,omitempty" default:"3" minimum:"1" maximum:"100" jsonschema:"summary_plus_samples: the items kept per group."`
	ValuePath   string `json:"value_path,omitempty" jsonschema:"stats: the numeric value (count, min, max, avg, p50, p95, sum by nearest rank)."`
	KeyPath     string `json:"key_path,omitempty" jsonschema:"latest_state: the key; the last item per key is kept."`
	TextPath    string `json:"text_path,omitempty" jsonschema:"text: each chunk's text, joined into summary.text."`
	FinishPath  string `json:"finish_reason_path,omitempty" jsonschema:"text: the finish reason."`
	UsagePath   string `json:"usage_path,omitempty" jsonschema:"text: the upstream's token usage."`
}

// Safety transforms every item before it leaves the adapter boundary.
type Safety struct {
	TruncateItemFields bool     `json:"truncate_item_fields" default:"true" jsonschema:"Cut strings longer than max_field_length, and mark them."`
	MaxFieldLength     int      `json:"max_field_length,omitempty" default:"4096" minimum:"16" maximum:"1048576" jsonschema:"With truncate_item_fields: the longest string kept whole, in bytes."`
	RedactedPaths      []string `json:"redacted_paths,omitempty" jsonschema:"JSONPath queries whose values are replaced by [REDACTED] in the document and each item, before anything is extracted, counted, sent as progress or logged."`
	DropDuplicates     bool     `json:"drop_duplicates" default:"false" jsonschema:"Drop items equal to an earlier one of the window."`
	SamplingRate       float64  `json:"sampling_rate" default:"1" exclusiveMinimum:"0" maximum:"1" jsonschema:"Keep floor(n*rate) of n items, evenly spaced."`
}

// Execution is the validated execution config of a window operation.
type Execution struct {
	TransportBehavior TransportBehavior `json:"transport_behavior"`
	Preset            string            `json:"preset,omitempty"`
	Limits            Limits            `json:"limits"`
	Aggregation       Aggregation       `json:"aggregation"`
	Safety            Safety            `json:"safety"`

	paths compiledPaths
	// itemSchema is the JSON Schema of one upstream item, when the
	// adapter derived one (see toolExecution).
	itemSchema json.RawMessage
}

type compiledPaths struct {
	items, summary, cursor, status, done *jsonpath.Path
	groupBy, value, key                  *jsonpath.Path
	text, finish, usage                  *jsonpath.Path
	redact                               []*jsonpath.Path
}

// Window returns the window duration.
func (e *Execution) Window() time.Duration { return ms(e.Limits.WindowDurationMS) }

// UpstreamTimeout bounds each upstream request (a poll, or a stream until
// the upstream answers).
func (e *Execution) UpstreamTimeout() time.Duration { return ms(e.Limits.UpstreamTimeoutMS) }

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// preset is a named set of defaults for an operation.
type preset struct {
	mode        Mode
	transport   TransportBehavior
	limits      Limits
	aggregation Aggregation
	input       string
	describe    string
}

// presets: openai_chat turns an OpenAI-compatible chat completions stream
// (vLLM, Ollama, llama.cpp server, ...) into a streaming text tool.
var presets = map[string]preset{
	"openai_chat": {
		mode:      ModeWindow,
		transport: ServerStream,
		limits:    Limits{WindowDurationMS: 120_000, UpstreamTimeoutMS: 60_000, MaxItems: 100_000, MaxBytes: 8 << 20},
		aggregation: Aggregation{Mode: AggText, TextPath: "$.choices[0].delta.content",
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

// parseExecutionJSON checks an execution config written as JSON (a
// derived tool's execution_json, an ExecutionDecl) as an entry's in mode.
func parseExecutionJSON(mode Mode, raw json.RawMessage, fail func(ptr, format string, args ...any)) *Execution {
	d := execDecl{mode: mode}
	dec, diags := sdk.Decode(raw, &d.ExecutionDecl)
	if errs, _ := diagnosticProblems("", diags); len(errs) > 0 {
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
func parseExecution(d execDecl, fail func(ptr, format string, args ...any)) *Execution {
	pr, hasPreset := presets[d.preset]
	blocks := d.has("/limits") || d.has("/aggregation") || d.has("/safety")
	collects := d.mode == ModeWindow || d.mode == ModeSession ||
		(d.mode == ModeAsyncJob && (d.TransportBehavior != "" || hasPreset || blocks))
	if !collects {
		if hasPreset {
			fail("/preset", "preset %q needs mode window (this operation is %s)", d.preset, d.mode)
		}
		if d.TransportBehavior == ServerStream {
			fail("/transport_behavior", "server_stream needs mode window, session or async_job (a %s operation is request_response): a stream must be bounded", d.mode)
		}
		for _, b := range []string{"/limits", "/aggregation", "/safety"} {
			if d.has(b) {
				fail(b, "only applies to modes window, session and async_job (this operation is %s)", d.mode)
			}
		}
		return nil
	}

	ex := &Execution{TransportBehavior: ServerStream, Preset: d.preset, Limits: d.Limits, Aggregation: d.Aggregation, Safety: d.Safety}
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
	if ex.TransportBehavior == ServerStream {
		if d.has("/limits/poll_interval_ms") {
			fail("/limits/poll_interval_ms", "only applies to transport_behavior request_response (this window reads a stream)")
		}
		l.PollIntervalMS = 0
	}

	// aggregation
	a := &ex.Aggregation
	if d.mode == ModeSession {
		if a.Mode != AggRawItems {
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
		{"items_path", &a.ItemsPath, &ex.paths.items},
		{"summary_path", &a.SummaryPath, &ex.paths.summary},
		{"cursor_path", &a.CursorPath, &ex.paths.cursor},
		{"status_path", &a.StatusPath, &ex.paths.status},
		{"done_path", &a.DonePath, &ex.paths.done},
		{"group_by", &a.GroupBy, &ex.paths.groupBy},
		{"value_path", &a.ValuePath, &ex.paths.value},
		{"key_path", &a.KeyPath, &ex.paths.key},
		{"text_path", &a.TextPath, &ex.paths.text},
		{"finish_reason_path", &a.FinishPath, &ex.paths.finish},
		{"usage_path", &a.UsagePath, &ex.paths.usage},
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
	onlyFor("group_by", a.GroupBy != "", AggRawItems, AggSummaryOnly, AggSummaryPlusSamples)
	onlyFor("sample_size", d.has("/aggregation/sample_size"), AggSummaryPlusSamples)
	onlyFor("value_path", a.ValuePath != "", AggStats)
	onlyFor("key_path", a.KeyPath != "", AggLatestState)
	onlyFor("text_path", a.TextPath != "", AggText)
	onlyFor("finish_reason_path", a.FinishPath != "", AggText)
	onlyFor("usage_path", a.UsagePath != "", AggText)
	if a.Mode != AggSummaryPlusSamples {
		a.SampleSize = 0
	}
	switch a.Mode {
	case AggStats:
		if a.ValuePath == "" {
			fail("/aggregation/value_path", "is required by aggregation_mode stats: the JSONPath of the numeric value, e.g. $.latency_ms")
		}
	case AggLatestState:
		if a.KeyPath == "" {
			fail("/aggregation/key_path", "is required by aggregation_mode latest_state: the JSONPath of the key, e.g. $.host")
		}
	case AggText:
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
		ex.paths.redact = append(ex.paths.redact, p)
	}
	return ex
}

// cursorArgument is the argument a window tool takes to continue where
// the previous window ended.
const cursorArgument = "cursor"

// windowInputSchema adds the cursor argument to a window tool's input
// schema. A schema that already has a cursor property is refused.
func windowInputSchema(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON Schema object: %v", err)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	if _, ok := props[cursorArgument]; ok {
		return nil, fmt.Errorf("property %q is reserved in mode window: it carries the cursor of the previous window", cursorArgument)
	}
	props[cursorArgument] = map[string]any{
		"type":        "string",
		"description": "Continue after the previous window: pass the cursor it returned, unchanged (no other is taken). Omit for a fresh window.",
	}
	m["properties"] = props
	return json.Marshal(m)
}

// windowOutputSchema is the JSON Schema of a window result's
// structuredContent.
func windowOutputSchema(ex *Execution) json.RawMessage {
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
				endWindowDuration, endMaxItems, endMaxBytes, endUpstreamTimeout, endIdleTimeout, endDone, endUpstreamEnd, endUpstreamError, endCancelled}},
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

// ToolMeta is what a tool's _meta says about its execution, so clients can
// tell a streaming tool: {"io.crank/execution": {...}} and, for text
// streams, "stream_type": "text".
//
// The tools of a session or async_job family say which family and role
// they are: {"io.crank/execution": {"mode": "session", "role": "poll",
// "tools": {"start": ..., "poll": ..., "stop": ...}, ...}}.
func (op *Operation) ToolMeta() map[string]any {
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
	if ex.Aggregation.Mode == AggText {
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
