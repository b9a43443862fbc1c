package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/internal/mcptest"
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

// A stream records the call of the POST that opened it, not the call
// whose context the stream's first event was appended with: the SDK
// appends a message a call's handler sends (a progress notification, the
// first event of a stream without a priming event) with the session
// connection's context, which carries the id of another POST.
func TestStreamRecordsTheCallOfItsPOST(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	es := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{})
	post := context.WithValue(context.Background(), callIDKey{}, json.RawMessage(`247`))
	if err := es.Open(post, "sess", "S"); err != nil {
		t.Fatal(err)
	}
	conn := context.WithValue(context.Background(), callIDKey{}, json.RawMessage(`2`))
	if err := es.Append(conn, "sess", "S", []byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`)); err != nil {
		t.Fatal(err)
	}
	es.awaitStored("sess", 10*time.Second)
	info, err := st.EventStream(context.Background(), "sess", "S")
	if err != nil || string(info.Request) != `247` {
		t.Fatalf("stream record: request %s (%v), want 247", info.Request, err)
	}
}

// With JSON answers (json_response) only the standalone stream is kept:
// a POST's stream leaves nothing behind in the session's logs.
func TestJSONAnswersKeepNoStreamState(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	es := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{})
	es.standaloneOnly = true
	post := context.WithValue(context.Background(), callIDKey{}, json.RawMessage(`7`))
	for _, stream := range []string{"S1", "S2"} {
		if err := es.Open(post, "sess", stream); err != nil {
			t.Fatal(err)
		}
		if err := es.Append(post, "sess", stream, []byte(`{"jsonrpc":"2.0","id":7,"result":{}}`)); err != nil {
			t.Fatal(err)
		}
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if sl := es.sessions["sess"]; sl != nil && (len(sl.next) != 0 || len(sl.calls) != 0 || len(sl.pending) != 0) {
		t.Fatalf("state kept of JSON answers' streams: next %v, calls %v, pending %v", sl.next, sl.calls, sl.pending)
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

// heldStream opens stream S of session sess on es as a POST served
// through an sseWriter would (settlePrime's hold), and returns the writer.
func heldStream(t *testing.T, es *eventStore, rec *lockedRecorder) (*sseWriter, func()) {
	t.Helper()
	ep := &Endpoint{transport: transport{keepalive: time.Hour, retry: "1000", primeDelay: time.Hour}, eventStore: es}
	w, stop := ep.wrap(rec)
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set(sessionIDHeader, "sess")
	r = ep.settlePrime(w, r)
	if err := es.Open(r.Context(), "sess", "S"); err != nil {
		t.Fatal(err)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	return w.(*sseWriter), stop
}

// writeEvent appends data to the held stream S and writes it, as the SDK
// does.
func writeEvent(t *testing.T, es *eventStore, w *sseWriter, name string, idx int, data string) {
	t.Helper()
	var b []byte
	if data != "" {
		b = []byte(data)
	}
	if err := es.Append(context.Background(), "sess", "S", b); err != nil {
		t.Fatal(err)
	}
	_, _ = fmt.Fprintf(w, "event: %s\nid: S_%d\ndata: %s\n\n", name, idx, data)
	_ = http.NewResponseController(w).Flush()
}

// TestAnswerInFirstWriteIsNotStored: a stream whose priming event and
// answer leave in one write stores nothing; one whose first write carries
// less than its answer (a progress notification) stores every event, the
// answer too, and replays as before.
func TestAnswerInFirstWriteIsNotStored(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	cs := &countingStore{Store: st}
	es := newEventStore(func() eventLogStore { return cs }, store.EventLimits{}, EventQuota{})

	w, stop := heldStream(t, es, newLockedRecorder())
	writeEvent(t, es, w, "prime", 0, "")
	writeEvent(t, es, w, "message", 1, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	stop()
	es.mu.Lock()
	pending := len(es.sessions["sess"].pending)
	es.mu.Unlock()
	if pending != 0 || cs.writes.Load() != 0 {
		t.Fatalf("answer in the first write: %d streams pending, %d writes; want none", pending, cs.writes.Load())
	}
	if _, err := st.EventsAfter(context.Background(), "sess", "S", 0); !errors.Is(err, store.ErrStreamNotStored) {
		t.Fatalf("stream stored: %v", err)
	}

	// Progress first: the stream outlives its first write.
	w, stop = heldStream(t, es, newLockedRecorder())
	writeEvent(t, es, w, "prime", 0, "")
	writeEvent(t, es, w, "message", 1, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
	writeEvent(t, es, w, "message", 2, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	stop()
	got, err := replayAll(t, es, "sess", "S", 0)
	if err != nil || len(got) != 2 || !strings.Contains(got[1], `"id":2`) {
		t.Fatalf("replay of a stream that outlived its first write: %q %v", got, err)
	}
}

// TestPrimeAloneKeepsTheStream: a call slower than the priming event's
// hold gets its priming event alone; its stream is stored from then on,
// so a client resumes it from that event's id.
func TestPrimeAloneKeepsTheStream(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	es := newEventStore(func() eventLogStore { return st }, store.EventLimits{}, EventQuota{})
	w, stop := heldStream(t, es, newLockedRecorder())
	defer stop()
	writeEvent(t, es, w, "prime", 0, "")
	w.flushHeld() // as the timer does
	if _, err := st.EventsAfter(context.Background(), "sess", "S", 0); err != nil {
		t.Fatalf("the flushed priming event's stream is not stored: %v", err)
	}
	writeEvent(t, es, w, "message", 1, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	if got, err := replayAll(t, es, "sess", "S", 0); err != nil || len(got) != 1 {
		t.Fatalf("resume from the priming event: %q %v", got, err)
	}
}

// TestUnaryCallWritesNothingToEtcd counts the etcd writes of fast unary
// calls in an MCP session through the endpoint: none (the session's
// record was written at initialize; its touch is far off), with rate
// limits on, a fleet-wide one among them: etcd's revision does not move.
func TestUnaryCallWritesNothingToEtcd(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	cs := &countingStore{Store: st}
	up := mcptest.NewUsers(t)
	hst := newTestHost(t, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil)
	opts := testOptions("default")
	fleet := ratelimit.Limit{Name: "fleet_users", Rate: "100000/s", Tool: "get_user", Fleet: true}
	opts.RateLimits = []ratelimit.Limit{fleet, {Name: "per_client", Rate: "100000/s", Per: ratelimit.PerClient}}
	opts.Budgets = ratelimit.NewBudgets()
	opts.Budgets.Coordinate(st, nil) // the store is the fleet, as caddymodule's app has it
	t.Cleanup(opts.Budgets.StopCoordinating)
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// However slow the machine, every answer follows its priming event
	// within the hold.
	ep.transport.primeDelay = time.Hour
	ep.Attach(hst, cs)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "count", Version: "1"}, nil)
	sess, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := callGetUser(ctx, sess); err != nil { // the adapter starts
		t.Fatal(err)
	}
	es := ep.eventStore.(*eventStore)
	settled := func() {
		es.mu.Lock()
		defer es.mu.Unlock()
		for es.sessions[sess.ID()].busyLocked() {
			es.changed.Wait()
		}
	}
	settled()
	// The replica is a member of the fleet-wide limit (joining again is
	// free): the one write the limits make, before any call.
	if err := st.JoinLimit(ctx, fleet.ID()); err != nil {
		t.Fatal(err)
	}
	revision := func() int64 {
		rev, err := st.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev := revision()
	calls, writes, hot := cs.calls.Load(), cs.writes.Load(), ep.hotCalls.Load()
	const n = 20
	for range n {
		if _, err := callGetUser(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	settled()
	if served := ep.hotCalls.Load() - hot; served != n {
		t.Errorf("the hot path served %d of the %d calls", served, n)
	}
	es.mu.Lock()
	pending := len(es.sessions[sess.ID()].pending)
	es.mu.Unlock()
	if d, e := cs.calls.Load()-calls, cs.writes.Load()-writes; d != 0 || e != 0 || pending != 0 {
		t.Fatalf("%d unary calls: %d session store calls, %d event-log writes, %d streams pending; want none", n, d, e, pending)
	}
	if after := revision(); after != rev {
		t.Errorf("%d unary calls with rate limits on moved etcd's revision %d → %d", n, rev, after)
	}
	if st := ep.RateLimits(); len(st) != 2 || st[0].Admitted < n || st[1].Admitted < n {
		t.Errorf("the limits did not count the calls: %+v", st)
	}
}

// slowOps is a unary call of the mcptest.Reports upstream at %s, which
// answers report n once the test releases it.
const slowOps = `version: 1
operations:
  - name: report
    description: Build a report (one slow request).
    adapter: rest
    timeout: 1m
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n]}
    config: {method: GET, url: "%s/report", query: [n]}
