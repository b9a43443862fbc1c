package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/theory/jsonpath"

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

var aggregationModes = []string{AggRawItems, AggSummaryOnly, AggSummaryPlusSamples, AggStats, AggLatestState, AggText}

// Defaults and bounds of window limits. A window operation always has
// every limit: what the operator leaves out gets the default.
const (
	DefaultWindowDuration  = 10 * time.Second
	DefaultPollInterval    = time.Second
	DefaultUpstreamTimeout = 10 * time.Second
	DefaultMaxItems        = 1000
	DefaultMaxBytes        = 1 << 20
	DefaultMaxFieldLength  = 4096
	DefaultSampleSize      = 3

	maxWindowDurationMS = 10 * 60 * 1000
	maxUpstreamTimeout  = 10 * 60 * 1000
	minPollIntervalMS   = 10
	maxItemsLimit       = 1_000_000
	maxBytesLimit       = 32 << 20
	minFieldLength      = 16
	maxFieldLengthLimit = 1 << 20
	maxSampleSize       = 100

	// Sessions: the defaults and bounds of idle_timeout_ms and
	// max_session_lifetime_ms, and of the item buffer (the store's).
	DefaultStreamSessionIdleTimeout = 2 * time.Minute
	DefaultStreamSessionLifetime    = 30 * time.Minute
	maxSessionLifetimeMS            = 24 * 60 * 60 * 1000
	maxStreamSessionBufferItems     = 100_000

	// DefaultJobRuntime bounds an async_job of one request that sets no
	// timeout.
	DefaultJobRuntime = time.Hour
	// windowGrace is added to the window duration for the default call
	// timeout: time to end the upstream and build the result.
	windowGrace = 5 * time.Second
)

// Limits bound a window. Durations are in milliseconds, as written.
type Limits struct {
	WindowDurationMS     int64 `json:"window_duration_ms"`
	PollIntervalMS       int64 `json:"poll_interval_ms,omitempty"`
	UpstreamTimeoutMS    int64 `json:"upstream_timeout_ms"`
	IdleTimeoutMS        int64 `json:"idle_timeout_ms,omitempty"`
	MaxSessionLifetimeMS int64 `json:"max_session_lifetime_ms,omitempty"`
	MaxItems             int   `json:"max_items"`
	MaxBytes             int64 `json:"max_bytes"`
}

// Aggregation says how a window's items become its result. Paths are RFC
// 9535 JSONPath queries.
type Aggregation struct {
	Mode        string `json:"aggregation_mode"`
	ItemsPath   string `json:"items_path,omitempty"`
	SummaryPath string `json:"summary_path,omitempty"`
	CursorPath  string `json:"cursor_path,omitempty"`
	StatusPath  string `json:"status_path,omitempty"`
	DonePath    string `json:"done_path,omitempty"`
	GroupBy     string `json:"group_by,omitempty"`
	SampleSize  int    `json:"sample_size,omitempty"`
	ValuePath   string `json:"value_path,omitempty"`
	KeyPath     string `json:"key_path,omitempty"`
	TextPath    string `json:"text_path,omitempty"`
	FinishPath  string `json:"finish_reason_path,omitempty"`
	UsagePath   string `json:"usage_path,omitempty"`
}

