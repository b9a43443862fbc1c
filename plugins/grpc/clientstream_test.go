package grpcadapter_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Client-streaming (Upload) and bidirectional (Chat) methods: the tool's
// one argument is the bounded list of request messages, sent in order
// before the call half-closes.

// TestClientStreamingCall: an Upload's requests reach the server in order
// and its one answer is the result; the input schema is the typed,
// bounded list.
func TestClientStreamingCall(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	cfg := ts.cfg("Upload", "requests", map[string]any{"max_items": 5})
	tools := expandTools(t, h, adaptertest.Call{Config: cfg})
	if len(tools) != 1 {
		t.Fatalf("expand: %v", tools)
	}
	tool := tools[0]
	wantContains(t, "description", tool.Description, "Client-streaming: the requests argument's crank.test.v1.EchoRequest messages are sent in order")
	var in struct {
		Properties map[string]struct {
			MaxItems int            `json:"maxItems"`
			Items    map[string]any `json:"items"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(tool.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if r := in.Properties["requests"]; r.MaxItems != 5 || r.Items["type"] != "object" || len(in.Required) != 1 {
		t.Errorf("input schema = %s", tool.InputSchema)
	}
	schema := resolve(t, tool.InputSchema)
	if err := validate(schema, `{"requests": [{"text": "a", "id": "1"}, {"text": "b", "id": 2}]}`); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	for _, bad := range []string{`{}`, `{"requests": [{"nope": 1}]}`, `{"requests": [{},{},{},{},{},{}]}`} {
		if validate(schema, bad) == nil {
			t.Errorf("the input schema accepts %s", bad)
		}
	}
	if len(tool.OutputSchema) == 0 || len(tool.ItemSchema) != 0 {
		t.Errorf("output schema %s, item schema %s", tool.OutputSchema, tool.ItemSchema)
	}

	got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"requests": [{"text": "a", "id": "1"}, {"text": "b", "id": 2}, {"text": "c", "id": 3}]}`})
	if got["text"] != "a,b,c" || got["id"] != "6" {
		t.Errorf("answer = %v", got)
	}
	// An empty list is a call that sends nothing but its half-close.
	if got := invokeOK(t, h, adaptertest.Call{Config: cfg, Args: `{"requests": []}`}); got["text"] != "" {
		t.Errorf("answer = %v", got)
	}
	// A status the server ends with maps as for a unary call.
	ue := invokeErr(t, h, adaptertest.Call{Config: cfg, Args: `{"requests": [{"text": "a"}, {"text": "fail:NOT_FOUND"}]}`})
	if ue.Kind != sdk.KindUpstreamStatus || ue.Status != "NOT_FOUND" || !ue.Rejected || ue.Retryable {
		t.Errorf("upstream error = %+v", ue)
	}
	wantContains(t, "message", ue.Message, "NOT_FOUND: the upload ends with NOT_FOUND")
}

// TestRequestsSchemaDefs: the messages a requests array shares or nests
// recursively are $defs of the whole input schema, which the array's
// items reference.
func TestRequestsSchemaDefs(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Herd")})
	if len(tools) != 1 || !strings.Contains(string(tools[0].InputSchema), `"$defs":{`) {
		t.Fatalf("expand: %+v", tools)
	}
	schema := resolve(t, tools[0].InputSchema)
	if err := validate(schema, `{"requests": [{"tree": {"label": "r", "children": [{"label": "c", "children": [{}]}]}}, {}]}`); err != nil {
		t.Errorf("a recursive request refused: %v", err)
	}
	if validate(schema, `{"requests": [{"tree": {"children": [{"label": 5}]}}]}`) == nil {
		t.Errorf("a bad nested label accepted: %s", tools[0].InputSchema)
	}
}

