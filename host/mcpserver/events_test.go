package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// gatedStore is a real store whose event appends wait for a gate, as
// when etcd is slow.
type gatedStore struct {
	eventLogStore
	gate chan struct{}
}

func (g *gatedStore) AppendStreams(ctx context.Context, streams []store.StreamEvents, lim store.EventLimits) []error {
	<-g.gate
	return g.eventLogStore.AppendStreams(ctx, streams, lim)
}

func replayAll(t *testing.T, es *eventStore, session, stream string, index int) ([]string, error) {
	t.Helper()
	var out []string
	for data, err := range es.After(context.Background(), session, stream, index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(data))
	}
	return out, nil
}

// TestEventStoreNeverBlocksDelivery appends far more events than may wait
// while etcd does not answer: appends return at once, the oldest waiting
// events are dropped, and a replay either returns every event after the
// client's or fails — never a partial stream.
func TestEventStoreNeverBlocksDelivery(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	gs := &gatedStore{eventLogStore: st, gate: make(chan struct{})}
	es := newEventStore(func() eventLogStore { return gs }, store.EventLimits{MaxEvents: 10_000}, EventQuota{})
	ctx := context.Background()
	if err := es.Open(ctx, "sess", "S"); err != nil {
		t.Fatal(err)
	}
	const n = 3 * maxPendingEvents
	for i := range n {
		if err := es.Append(ctx, "sess", "S", fmt.Appendf(nil, `{"method":"m","n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	close(gs.gate) // etcd answers again

	// The newest events survived; their indices are the SDK's.
	got, err := replayAll(t, es, "sess", "S", n-3)
	if err != nil || len(got) != 2 || got[0] != fmt.Sprintf(`{"method":"m","n":%d}`, n-2) {
		t.Fatalf("replay of the newest: %q %v", got, err)
	}
	// A resume from before the dropped events fails cleanly.
	if _, err := replayAll(t, es, "sess", "S", 10); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Fatalf("replay across dropped events: %v, want ErrEventsPurged", err)
	}
	// A stream's response ends its numbering; later streams are separate.
	if err := es.Open(ctx, "sess", "T"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"", `{"method":"notifications/progress"}`, `{"id":1,"result":{}}`} {
		if err := es.Append(ctx, "sess", "T", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := replayAll(t, es, "sess", "T", 0); err != nil || len(got) != 2 || got[1] != `{"id":1,"result":{}}` {
		t.Fatalf("replay of T: %q %v", got, err)
	}
	es.mu.Lock()
	_, counting := es.sessions["sess"].next["T"]
	es.mu.Unlock()
	if counting {
		t.Fatal("the finished stream's counter was kept")
	}
	if err := es.SessionClosed(ctx, "sess"); err != nil {
		t.Fatal(err)
	}

	// Under json_response only the GET stream is logged.
	es.standaloneOnly = true
	_ = es.Open(ctx, "sess2", "P")
	_ = es.Open(ctx, "sess2", "")
	_ = es.Append(ctx, "sess2", "P", []byte(`{"id":1,"result":{}}`))
	_ = es.Append(ctx, "sess2", "", []byte(`{"method":"notifications/tools/list_changed"}`))
	if got, err := replayAll(t, es, "sess2", "", -1); err != nil || len(got) != 1 {
		t.Fatalf("GET stream: %q %v", got, err)
	}
	if got, err := replayAll(t, es, "sess2", "P", -1); err != nil || len(got) != 0 {
		t.Fatalf("JSON answer logged: %q %v", got, err)
	}
}

// TestEventStoreManyStreams appends the streams of many concurrent calls
// (priming event, progress, response) and of a GET stream, straight to the
// store's shared transactions: every stream replays whole and in order.
func TestEventStoreManyStreams(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	es := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{})
	ctx := context.Background()
	const calls = 40
	_ = es.Open(ctx, "sess", "")
	done := make(chan error)
	for c := range calls {
		go func() {
			stream := fmt.Sprintf("P%d", c)
			err := es.Open(ctx, "sess", stream)
			for _, m := range []string{"", fmt.Sprintf(`{"method":"notifications/progress","n":%d}`, c), fmt.Sprintf(`{"id":%d,"result":{}}`, c)} {
				if err == nil {
					err = es.Append(ctx, "sess", stream, []byte(m))
				}
				if err == nil {
					err = es.Append(ctx, "sess", "", fmt.Appendf(nil, `{"method":"m","c":%d}`, c))
				}
			}
			done <- err
		}()
	}
	for range calls {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for c := range calls {
		got, err := replayAll(t, es, "sess", fmt.Sprintf("P%d", c), -1)
		if err != nil || len(got) != 3 || got[2] != fmt.Sprintf(`{"id":%d,"result":{}}`, c) {
			t.Fatalf("stream P%d: %q %v", c, got, err)
		}
	}
	if got, err := replayAll(t, es, "sess", "", -1); err != nil || len(got) != 3*calls {
		t.Fatalf("GET stream: %d events, %v", len(got), err)
	}
}

// flakyReads is a real store whose first reads fail retryably, as when
// the etcd member a replica reads from hangs or an election runs.
type flakyReads struct {
	eventLogStore
	failures int
}

func (f *flakyReads) EventsAfter(ctx context.Context, session, stream string, index int64) ([][]byte, error) {
	if f.failures > 0 {
		f.failures--
		return nil, &store.UnavailableError{Op: "read events", Err: context.DeadlineExceeded}
	}
	return f.eventLogStore.EventsAfter(ctx, session, stream, index)
}

// TestReplayRidesOutUnavailableStore: a replay whose reads fail
// retryably for a moment returns the events (go-sdk would answer a failed
// replay with 400, ending the client's session); one that keeps failing
// past replayWait, or fails otherwise, reports the error.
func TestReplayRidesOutUnavailableStore(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	fs := &flakyReads{eventLogStore: st, failures: 3}
	es := newEventStore(func() eventLogStore { return fs }, store.EventLimits{}, EventQuota{})
	ctx := context.Background()
	if err := es.Open(ctx, "sess", "S"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{`{"method":"a"}`, `{"method":"b"}`} {
		if err := es.Append(ctx, "sess", "S", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := replayAll(t, es, "sess", "S", 0)
	if err != nil || len(got) != 1 || got[0] != `{"method":"b"}` {
		t.Fatalf("replay after 3 retryable failures: %q, %v", got, err)
	}

	// A cancelled replay does not wait for the store.
	fs.failures = 1 << 30
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := replayRead(cctx, fs, "sess", "S", 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("cancelled replay: %v, want the store's error", err)
	}
}

// TestReplayWaitsForAStreamNotStoredYet: a client that resumes on another
// replica at once can be faster than the writer of the replica serving
// the stream. A replay of a stream the store has no record of waits for
// it a moment (unstoredWait) and then answers its events; a stream that
// never appears is refused with the store's error.
func TestReplayWaitsForAStreamNotStoredYet(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	gs := &gatedStore{eventLogStore: st, gate: make(chan struct{})}
	serving := newEventStore(func() eventLogStore { return gs }, store.EventLimits{}, EventQuota{})
	ctx := context.Background()
	if err := serving.Open(ctx, "sess", "S"); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{``, `{"method":"a"}`, `{"method":"b"}`} {
		if err := serving.Append(ctx, "sess", "S", []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	// The resuming replica reads the store directly; the serving one's
	// writer is held until the replay has begun.
	go func() {
		time.Sleep(300 * time.Millisecond)
		close(gs.gate)
	}()
	got, err := replayRead(ctx, st, "sess", "S", 1)
	if err != nil || len(got) != 1 || string(got[0]) != `{"method":"b"}` {
		t.Fatalf("replay of a stream stored after it began: %q, %v", got, err)
	}
	if _, err := replayRead(ctx, st, "sess", "never", 0); !errors.Is(err, store.ErrStreamNotStored) {
		t.Fatalf("replay of a stream never stored: %v, want ErrStreamNotStored", err)
	}
}

// A POST stream records the call it answers when it opens — even when an
// event-log quota refuses its events — and a replay that cannot be served
// answers that call with a JSON-RPC error instead of failing, so that the
// client's session goes on.
func TestUnservableReplayAnswersTheCall(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	// A quota below what one stream's log takes: no event is stored.
	serving := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{PerSession: 1})
	ctx := context.WithValue(context.Background(), callIDKey{}, json.RawMessage(`"call-7"`))
	if err := serving.Open(ctx, "sess", "S"); err != nil {
		t.Fatal(err)
	}
	if err := serving.Append(ctx, "sess", "S", nil); err != nil { // the priming event
		t.Fatal(err)
	}
	serving.mu.Lock()
	if sl := serving.sessions["sess"]; sl != nil {
		serving.flushLocked(sl, "S")
	}
	serving.mu.Unlock()
	// Another replica resumes the stream after the priming event.
	resuming := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{})
	var got []string
	for data, err := range resuming.After(context.Background(), "sess", "S", 0) {
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		got = append(got, string(data))
	}
	if len(got) != 1 || !strings.Contains(got[0], `"id":"call-7"`) || !strings.Contains(got[0], `"code":-32603`) ||
		!strings.Contains(got[0], "interrupted") {
		t.Fatalf("replay: %q, want the call's error", got)
	}
	// The standalone stream records no call: its replay fails as before.
	for _, err := range resuming.After(context.Background(), "sess", "", 3) {
		if !errors.Is(err, mcp.ErrEventsPurged) {
			t.Fatalf("replay of the standalone stream: %v", err)
		}
	}
}

// A stream records the id of the call its POST carries, unless the id is
// longer than maxRecordedCallID (a client picks it) or there is no call.
func TestWithCallID(t *testing.T) {
	t.Parallel()
	long := `"` + strings.Repeat("x", maxRecordedCallID) + `"`
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`:            `7`,
		`{"jsonrpc":"2.0","id":` + long + `,"method":"tools/call"}`: ``,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:    ``,
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r = withCallID(r, peek(r))
		got, _ := r.Context().Value(callIDKey{}).(json.RawMessage)
		if string(got) != want {
			t.Errorf("%.60s: id %s, want %q", body, got, want)
		}
	}
}
