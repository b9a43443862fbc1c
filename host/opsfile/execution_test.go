package opsfile_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
)

func TestWindowLoadErrors(t *testing.T) {
	op := func(extra string) string {
		return "operations:\n  - name: w\n    description: d\n    adapter: rest\n    config: {method: GET, url: 'http://127.0.0.1:1/x'}\n" + extra
	}
	cases := []struct{ name, yaml, want string }{
		{"unknown mode", op("    mode: stream\n"), `operation "w": /mode: must be one of unary, window, session, async_job`},
		{"unknown limit", op("    mode: window\n    limits: {window_duration: 5000}\n"), `operation "w": /limits/window_duration: unknown field (did you mean "window_duration_ms"?)`},
		{"unknown block field", op("    mode: window\n    safety: {colour: red}\n"), `/safety/colour: unknown field (known fields: truncate_item_fields,`},
		{"not an integer", op("    mode: window\n    limits: {max_items: 5s}\n"), `/limits/max_items: must be an integer, got a string`},
		{"fraction", op("    mode: window\n    limits: {max_items: 1.5}\n"), `/limits/max_items: must be an integer, got a number`},
		{"zero", op("    mode: window\n    limits: {max_bytes: 0}\n"), `/limits/max_bytes: must be from 1 to 33554432, got 0`},
		{"too long", op("    mode: window\n    limits: {window_duration_ms: 3600000}\n"), `/limits/window_duration_ms: must be from 1 to 600000, got 3600000`},
		{"poll interval on a stream", op("    mode: window\n    limits: {poll_interval_ms: 100}\n"), `/limits/poll_interval_ms: only applies to transport_behavior request_response`},
		{"session lifetime", op("    mode: window\n    limits: {max_session_lifetime_ms: 1000}\n"), `/limits/max_session_lifetime_ms: only applies to mode session`},
		{"idle too long", op("    mode: window\n    limits: {window_duration_ms: 1000, idle_timeout_ms: 1000}\n"), `/limits/idle_timeout_ms: must be shorter than window_duration_ms (1000)`},
		{"bad mode", op("    mode: window\n    aggregation: {aggregation_mode: everything}\n"), `/aggregation/aggregation_mode: must be one of raw_items, summary_only, summary_plus_samples, stats, latest_state, text`},
		{"bad path", op("    mode: window\n    aggregation: {items_path: '$.items[*'}\n"), `/aggregation/items_path: not a valid RFC 9535 JSONPath`},
		{"no dollar", op("    mode: window\n    aggregation: {cursor_path: 'next'}\n"), `/aggregation/cursor_path: not a valid RFC 9535 JSONPath: a query starts with $`},
		{"bad redacted path", op("    mode: window\n    safety: {redacted_paths: ['$.a', '$[?']}\n"), `/safety/redacted_paths/1: not a valid RFC 9535 JSONPath`},
		{"stats needs a value", op("    mode: window\n    aggregation: {aggregation_mode: stats}\n"), `/aggregation/value_path: is required by aggregation_mode stats`},
		{"latest needs a key", op("    mode: window\n    aggregation: {aggregation_mode: latest_state}\n"), `/aggregation/key_path: is required by aggregation_mode latest_state`},
		{"field of another mode", op("    mode: window\n    aggregation: {value_path: '$.v'}\n"), `/aggregation/value_path: only used by aggregation_mode stats (this window uses raw_items)`},
		{"sampling", op("    mode: window\n    safety: {sampling_rate: 0}\n"), `/safety/sampling_rate: must be greater than 0 and at most 1, got 0`},
		{"field length off", op("    mode: window\n    safety: {truncate_item_fields: false, max_field_length: 100}\n"), `/safety/max_field_length: is set but truncate_item_fields is false`},
		{"limits on unary", op("    limits: {max_items: 5}\n"), `operation "w": /limits: only applies to modes window, session and async_job (this operation is unary)`},
		{"stream on unary", op("    transport_behavior: server_stream\n"), `/transport_behavior: server_stream needs mode window`},
		{"bad transport", op("    mode: window\n    transport_behavior: websocket\n"), `/transport_behavior: must be one of server_stream, request_response`},
		{"timeout shorter than window", op("    mode: window\n    timeout: 1s\n    limits: {window_duration_ms: 5000}\n"), `/timeout: must be at least limits.window_duration_ms (5s)`},
		{"output schema", op("    mode: window\n    output_schema: {type: object}\n"), `/output_schema: the output schema of a window tool is fixed`},
		{"cursor is reserved", op("    mode: window\n    input_schema: {type: object, properties: {cursor: {type: integer}}}\n"), `/input_schema: property "cursor" is reserved in mode window`},
		{"unknown preset", op("    preset: gpt\n"), `/preset: must be one of openai_chat`},
		{"preset on unary", op("    mode: unary\n    preset: openai_chat\n"), `/preset: preset "openai_chat" needs mode window`},
		{"block not an object", op("    mode: window\n    limits: [1]\n"), `/limits: must be an object {window_duration_ms, poll_interval_ms, upstream_timeout_ms, idle_timeout_ms, max_session_lifetime_ms, max_items, ...}, got a list`},
	}
	for _, c := range cases {
		_, err := opsfile.Parse("ops.yaml", []byte(c.yaml), opsfile.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want error containing %q, got %v", c.name, c.want, err)
		}
	}
}

