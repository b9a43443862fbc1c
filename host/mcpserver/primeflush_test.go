package mcpserver

import (
	"io"
	"net/http"
	"testing"
	"time"
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
