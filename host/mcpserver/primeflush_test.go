package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func (r *lockedRecorder) flushCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushes
}

// TestPrimeFlushSharedWithResult: the priming event's flush is held back,
// and the result's flush sends both; the held flush does not follow.
func TestPrimeFlushSharedWithResult(t *testing.T) {
	t.Parallel()
	rec := newLockedRecorder()
	ep := &Endpoint{transport: transport{keepalive: time.Hour, retry: "1000"}}
	w, stop := ep.wrap(rec)
	w.(*sseWriter).primeDelay = time.Hour // no timer flush during the test
	w.Header().Set("Content-Type", "text/event-stream")
	flush := http.NewResponseController(w).Flush
	_, _ = io.WriteString(w, "event: prime\nid: S_0\ndata: \n\n")
	_ = flush()
	if n := rec.flushCount(); n != 0 {
		t.Fatalf("priming event flushed at once (%d flushes)", n)
	}
	_, _ = io.WriteString(w, "event: message\nid: S_1\ndata: {}\n\n")
	_ = flush()
	if n := rec.flushCount(); n != 1 {
		t.Fatalf("%d flushes after the result, want 1", n)
	}
	sw := w.(*sseWriter)
	sw.mu.Lock()
	held := sw.held
	sw.mu.Unlock()
	if held != nil {
		t.Fatal("the held flush is still armed after the result's flush")
	}
	stop()
	if got := rec.String(); got != "event: prime\nid: S_0\nretry: 1000\ndata: \n\nevent: message\nid: S_1\ndata: {}\n\n" {
		t.Fatalf("body %q", got)
	}
}

// TestPrimeFlushAlone: with no message after it, the priming event is
// flushed on its own, so a client can resume a long call; after stop the
// timer flushes nothing.
func TestPrimeFlushAlone(t *testing.T) {
	t.Parallel()
	rec := newLockedRecorder()
	ep := &Endpoint{transport: transport{keepalive: time.Hour, retry: "1000"}}
	w, stop := ep.wrap(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: prime\nid: S_0\ndata: \n\n")
	_ = http.NewResponseController(w).Flush()
	for deadline := time.Now().Add(30 * time.Second); rec.flushCount() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the priming event was never flushed")
		}
	}
	stop()

	// Stopped before the delay: the handler's return sends the body, and
	// the timer, firing later, flushes nothing.
	rec = newLockedRecorder()
	w, stop = ep.wrap(rec)
	w.(*sseWriter).primeDelay = time.Hour
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: prime\nid: S_0\ndata: \n\n")
	_ = http.NewResponseController(w).Flush()
	stop()
	w.(*sseWriter).flushHeld() // as the timer would
	if n := rec.flushCount(); n != 0 {
		t.Fatalf("flushed %d times after stop", n)
	}
}

// TestPrimeFlushAwaitsStore: the held priming event of a longer call is
// flushed once the event log stored the stream's opening (settle), so a
// client never holds an id its stream has no record of.
func TestPrimeFlushAwaitsStore(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	gs := &gatedStore{eventLogStore: st, gate: make(chan struct{})}
	es := newEventStore(func() eventLogStore { return gs }, store.EventLimits{}, EventQuota{})
	ep := &Endpoint{transport: transport{keepalive: time.Hour, retry: "1000"}, eventStore: es}
	rec := newLockedRecorder()
	w, stop := ep.wrap(rec)
	defer stop()
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set(sessionIDHeader, "sess")
	r = ep.settlePrime(w, r)
	w.(*sseWriter).primeDelay = time.Hour // flushHeld is called below, as the timer would
	ctx := context.Background()
	if err := es.Open(r.Context(), "sess", "S"); err != nil {
		t.Fatal(err)
	}
	if err := es.Append(ctx, "sess", "S", nil); err != nil { // queued; the store's gate is shut
		t.Fatal(err)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: prime\nid: S_0\ndata: \n\n")
	_ = http.NewResponseController(w).Flush()
	var opened atomic.Bool
	flushed := make(chan bool)
	go func() { w.(*sseWriter).flushHeld(); flushed <- opened.Load() }()
	time.Sleep(100 * time.Millisecond) // a chance to flush too early
	opened.Store(true)
	close(gs.gate)
	if !<-flushed {
		t.Fatal("the priming event was flushed before it was stored")
	}
	if n := rec.flushCount(); n != 1 {
		t.Fatalf("%d flushes once stored, want 1", n)
	}
	if _, err := st.EventsAfter(ctx, "sess", "S", -1); err != nil {
		t.Fatal(err)
	}
}