`

// TestLongCallResumes: a call that outlasts the priming event's hold
// gets its priming event alone; the client drops the stream and resumes
// it from that event's id, through the endpoint, and gets the answer.
func TestLongCallResumes(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	_, url := serveEndpoint(t, newTestHost(t, fmt.Sprintf(slowOps, up.URL), nil, nil), st, testOptions("default"))
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize("2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, id, err := c.Request(ctx, "tools/call", map[string]any{"name": "report", "arguments": map[string]any{"n": 7}})
	if err != nil {
		t.Fatal(err)
	}
	up.Await(t, "arrived", "7")
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n') // "event: prime"
	for err == nil && !strings.HasPrefix(line, "id: ") {
		line, err = br.ReadString('\n')
	}
	if err != nil {
		t.Fatalf("no priming event: %v", err)
	}
	resp.Body.Close() // the client loses the stream
	up.Release("7")

	var res *http.Response
	for { // 409 until the endpoint has seen the POST's connection go
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set(sessionIDHeader, c.Session)
		req.Header.Set("MCP-Protocol-Version", c.Version)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", strings.TrimSpace(strings.TrimPrefix(line, "id: ")))
		if res, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusConflict {
			break
		}
		res.Body.Close()
		time.Sleep(10 * time.Millisecond)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), fmt.Sprintf(`"id":%d`, id)) {
			if !strings.Contains(sc.Text(), `\"rows\":3`) && !strings.Contains(sc.Text(), `"rows":3`) {
				t.Fatalf("resumed answer %s", sc.Text())
			}
			return
		}
	}
	t.Fatalf("resume (HTTP %d) ended without the answer: %v", res.StatusCode, sc.Err())
}

