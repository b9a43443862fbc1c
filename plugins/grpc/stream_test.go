package grpcadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/sdktest"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// The host's window engine reads an adapter's Stream and cuts it at its
// limits (items, duration) by cancelling the call, or sees it end. These
// tests play that part through sdktest: max events is max_items, the
// context's deadline the window's duration.

type tick struct {
	N  int    `json:"n"`
	At string `json:"at"`
}

func items(t *testing.T, events []*adapterv1.StreamEvent) []tick {
	t.Helper()
	var out []tick
	for i, ev := range events {
		it := ev.GetItem()
		if it == nil {
			continue
		}
		var tk tick
		if err := json.Unmarshal(it.GetDataJson(), &tk); err != nil {
			t.Fatalf("item %d: %q: %v", i, it.GetDataJson(), err)
		}
		if it.GetId() != "" || it.GetCursor() != "" {
			t.Errorf("item %d has an id or cursor: gRPC messages have none", i)
		}
		out = append(out, tk)
	}
	return out
}

func streamServer(t *testing.T) (*testServer, *sdktest.Harness) {
	t.Helper()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	req := &adapterv1.ExpandOperationRequest{Operation: &adapterv1.Operation{ConfigJson: mustJSON(t, ts.cfg("Count")), Mode: sdk.ModeWindow}}
	resp, err := h.Client.ExpandOperation(ctxT(t), req)
	if err != nil || len(resp.GetTools()) != 1 {
		t.Fatalf("expand: %v %v", resp, err)
	}
	return ts, h
}

// TestStreamItemSchema: a server-streaming method's tool carries the
// schema of one message as its items are written.
func TestStreamItemSchema(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := newHarness(t)
	resp, err := h.Client.ExpandOperation(ctxT(t), &adapterv1.ExpandOperationRequest{
		Operation: &adapterv1.Operation{ConfigJson: mustJSON(t, ts.cfg("Count")), Mode: sdk.ModeWindow}})
	if err != nil || len(resp.GetTools()) != 1 {
		t.Fatalf("expand: %v %v", resp, err)
	}
	tool := resp.GetTools()[0]
	if len(tool.GetOutputSchemaJson()) != 0 {
		t.Errorf("a stream tool has an output schema: %s", tool.GetOutputSchemaJson())
	}
	item := resolve(t, tool.GetItemSchemaJson())
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Args: `{"count": 2}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if it := ev.GetItem(); it != nil {
			n++
			if err := validate(item, string(it.GetDataJson())); err != nil {
				t.Errorf("item %s does not match the item schema %s: %v", it.GetDataJson(), tool.GetItemSchemaJson(), err)
			}
		}
	}
	if n != 2 || validate(item, `{"n": "x"}`) == nil {
		t.Errorf("%d items; item schema %s", n, tool.GetItemSchemaJson())
	}
}

// TestStreamServerEnds: the server ends the stream: every message is an
// item, then End.
func TestStreamServerEnds(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Args: `{"count": 3}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := items(t, events)
	if len(got) != 3 || got[0].N != 1 || got[2].N != 3 || got[0].At != "2024-05-01T12:00:01Z" {
		t.Errorf("items = %+v", got)
	}
	if len(events) != 4 || events[3].GetEnd() == nil {
		t.Errorf("events = %v, want 3 items and End", events)
	}
}

