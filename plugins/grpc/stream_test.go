package grpcadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// The host's window engine reads an adapter's Stream and cuts it at its
// limits (items, duration) by cancelling the call, or sees it end. These
// tests play that part through adaptertest: max events is max_items, the
// context's deadline the window's duration.

type tick struct {
	N  int    `json:"n"`
	At string `json:"at"`
}

func items(t *testing.T, events []client.Event) []tick { return decodeItems[tick](t, events) }

// decodeItems decodes the data of a stream's items; gRPC messages have no
// id or cursor of their own.
func decodeItems[T any](t *testing.T, events []client.Event) []T {
	t.Helper()
	var out []T
	for i, ev := range events {
		if ev.Kind != client.EventItem {
			continue
		}
		it := ev.Item
		var v T
		if err := json.Unmarshal(it.Data, &v); err != nil {
			t.Fatalf("item %d: %q: %v", i, it.Data, err)
		}
		if it.ID != "" || it.Cursor != "" {
			t.Errorf("item %d has an id or cursor: gRPC messages have none", i)
		}
		out = append(out, v)
	}
	return out
}

func streamServer(t *testing.T) (*testServer, *adaptertest.Harness) {
	t.Helper()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	if tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Count"), Mode: sdk.ModeWindow}); len(tools) != 1 {
		t.Fatalf("expand: %v", tools)
	}
	return ts, h
}

// TestStreamItemSchema: a server-streaming method's tool carries the
// schema of one message as its items are written.
func TestStreamItemSchema(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	tools := expandTools(t, h, adaptertest.Call{Config: ts.cfg("Count"), Mode: sdk.ModeWindow})
	if len(tools) != 1 {
		t.Fatalf("expand: %v", tools)
	}
	tool := tools[0]
	if len(tool.OutputSchema) != 0 {
		t.Errorf("a stream tool has an output schema: %s", tool.OutputSchema)
	}
	item := resolve(t, tool.ItemSchema)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Args: `{"count": 2}`}, 0)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	n := 0
	for _, ev := range events {
		if it := ev.Item; ev.Kind == client.EventItem {
			n++
			if err := validate(item, string(it.Data)); err != nil {
				t.Errorf("item %s does not match the item schema %s: %v", it.Data, tool.ItemSchema, err)
			}
		}
	}
	if n != 2 || validate(item, `{"n": "x"}`) == nil {
		t.Errorf("%d items; item schema %s", n, tool.ItemSchema)
	}
}

// TestStreamServerEnds: the server ends the stream: every message is an
// item, then End.
func TestStreamServerEnds(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Args: `{"count": 3}`}, 0)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	got := items(t, events)
	if len(got) != 3 || got[0].N != 1 || got[2].N != 3 || got[0].At != "2024-05-01T12:00:01Z" {
		t.Errorf("items = %+v", got)
	}
	if len(events) != 4 || events[3].Kind != client.EventEnd {
		t.Errorf("events = %v, want 3 items and End", events)
	}
}

// TestStreamStatusEnds: a non-OK status after some messages ends the
// stream with an upstream error event.
func TestStreamStatusEnds(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Args: `{"count": 2, "end_code": "ABORTED"}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items(t, events)) != 2 || len(events) != 2 {
		t.Fatalf("events = %v", events)
	}
	if ue == nil || ue.Status != "ABORTED" || ue.Kind != sdk.KindUpstreamStatus || !ue.Retryable {
		t.Fatalf("upstream error = %+v", ue)
	}
	wantContains(t, "message", ue.Message, "ABORTED: the stream ends with ABORTED")
}

// TestStreamMaxItems: the window takes max_items and cancels; the
// cancellation reaches the server.
func TestStreamMaxItems(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Args: `{"count": 1000, "interval_ms": 5}`}, 3)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	if got := items(t, events); len(got) != 3 || got[2].N != 3 {
		t.Errorf("items = %+v", got)
	}
	wantContains(t, "server end", ts.waitEnded(t, "Count"), "context canceled")
}

// TestStreamDuration: the window's duration ends a stream that has not
// ended by itself.
func TestStreamDuration(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	events, ue, err := h.Stream(ctx, adaptertest.Call{Config: ts.cfg("Forever"), Args: `{"interval_ms": 20}`}, 0)
	// The window's deadline travels to the server too; whichever side's
	// timer fires first, the stream ends with the window's own deadline.
	if client.CodeOf(err) != client.DeadlineExceeded {
		t.Errorf("stream ended with %v %v, want the window's deadline", ue, err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the window took %v", elapsed)
	}
	if n := len(items(t, events)); n == 0 {
		t.Errorf("no items within the window")
	}
	ts.waitEnded(t, "Forever")
}

// TestStreamCancelMidStream: a stream that never ends, cancelled mid-way
// by the host: the adapter stops and the server sees the cancellation.
func TestStreamCancelMidStream(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	st, err := h.Client.Stream(ctx, &sdk.Request{
		Operation: sdk.Operation{Config: mustJSON(t, ts.cfg("Forever"))},
		Arguments: []byte(`{"interval_ms": 5}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ev, err := st.Recv()
		if err != nil || ev.Kind != client.EventItem {
			t.Fatalf("event %d: %v %v", i, ev, err)
		}
	}
	cancel()
	wantContains(t, "server end", ts.waitEnded(t, "Forever"), "context canceled")
	for {
		if _, err := st.Recv(); err != nil {
			if client.CodeOf(err) != client.Cancelled {
				t.Errorf("after cancel: %v", err)
			}
			break
		}
	}
}

