package mcpserver

import (
	"net/http"
	"time"
)

// primeFlushDelay is how long the flush of a POST stream's priming event
// waits for the stream's next message. The SDK writes the priming event
// (its id lets the client resume the stream) and flushes it before it
// dispatches the request; flushed at once, the headers and the priming
// event cost the gateway a write and the client a read of their own,
// although most unary results follow within a millisecond or two. Held
// back, they leave with the result in one write; a call that takes longer
// gets its priming event after this delay, so a client can still resume a
// long call whose connection drops.
const primeFlushDelay = 5 * time.Millisecond

// primeStoreWait bounds how long the held priming event of a call that
// takes longer then waits for the event log to store it (settlePrime).
const primeStoreWait = time.Second

// settlePrime makes the priming event of the POST r's stream, held back
// past primeFlushDelay, wait (up to primeStoreWait) until the event log
// has stored what the session's streams queued — the stream's opening,
// with the call it answers — so that a client never holds an event id its
// stream has no record of when this replica dies: a resume elsewhere then
// answers the call with an error rather than failing (events.go).
func (ep *Endpoint) settlePrime(w http.ResponseWriter, r *http.Request) {
	sw, ok := w.(*sseWriter)
	es, logged := ep.eventStore.(*eventStore)
	session := r.Header.Get(sessionIDHeader)
	if !ok || !logged || r.Method != http.MethodPost || session == "" {
		return
	}
	sw.settle = func() { es.awaitStored(session, primeStoreWait) }
}

// holdFlushLocked holds back the flush that follows the priming event,
// arming a timer that flushes it later, and stops that timer at the next
// flush, which sends it along. It reports whether the flush is to be
// skipped.
func (s *sseWriter) holdFlushLocked() bool {
	if s.holdPrime {
		s.holdPrime = false
		s.held = time.AfterFunc(s.primeDelay, s.flushHeld)
		return true
	}
	if s.held != nil {
		s.held.Stop()
		s.held = nil
	}
	return false
}

// flushHeld flushes the priming event when nothing followed it in time,
// once it is stored (settle). A message that follows meanwhile sends it
// along, and the held flush does nothing.
func (s *sseWriter) flushHeld() {
	if s.settle != nil {
		s.settle()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil || s.stopped {
		return
	}
	s.held = nil
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}