// TestStreamStatusEnds: a non-OK status after some messages ends the
// stream with an upstream error event.
func TestStreamStatusEnds(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Args: `{"count": 2, "end_code": "ABORTED"}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items(t, events)) != 2 || len(events) != 3 {
		t.Fatalf("events = %v", events)
	}
	ue := events[2].GetError()
	if ue == nil || ue.GetStatus() != "ABORTED" || ue.GetKind() != sdk.KindUpstreamStatus || !ue.GetRetryable() {
		t.Fatalf("last event = %s", prototext.Format(events[2]))
	}
	wantContains(t, "message", ue.GetMessage(), "ABORTED: the stream ends with ABORTED")
}

// TestStreamMaxItems: the window takes max_items and cancels; the
// cancellation reaches the server.
func TestStreamMaxItems(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Args: `{"count": 1000, "interval_ms": 5}`}, 3)
	if err != nil {
		t.Fatal(err)
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
	events, err := h.Stream(ctx, sdktest.Call{Config: ts.cfg("Forever"), Args: `{"interval_ms": 20}`}, 0)
	// The window's deadline travels to the server too; whichever side's
	// timer fires first, the stream ends with the window's own deadline.
	if code := status.Code(err); code != codes.DeadlineExceeded {
		t.Errorf("stream ended with %v (events %v), want the window's deadline", err, events[len(events)-1])
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
	st, err := h.Client.Stream(ctx, &adapterv1.InvokeRequest{
		Operation:     &adapterv1.Operation{ConfigJson: mustJSON(t, ts.cfg("Forever"))},
		ArgumentsJson: []byte(`{"interval_ms": 5}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ev, err := st.Recv()
		if err != nil || ev.GetItem() == nil {
			t.Fatalf("event %d: %v %v", i, ev, err)
		}
	}
	cancel()
	wantContains(t, "server end", ts.waitEnded(t, "Forever"), "context canceled")
	for {
		if _, err := st.Recv(); err != nil {
			if status.Code(err) != codes.Canceled {
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
		call sdktest.Call
		kind adapterv1.UpstreamError_Kind
		want string
	}{
		{sdktest.Call{Config: ts.cfg("Echo")}, sdk.KindInvalidArgument, "Echo is a unary method: it cannot be read as a stream; poll it in a window with transport_behavior: request_response"},
		{sdktest.Call{Config: ts.cfg("Count"), Args: `{"count": "many"}`}, sdk.KindInvalidArgument, "argument count: invalid value for int32"},
	} {
		events, err := h.Stream(ctxT(t), tc.call, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0].GetError() == nil {
			t.Fatalf("events = %v", events)
		}
		ue := events[0].GetError()
		if ue.GetKind() != tc.kind {
			t.Errorf("kind = %v", ue.GetKind())
		}
		wantContains(t, "message", ue.GetMessage(), tc.want)
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
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Timeout: 200 * time.Millisecond,
		Args: `{"count": 3, "first_delay_ms": 10000}`}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].GetError().GetKind() != sdk.KindTimeout {
		t.Fatalf("events = %v", events)
	}
	wantContains(t, "message", events[0].GetError().GetMessage(), "did not start answering the stream within 200ms")
	ts.waitEnded(t, "Count")

	// Once the server answers, slow messages are the host's business.
	events, err = h.Stream(ctxT(t), sdktest.Call{Config: ts.cfg("Count"), Timeout: 200 * time.Millisecond,
		Args: `{"count": 3, "interval_ms": 300}`}, 0)
	if err != nil || len(items(t, events)) != 3 || events[3].GetEnd() == nil {
		t.Fatalf("events = %v, %v", events, err)
	}
}

// TestStreamCursorField: a window's cursor goes into the request field
// cursor_field names, so a resumable stream continues where it stopped.
func TestStreamCursorField(t *testing.T) {
	t.Parallel()
	ts, h := streamServer(t)
	cfg := ts.cfg("Count", "cursor_field", "after")
	events, err := h.Stream(ctxT(t), sdktest.Call{Config: cfg, Args: `{"count": 2}`, Cursor: "5"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := items(t, events); len(got) != 2 || got[0].N != 6 || got[1].N != 7 {
		t.Errorf("items = %+v, want ticks 6 and 7", got)
	}
	// Without a cursor the arguments stand as they are.
	events, _ = h.Stream(ctxT(t), sdktest.Call{Config: cfg, Args: `{"count": 1, "after": "1"}`}, 0)
	if got := items(t, events); len(got) != 1 || got[0].N != 2 {
		t.Errorf("items = %+v", got)
	}

	for field, want := range map[string]string{
		"nope":   "the request crank.test.v1.CountRequest has no field nope",
		"labels": "labels is a list or map",
		"1bad":   "must be the name of a field",
	} {
		req := &adapterv1.ExpandOperationRequest{Operation: &adapterv1.Operation{ConfigJson: mustJSON(t, ts.cfg("Count", "cursor_field", field)), Mode: sdk.ModeWindow}}
		resp, err := h.Client.ExpandOperation(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		wantDiag(t, resp.GetDiagnostics(), "cursor_field", want)
	}
}