// TestStreamRefusals: Stream of a unary method, bad arguments and an
// unreachable server end with an error event.
func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	for _, tc := range []struct {
		call adaptertest.Call
		kind sdk.ErrorKind
		want string
	}{
		{adaptertest.Call{Config: ts.cfg("Echo")}, sdk.KindInvalidArgument, "Echo is a unary method: it answers once and cannot be read as a stream; poll it in a window with transport_behavior: request_response"},
		{adaptertest.Call{Config: ts.cfg("Count"), Args: `{"count": "many"}`}, sdk.KindInvalidArgument, "argument count: invalid value for int32"},
	} {
		events, ue, err := h.Stream(ctxT(t), tc.call, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 0 || ue == nil {
			t.Fatalf("events = %v, upstream error %v", events, ue)
		}
		if ue.Kind != tc.kind {
			t.Errorf("kind = %v", ue.Kind)
		}
		wantContains(t, "message", ue.Message, tc.want)
	}
}

// TestStreamAdapterStopsOnCancel drives Stream directly: it returns
// promptly with the context's error once cancelled.
func TestStreamAdapterStopsOnCancel(t *testing.T) {
	t.Parallel()
	ts, _ := streamServer(t)
	a := newAdapter()
	ctx, cancel := context.WithCancel(ctxT(t))
	send := &countingSender{cancelAt: 3, cancel: cancel}
	err := a.(sdk.Streamer).Stream(ctx, &sdk.Request{
		Operation: sdk.Operation{Config: mustJSON(t, ts.cfg("Forever"))},
		Arguments: []byte(`{"interval_ms": 5}`),
	}, send)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Stream returned %v, want context.Canceled", err)
	}
	if send.items < 3 {
		t.Errorf("items = %d", send.items)
	}
	ts.waitEnded(t, "Forever")
}

type countingSender struct {
	items    int
	cancelAt int
	cancel   func()
}

func (s *countingSender) Item(sdk.Item) error {
	s.items++
	if s.items == s.cancelAt {
		s.cancel()
	}
	return nil
}

func (s *countingSender) Gap(string) error { return nil }

// TestStreamFirstAnswerTimeout: the call's timeout bounds the wait for the
// server's first answer, not the stream.
func TestStreamFirstAnswerTimeout(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Timeout: 200 * time.Millisecond,
		Args: `{"count": 3, "first_delay_ms": 10000}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 || ue == nil || ue.Kind != sdk.KindTimeout {
		t.Fatalf("events = %v, upstream error %v", events, ue)
	}
	wantContains(t, "message", ue.Message, "did not start answering the stream within 200ms")
	ts.waitEnded(t, "Count")

	// Once the server answers, slow messages are the host's business.
	events, ue, err = h.Stream(ctxT(t), adaptertest.Call{Config: ts.cfg("Count"), Timeout: 200 * time.Millisecond,
		Args: `{"count": 3, "interval_ms": 300}`}, 0)
	if err != nil || ue != nil || len(items(t, events)) != 3 || events[3].Kind != client.EventEnd {
		t.Fatalf("events = %v, %v %v", events, ue, err)
	}
}

// TestStreamCursorField: a window's cursor goes into the request field
// cursor_field names, so a resumable stream continues where it stopped.
func TestStreamCursorField(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	cfg := ts.cfg("Count", "cursor_field", "after")
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"count": 2}`, Cursor: "5"}, 0)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	if got := items(t, events); len(got) != 2 || got[0].N != 6 || got[1].N != 7 {
		t.Errorf("items = %+v, want ticks 6 and 7", got)
	}
	// Without a cursor the arguments stand as they are.
	events, _, _ = h.Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"count": 1, "after": "1"}`}, 0)
	if got := items(t, events); len(got) != 1 || got[0].N != 2 {
		t.Errorf("items = %+v", got)
	}

	for field, want := range map[string]string{
		"nope":   "the request crank.test.v1.CountRequest has no field nope",
		"labels": "labels is a list or map",
		"1bad":   "must be the name of a field",
	} {
		wantDiag(t, expand(t, h, adaptertest.Call{Config: ts.cfg("Count", "cursor_field", field), Mode: sdk.ModeWindow}).diags, "cursor_field", want)
	}
}