// A window operation without limits gets bounded defaults, never
// unbounded ones.
func TestWindowDefaults(t *testing.T) {
	cat, err := opsfile.Parse("ops.yaml", []byte(`
operations:
  - name: logs
    description: d
    adapter: rest
    mode: window
    config: {method: GET, url: 'http://127.0.0.1:1/x'}
  - name: poll
    description: d
    adapter: rest
    mode: window
    transport_behavior: request_response
    timeout: 1m
    limits: {window_duration_ms: 2000, max_items: 5}
    aggregation: {aggregation_mode: summary_plus_samples, group_by: $.level}
    config: {method: GET, url: 'http://127.0.0.1:1/x'}
  - name: chat
    description: d
    adapter: rest
    preset: openai_chat
    limits: {max_items: 10}
    config: {method: POST, url: 'http://127.0.0.1:1/v1/chat/completions'}
`), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := cat.Lookup("logs")
	ex := logs.Execution
	if ex == nil || ex.TransportBehavior != window.ServerStream || ex.Limits.WindowDurationMS != 10000 ||
		ex.Limits.MaxItems != 1000 || ex.Limits.MaxBytes != 1<<20 || ex.Limits.UpstreamTimeoutMS != 10000 ||
		ex.Limits.PollIntervalMS != 0 || ex.Aggregation.Mode != "raw_items" || !ex.Safety.TruncateItemFields ||
		ex.Safety.MaxFieldLength != 4096 || ex.Safety.SamplingRate != 1 || logs.Timeout != 15*time.Second {
		t.Errorf("logs defaults: %+v timeout %s", ex, logs.Timeout)
	}
	poll, _ := cat.Lookup("poll")
	ex = poll.Execution
	if ex.TransportBehavior != window.RequestResponse || ex.Limits.PollIntervalMS != 1000 || ex.Limits.MaxItems != 5 ||
		ex.Aggregation.SampleSize != 3 || poll.Timeout != time.Minute {
		t.Errorf("poll: %+v timeout %s", ex, poll.Timeout)
	}
	chat, _ := cat.Lookup("chat")
	ex = chat.Execution
	if chat.Mode != opsfile.ModeWindow || ex.Aggregation.Mode != "text" || ex.Limits.MaxItems != 10 || ex.Limits.WindowDurationMS != 120000 ||
		!strings.Contains(string(chat.InputSchema), `"messages"`) {
		t.Errorf("chat preset: %+v %s", ex, chat.InputSchema)
	}
	meta, _ := json.Marshal(chat.ToolMeta())
	if !strings.Contains(string(meta), `"stream_type":"text"`) || !strings.Contains(string(meta), `"progress":"text"`) {
		t.Errorf("chat meta: %s", meta)
	}
	if logs.ToolMeta() == nil {
		t.Error("a window tool has no _meta")
	}
	// What the adapter derived (an MCP upstream's MCP Apps "ui") is
	// published beside the gateway's own execution meta, which wins.
	logs.Meta = map[string]any{"ui": map[string]any{"resourceUri": "ui://logs/view.html"}, "stream_type": "theirs"}
	meta, _ = json.Marshal(logs.ToolMeta())
	if !strings.Contains(string(meta), `"ui":{"resourceUri":"ui://logs/view.html"}`) || !strings.Contains(string(meta), `"io.crank/execution"`) ||
		strings.Contains(string(meta), "theirs") && logs.Execution.Aggregation.Mode == window.AggText {
		t.Errorf("logs meta with the upstream's: %s", meta)
	}
	unary := opsfile.Operation{Meta: map[string]any{"ui/resourceUri": "ui://x"}}
	if m := unary.ToolMeta(); m["ui/resourceUri"] != "ui://x" || len(m) != 1 {
		t.Errorf("a unary tool's derived _meta: %v", m)
	}
}
