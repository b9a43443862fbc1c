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

// flushHeld flushes the priming event when nothing followed it in time.
func (s *sseWriter) flushHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil || s.stopped {
		return
	}
	s.held = nil
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}