// Safety transforms every item before it leaves the adapter boundary.
type Safety struct {
	TruncateItemFields bool     `json:"truncate_item_fields"`
	MaxFieldLength     int      `json:"max_field_length,omitempty"`
	RedactedPaths      []string `json:"redacted_paths,omitempty"`
	DropDuplicates     bool     `json:"drop_duplicates"`
	SamplingRate       float64  `json:"sampling_rate"`
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

func presetNames() string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// execDecl is the execution part of an operations-file entry, as written.
type execDecl struct {
	label       string
	mode        Mode
	timeoutSet  bool
	transport   string
	preset      string
	limits      json.RawMessage
	aggregation json.RawMessage
	safety      json.RawMessage
}

var (
	limitFields       = []string{"window_duration_ms", "poll_interval_ms", "upstream_timeout_ms", "idle_timeout_ms", "max_session_lifetime_ms", "max_items", "max_bytes"}
	aggregationFields = []string{"aggregation_mode", "items_path", "summary_path", "cursor_path", "status_path", "done_path",
		"group_by", "sample_size", "value_path", "key_path", "text_path", "finish_reason_path", "usage_path"}
	safetyFields = []string{"truncate_item_fields", "max_field_length", "redacted_paths", "drop_duplicates", "sampling_rate"}
)

// present reports whether an optional block was written.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// parseExecution validates the execution config of one entry: a window, a
// session's upstream reader, or the window an async_job collects. It
// returns nil for an operation that collects nothing (unary, or an
// async_job of one request). fail reports a problem with a field.
func parseExecution(d execDecl, fail func(field, format string, args ...any)) *Execution {
	var pr *preset
	if d.preset != "" {
		p, ok := presets[d.preset]
		if !ok {
			fail("preset", "unknown preset %q (known: %s)", d.preset, presetNames())
		} else {
			pr = &p
		}
	}
	collects := d.mode == ModeWindow || d.mode == ModeSession ||
		(d.mode == ModeAsyncJob && (d.transport != "" || d.preset != "" || present(d.limits) || present(d.aggregation) || present(d.safety)))
	if !collects {
		if pr != nil {
			fail("preset", "preset %q needs mode window (this operation is %s)", d.preset, d.mode)
		}
		if d.transport != "" && TransportBehavior(d.transport) != RequestResponse {
			if TransportBehavior(d.transport) == ServerStream {
				fail("transport_behavior", "server_stream needs mode window, session or async_job (a %s operation is request_response): a stream must be bounded", d.mode)
			} else {
				fail("transport_behavior", "unknown transport_behavior %q (one of request_response, server_stream)", d.transport)
			}
		}
		for _, b := range []struct {
			name string
			raw  json.RawMessage
		}{{"limits", d.limits}, {"aggregation", d.aggregation}, {"safety", d.safety}} {
			if present(b.raw) {
				fail(b.name, "only applies to modes window, session and async_job (this operation is %s)", d.mode)
			}
		}
		return nil
	}

	ex := &Execution{TransportBehavior: ServerStream, Preset: d.preset}
	if pr != nil {
		ex.TransportBehavior = pr.transport
		ex.Limits = pr.limits
		ex.Aggregation = pr.aggregation
	}
	switch TransportBehavior(d.transport) {
	case "":
	case RequestResponse, ServerStream:
		ex.TransportBehavior = TransportBehavior(d.transport)
	default:
		fail("transport_behavior", "unknown transport_behavior %q (one of request_response, server_stream)", d.transport)
	}

	// limits
	lb := openBlock("limits", d.limits, limitFields, fail)
	l := &ex.Limits
	session := d.mode == ModeSession
	if lb.int64("window_duration_ms", 1, maxWindowDurationMS, &l.WindowDurationMS) && session {
		fail("limits.window_duration_ms", "does not apply to mode session: idle_timeout_ms and max_session_lifetime_ms bound a session")
	}
	lb.int64("poll_interval_ms", minPollIntervalMS, maxWindowDurationMS, &l.PollIntervalMS)
	lb.int64("upstream_timeout_ms", 1, maxUpstreamTimeout, &l.UpstreamTimeoutMS)
	if session {
		lb.int64("idle_timeout_ms", 1, maxSessionLifetimeMS, &l.IdleTimeoutMS)
		lb.int64("max_session_lifetime_ms", 1, maxSessionLifetimeMS, &l.MaxSessionLifetimeMS)
	} else {
		lb.int64("idle_timeout_ms", 0, maxWindowDurationMS, &l.IdleTimeoutMS)
		var lifetime int64
		if lb.int64("max_session_lifetime_ms", 1, math.MaxInt32, &lifetime) {
			fail("limits.max_session_lifetime_ms", "only applies to mode session (this operation is %s: its window_duration_ms bounds it)", d.mode)
		}
	}
	var items int64
	maxItems := int64(maxItemsLimit)
	if session {
		maxItems = maxStreamSessionBufferItems
	}
	if lb.int64("max_items", 1, maxItems, &items) {
		l.MaxItems = int(items)
	}
	lb.int64("max_bytes", 1, maxBytesLimit, &l.MaxBytes)
	if session {
		// A session reads until stopped, idle or its lifetime ends; the
		// lifetime stands in for the window duration of its reader.
		if l.MaxSessionLifetimeMS == 0 {
			l.MaxSessionLifetimeMS = DefaultStreamSessionLifetime.Milliseconds()
		}
		if l.IdleTimeoutMS == 0 {
			l.IdleTimeoutMS = min(DefaultStreamSessionIdleTimeout.Milliseconds(), l.MaxSessionLifetimeMS)
		}
		if l.IdleTimeoutMS > l.MaxSessionLifetimeMS {
			fail("limits.idle_timeout_ms", "must not exceed max_session_lifetime_ms (%d)", l.MaxSessionLifetimeMS)
		}
		l.WindowDurationMS = l.MaxSessionLifetimeMS
	}
	if l.WindowDurationMS == 0 {
		l.WindowDurationMS = DefaultWindowDuration.Milliseconds()
	}
	if l.UpstreamTimeoutMS == 0 {
		l.UpstreamTimeoutMS = DefaultUpstreamTimeout.Milliseconds()
	}
	if l.MaxItems == 0 {
		l.MaxItems = DefaultMaxItems
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	switch ex.TransportBehavior {
	case RequestResponse:
		if l.PollIntervalMS == 0 {
			l.PollIntervalMS = DefaultPollInterval.Milliseconds()
		}
	case ServerStream:
		if lb.has("poll_interval_ms") {
			fail("limits.poll_interval_ms", "only applies to transport_behavior request_response (this window reads a stream)")
		}
		l.PollIntervalMS = 0
	}
	if !session && l.IdleTimeoutMS >= l.WindowDurationMS && lb.has("idle_timeout_ms") {
		fail("limits.idle_timeout_ms", "must be shorter than window_duration_ms (%d)", l.WindowDurationMS)
	}

	// aggregation
	ab := openBlock("aggregation", d.aggregation, aggregationFields, fail)
	a := &ex.Aggregation
	if ab.str("aggregation_mode", &a.Mode) && !slices.Contains(aggregationModes, a.Mode) {
		fail("aggregation.aggregation_mode", "unknown aggregation_mode %q (one of %s)", a.Mode, strings.Join(aggregationModes, ", "))
	}
	if a.Mode == "" {
		a.Mode = AggRawItems
	}
	if session {
		if a.Mode != AggRawItems {
			fail("aggregation.aggregation_mode", "a session hands out its items: aggregation_mode must be raw_items (got %s)", a.Mode)
		}
		for _, k := range []string{"group_by", "summary_path", "sample_size"} {
			if ab.has(k) {
				fail("aggregation."+k, "not used by mode session (its polls return items, not a summary)")
			}
		}
	}
	pathFields := []struct {
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
	}
	for _, pf := range pathFields {
		ab.str(pf.key, pf.dst)
		if *pf.dst == "" {
			continue
		}
		p, err := compilePath(*pf.dst)
		if err != nil {
			fail("aggregation."+pf.key, "%v", err)
			continue
		}
		*pf.out = p
	}
	var sample int64
	if ab.int64("sample_size", 1, maxSampleSize, &sample) {
		a.SampleSize = int(sample)
	}
	// Fields that only one mode reads are refused elsewhere, so a typo in
	// the mode does not silently ignore them.
	onlyFor := func(key string, set bool, modes ...string) {
		if set && !slices.Contains(modes, a.Mode) {
			fail("aggregation."+key, "only used by aggregation_mode %s (this window uses %s)", strings.Join(modes, " or "), a.Mode)
		}
	}
	onlyFor("group_by", a.GroupBy != "", AggRawItems, AggSummaryOnly, AggSummaryPlusSamples)
	onlyFor("sample_size", a.SampleSize != 0, AggSummaryPlusSamples)
	onlyFor("value_path", a.ValuePath != "", AggStats)
	onlyFor("key_path", a.KeyPath != "", AggLatestState)
	onlyFor("text_path", a.TextPath != "", AggText)
	onlyFor("finish_reason_path", a.FinishPath != "", AggText)
	onlyFor("usage_path", a.UsagePath != "", AggText)
	switch a.Mode {
	case AggSummaryPlusSamples:
		if a.SampleSize == 0 {
			a.SampleSize = DefaultSampleSize
		}
	case AggStats:
		if a.ValuePath == "" {
			fail("aggregation.value_path", "is required by aggregation_mode stats: the JSONPath of the numeric value, e.g. $.latency_ms")
		}
	case AggLatestState:
		if a.KeyPath == "" {
			fail("aggregation.key_path", "is required by aggregation_mode latest_state: the JSONPath of the key, e.g. $.host")
		}
	case AggText:
		if a.TextPath == "" {
			fail("aggregation.text_path", "is required by aggregation_mode text: the JSONPath of each chunk's text")
		}
	}

	// safety
	sb := openBlock("safety", d.safety, safetyFields, fail)
	s := &ex.Safety
	s.TruncateItemFields, s.SamplingRate = true, 1
	truncateSet := sb.boolean("truncate_item_fields", &s.TruncateItemFields)
	var fieldLen int64
	if sb.int64("max_field_length", minFieldLength, maxFieldLengthLimit, &fieldLen) {
		s.MaxFieldLength = int(fieldLen)
		if truncateSet && !s.TruncateItemFields {
			fail("safety.max_field_length", "is set but truncate_item_fields is false")
		}
	}
	if s.TruncateItemFields && s.MaxFieldLength == 0 {
		s.MaxFieldLength = DefaultMaxFieldLength
	}
	if sb.strList("redacted_paths", &s.RedactedPaths) {
		for i, rp := range s.RedactedPaths {
			p, err := compilePath(rp)
			if err != nil {
				fail(fmt.Sprintf("safety.redacted_paths[%d]", i), "%v", err)
				continue
			}
			ex.paths.redact = append(ex.paths.redact, p)
		}
	}
	sb.boolean("drop_duplicates", &s.DropDuplicates)
	if sb.float("sampling_rate", &s.SamplingRate) && (s.SamplingRate <= 0 || s.SamplingRate > 1 || math.IsNaN(s.SamplingRate)) {
		fail("safety.sampling_rate", "must be greater than 0 and at most 1 (got %v)", s.SamplingRate)
	}
	return ex
}

// block reads the fields of one execution block ("limits", ...), naming
// the block and field in every problem.
type block struct {
	name   string
	fields map[string]json.RawMessage
	fail   func(field, format string, args ...any)
}

func openBlock(name string, raw json.RawMessage, known []string, fail func(field, format string, args ...any)) *block {
	b := &block{name: name, fail: fail}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return b
	}
	if raw[0] != '{' || json.Unmarshal(raw, &b.fields) != nil {
		fail(name, "must be an object")
		return b
	}
	var unknown []string
	for k := range b.fields {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		if s := closest(k, known); s != "" {
			fail(name+"."+k, "unknown field (did you mean %q?)", s)
		} else {
			fail(name+"."+k, "unknown field (known fields: %s)", strings.Join(known, ", "))
		}
	}
	return b
}

func (b *block) has(key string) bool {
	v, ok := b.fields[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// int64 reads an integer in [lo, hi] into dst and reports whether the
// field was given and valid.
func (b *block) int64(key string, lo, hi int64, dst *int64) bool {
	if !b.has(key) {
		return false
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(b.fields[key]))
	dec.UseNumber()
	if dec.Decode(&n) != nil {
		b.fail(b.name+"."+key, "must be an integer (got %s)", b.fields[key])
		return false
	}
	v, err := n.Int64()
	if err != nil {
		b.fail(b.name+"."+key, "must be an integer (got %s)", n)
		return false
	}
	if v < lo || v > hi {
		b.fail(b.name+"."+key, "must be between %d and %d (got %d)", lo, hi, v)
		return false
	}
	*dst = v
	return true
}

func (b *block) str(key string, dst *string) bool {
	if !b.has(key) {
		return false
	}
	if json.Unmarshal(b.fields[key], dst) != nil {
		b.fail(b.name+"."+key, "must be a string")
		return false
	}
	return true
}

func (b *block) boolean(key string, dst *bool) bool {
	if !b.has(key) {
		return false
	}
	if json.Unmarshal(b.fields[key], dst) != nil {
		b.fail(b.name+"."+key, "must be true or false")
		return false
	}
	return true
}

func (b *block) float(key string, dst *float64) bool {
	if !b.has(key) {
		return false
	}
	if json.Unmarshal(b.fields[key], dst) != nil {
		b.fail(b.name+"."+key, "must be a number")
		return false
	}
	return true
}

func (b *block) strList(key string, dst *[]string) bool {
	if !b.has(key) {
		return false
	}
	if json.Unmarshal(b.fields[key], dst) != nil {
		b.fail(b.name+"."+key, "must be a list of strings")
		return false
	}
	return true
}

// closest returns the known name nearest to s, if it is near enough.
func closest(s string, known []string) string {
	best, bestD := "", 4
	for _, k := range known {
		if d := sdk.EditDistance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
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