// servedElsewhere is a store whose stream S of session sess another
// replica serves: its info is what EventStream reports, with no events
// after those the client has, until more (events) come.
type servedElsewhere struct {
	eventLogStore
	mu     sync.Mutex
	info   store.EventStreamInfo
	events [][]byte
	reads  int
}

func (s *servedElsewhere) EventStream(context.Context, string, string) (store.EventStreamInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.info, nil
}

func (s *servedElsewhere) EventsAfter(_ context.Context, _, _ string, index int64) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(index+1) > s.info.Next {
		return nil, store.ErrStreamNotStored
	}
	return s.events[index+1:], nil
}

// TestResumeOfUnansweredCall: a resume from the last stored event of a
// call another replica serves waits for its next events; when that
// replica is gone, or the stream stalled past unansweredLimit, it answers
// the call with the retryable "interrupted" error instead of ending empty.
func TestResumeOfUnansweredCall(t *testing.T) {
	t.Parallel()
	prime := []byte(`{"method":"notifications/progress"}`)
	for name, info := range map[string]store.EventStreamInfo{
		"orphaned": {Request: json.RawMessage(`7`), Next: 1, Orphaned: true},
		"stalled":  {Request: json.RawMessage(`7`), Next: 1, Idle: unansweredLimit + time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs := &servedElsewhere{info: info, events: [][]byte{prime}}
			es := newEventStore(func() eventLogStore { return fs }, store.EventLimits{}, EventQuota{})
			got, err := replayAll(t, es, "sess", "S", 0)
			if err != nil || len(got) != 1 || got[0] != string(interruptedAnswer(json.RawMessage(`7`))) {
				t.Fatalf("resume: %q, %v; want the interrupted answer", got, err)
			}
			if !strings.Contains(got[0], `"retryable":true`) {
				t.Fatalf("the answer is not retryable: %s", got[0])
			}
		})
	}
	t.Run("answered meanwhile", func(t *testing.T) {
		t.Parallel()
		fs := &servedElsewhere{info: store.EventStreamInfo{Request: json.RawMessage(`7`), Next: 1}, events: [][]byte{prime}}
		es := newEventStore(func() eventLogStore { return fs }, store.EventLimits{}, EventQuota{})
		go func() {
			// The serving replica stores the answer once the resume waits.
			for {
				fs.mu.Lock()
				if fs.reads > 1 {
					fs.events = append(fs.events, []byte(`{"id":7,"result":{}}`))
					fs.info.Next = 2
					fs.mu.Unlock()
					return
				}
				fs.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
		got, err := replayAll(t, es, "sess", "S", 0)
		if err != nil || len(got) != 1 || got[0] != `{"id":7,"result":{}}` {
			t.Fatalf("resume: %q, %v; want the answer", got, err)
		}
	})
}