// TestStreamingRequestBounds: a requests list over requests.max_items or
// requests.max_bytes, or one with a bad message, is refused naming the
// limit or the message, before the call starts: the server sees none.
func TestStreamingRequestBounds(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	limits := map[string]any{"max_items": 2, "max_bytes": 64}
	for _, tc := range []struct {
		args, want string
	}{
		{`{"requests": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}`, "argument requests: 3 messages, more than the 2 a call may send (requests.max_items); nothing was sent"},
		{`{"requests": [{"text": "a"}, {"text": "` + strings.Repeat("x", 100) + `"}]}`, "argument requests: the messages up to requests[1] take 105 bytes encoded, more than the 64 a call may send (requests.max_bytes); nothing was sent"},
		{`{"requests": [{"text": "a"}, {"id": "12x"}]}`, `argument requests[1].id: invalid value for int64: "12x"`},
		{`{"requests": [{"text": "a"}, 7]}`, "argument requests[1]: must be a JSON object"},
		{`{"requests": {"text": "a"}}`, "argument requests: must be a list of crank.test.v1.EchoRequest messages"},
		{`{}`, "argument requests: required: the list of crank.test.v1.EchoRequest messages to send"},
		{`{"requests": [], "text": "a"}`, "argument text: unknown: a streaming call's only argument is requests"},
	} {
		for _, method := range []string{"Upload", "Chat"} {
			cfg := ts.cfg(method, "requests", limits)
			var ue *sdk.UpstreamError
			if method == "Upload" {
				ue = invokeErr(t, h, adaptertest.Call{Config: cfg, Args: tc.args})
			} else {
				events, sue, err := h.Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: tc.args}, 0)
				if err != nil || sue == nil || len(events) != 0 {
					t.Fatalf("%s %s: events %v, %v %v", method, tc.args, events, sue, err)
				}
				ue = sue
			}
			if ue.Kind != sdk.KindInvalidArgument {
				t.Errorf("%s %s: kind %v", method, tc.args, ue.Kind)
			}
			wantContains(t, method+" message", ue.Message, tc.want)
		}
	}
	if n := ts.streamCalls.Load(); n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}

	// The bounds are checked where the config is read.
	for field, v := range map[string]any{"requests.max_items": -1, "requests.max_bytes": int64(1) << 40} {
		name := strings.TrimPrefix(field, "requests.")
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: ts.cfg("Upload", "requests", map[string]any{name: v})})
		if err != nil {
			t.Fatal(err)
		}
		wantDiag(t, diags, field, "must be from 0 to")
	}
	wantDiag(t, expand(t, h, adaptertest.Call{Config: ts.cfg("Chat", "cursor_field", "text"), Mode: sdk.ModeWindow}).diags,
		"cursor_field", "cursor_field applies to unary and server-streaming methods")
}

// chatItems are the texts of a Chat stream's items.
func chatItems(t *testing.T, events []client.Event) []string {
	t.Helper()
	var out []string
	for _, r := range decodeItems[struct {
		Text string `json:"text"`
	}](t, events) {
		out = append(out, r.Text)
	}
	return out
}

// TestBidiWindow: a bidirectional call sends its requests, half-closes,
// and each answer is one item; the server's OK status ends the stream.
func TestBidiWindow(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Chat"), Mode: sdk.ModeWindow})
	if len(tools) != 1 || len(tools[0].ItemSchema) == 0 || len(tools[0].OutputSchema) != 0 {
		t.Fatalf("expand: %+v", tools)
	}
	item := resolve(t, tools[0].ItemSchema)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Chat"), Args: `{"requests": [{"text": "a", "id": 1}, {"text": "b"}, {"text": "c"}]}`}, 0)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	if got := chatItems(t, events); strings.Join(got, ",") != "A,B,C" {
		t.Errorf("items = %v", got)
	}
	if len(events) != 4 || events[3].Kind != client.EventEnd {
		t.Errorf("events = %v, want 3 items and End", events)
	}
	for _, ev := range events[:3] {
		if err := validate(item, string(ev.Item.Data)); err != nil {
			t.Errorf("item %s does not match the item schema: %v", ev.Item.Data, err)
		}
	}
}

// TestBidiWindowEndsFirst: the window ends before a server that never
// completes (max_items here); the cancellation reaches the server.
func TestBidiWindowEndsFirst(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Chat"), Args: `{"requests": [{"text": "hi"}, {"text": "forever"}]}`}, 5)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	if got := chatItems(t, events); len(got) != 5 || got[0] != "HI" || got[1] != "tick" {
		t.Errorf("items = %v", got)
	}
	wantContains(t, "server end", ts.waitEnded(t, "Chat"), "context canceled")

	// Cancelled mid-stream by the host, the adapter's Stream returns.
	ctx, cancel := context.WithCancel(ctxT(t))
	send := &countingSender{cancelAt: 3, cancel: cancel}
	err = newAdapter().(sdk.Streamer).Stream(ctx, &sdk.Request{
		Operation: sdk.Operation{Config: mustJSON(t, ts.cfg("Chat"))},
		Arguments: []byte(`{"requests": [{"text": "forever"}]}`),
	}, send)
	if err == nil || ctx.Err() == nil || send.items < 3 {
		t.Errorf("Stream returned %v after %d items", err, send.items)
	}
	ts.waitEnded(t, "Chat")
}

// TestBidiStatusMidStream: a status after some answers ends the stream
// with an upstream error, mapped as for server streaming.
func TestBidiStatusMidStream(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Chat"), Args: `{"requests": [{"text": "a"}, {"text": "b"}, {"text": "fail:ABORTED"}, {"text": "never"}]}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := chatItems(t, events); strings.Join(got, ",") != "A,B" || len(events) != 2 {
		t.Errorf("events = %v", events)
	}
	if ue == nil || ue.Status != "ABORTED" || ue.Kind != sdk.KindUpstreamStatus || !ue.Retryable {
		t.Fatalf("upstream error = %+v", ue)
	}
	wantContains(t, "message", ue.Message, "ABORTED: the chat ends with ABORTED")
}
