package mcpserver

import (
	"context"
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

// settlePrime links the POST r's stream to its writer w, and returns r
// with that link (streamHold): the stream's events wait until its first
// write ends, and are stored only if its answer was not in that write.
// It makes the priming event, held back past primeFlushDelay, wait (up to
// primeStoreWait) until the event log has stored what the session's
// streams queued — the stream's opening, with the call it answers — so
// that a client never holds an event id its stream has no record of when
// this replica dies: a resume elsewhere then answers the call with an
// error rather than failing (events.go).
func (ep *Endpoint) settlePrime(w http.ResponseWriter, r *http.Request) *http.Request {
	sw, ok := w.(*sseWriter)
	es, logged := ep.eventStore.(*eventStore)
	if !ok || !logged || r.Method != http.MethodPost {
		return r
	}
	sw.hold = &streamHold{es: es}
	if session := r.Header.Get(sessionIDHeader); session != "" {
		sw.settle = func() { es.awaitStored(session, primeStoreWait) }
	}
	return r.WithContext(context.WithValue(r.Context(), streamHoldKey{}, sw.hold))
}

// The event log only where it can serve. A POST stream whose complete
// answer leaves in its first write needs no stored events: a client that
// lost that write holds no event id to resume from, and one that got it
// has the answer. So the events of a POST stream wait in memory until its
// first write ends — the flush of the priming event with what followed it
// within primeFlushDelay, the priming event's own flush after that delay,
// or the end of the handler — and are dropped then if the stream's
// response was among them; otherwise (a long call, progress, a relayed
// request or log before the answer) they are queued for the writer then,
// and so is everything after them, so that every stream a client can
// resume is resumed as before. A fast unary call thus costs the event log
// no etcd write at all.

// streamHoldKey is the request context key of a POST's streamHold.
type streamHoldKey struct{}

// streamHold is a POST stream held until its first write ends. Its fields
// are guarded by es.mu.
type streamHold struct {
	es *eventStore
	// session and stream name the stream Open held ("" before).
	session, stream string
	done            bool // released
}

// release ends the hold at the stream's first write: its events go when
// its response is among them, else to the writer. It reports whether the
// stream is kept; only its first call decides.
func (h *streamHold) release() bool {
	es := h.es
	es.mu.Lock()
	session, stream := h.session, h.stream
	if h.done || stream == "" {
		h.done = true
		es.mu.Unlock()
		return false
	}
	es.mu.Unlock()
	client := "" // before es.mu, as in Append
	if es.clientOf != nil {
		client = es.clientOf(session)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if h.done {
		return false
	}
	h.done = true
	sl := es.sessions[session]
	if sl == nil || sl.pending[stream] == nil || !sl.pending[stream].held {
		return false // the session closed meanwhile
	}
	pl := sl.pending[stream]
	delete(sl.pending, stream)
	if pl.answered {
		return false // the whole answer left in the first write
	}
	for _, ev := range pl.queue {
		es.queueLocked(session, stream, client, sl, ev)
	}
	return true
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
	s.firstWriteLocked()
	return false
}

// firstWriteLocked ends the stream's hold (streamHold) at its first
// write: the first flush that sends something, or the handler's end.
func (s *sseWriter) firstWriteLocked() {
	if s.hold != nil {
		s.hold.release()
		s.hold = nil
	}
}

// flushHeld flushes the priming event when nothing followed it in time,
// once it is stored (settle). A message that follows meanwhile sends it
// along, and the held flush does nothing.
func (s *sseWriter) flushHeld() {
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil && h.release() && s.settle != nil {
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
