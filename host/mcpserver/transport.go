package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport additions: what go-sdk's Streamable HTTP handler leaves out
// (request checks, SSE keep-alives, the priming event's retry field) and
// the options that complete it.

// sseRetry is the reconnection delay the priming event of a resumable
// stream asks for.
const sseRetry = time.Second

// transport is what the endpoint needs of the transport options at
// request time.
type transport struct {
	stateful bool
	// jsonResponse: POSTs are answered application/json (json_response).
	jsonResponse bool
	keepalive    time.Duration
	retry        string // the priming event's retry field, in ms ("" for none)
	// primeDelay is how long a priming event's flush is held
	// (primeFlushDelay; tests set it).
	primeDelay time.Duration
	// sse serves sessionless json_response calls that carry a progress
	// token: go-sdk drops progress on a JSON answer, so they get SSE.
	sse *mcp.StreamableHTTPHandler
	// sessionless serves the sessionless requests of a stateful endpoint
	// (generation.go).
	sessionless *mcp.StreamableHTTPHandler
	// refuseLegacy answers session-less legacy requests 400 instead of
	// serving them sessionless (legacy.go).
	refuseLegacy bool
}

// streamableOptions completes the SDK handler's options for the endpoint:
// the event store in stateful mode, cancellation tied to the request for
// the sessionless protocol.
func (ep *Endpoint) streamableOptions(o Options, opts *mcp.StreamableHTTPOptions) {
	ep.transport = transport{stateful: !o.Stateless, jsonResponse: o.JSONResponse, keepalive: o.KeepaliveInterval, refuseLegacy: o.RefuseSessionlessLegacy, primeDelay: primeFlushDelay}
	// The sessionless protocol has no notifications/cancelled: the POST is
	// the request, so its end cancels the call.
	opts.PropagateRequestCancellation = true
	if !o.Stateless {
		ep.transport.sessionless = ep.sessionlessHandler(*opts) // generation.go
	}
	if o.JSONResponse {
		sse := *opts
		sse.JSONResponse = false
		ep.transport.sse = ep.sessionlessHandler(sse)
	}
	if o.Stateless || !o.Resumable {
		return
	}
	es := newEventStore(func() eventLogStore {
		if p := ep.store.Load(); p != nil {
			return *p
		}
		return nil
	}, o.EventLimits, o.EventQuota)
	es.clientOf = func(id string) string {
		if ls := ep.replicas.get(id); ls != nil && ls.slot != nil {
			return ls.slot.client
		}
		return ""
	}
	es.logger = o.Logger
	es.standaloneOnly = o.JSONResponse
	ep.eventStore = es
	opts.EventStore = es
	ep.transport.retry = strconv.FormatInt(sseRetry.Milliseconds(), 10)
}

// checkRequest answers what the SDK would get wrong, and reports whether
// it did: in stateful mode a POST without Mcp-Session-Id must be an
// initialize (or a sessionless 2026-07-28 request, which the SDK refuses
// with -32022 so that the client falls back, or a session-less legacy
// request the endpoint serves, legacy.go); anything else is 400.
func (ep *Endpoint) checkRequest(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if p.body == nil || !ep.transport.stateful || r.Header.Get(sessionIDHeader) != "" ||
		r.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion {
		return false
	}
	msg := p.message()
	if !msg.ok || msg.method == "initialize" || msg.method == "server/discover" || msg.meta[mcp.MetaKeyProtocolVersion] != nil {
		return false // a batch or malformed JSON: the SDK decides
	}
	why := " (only initialize opens a session)"
	if ep.legacySessionless(r, p) { // legacy.go
		if !ep.transport.refuseLegacy {
			return false
		}
		why = " (only initialize opens a session; this endpoint refuses session-less calls: sessionless_legacy refuse)"
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600,
		"message": "Bad Request: Mcp-Session-Id header is required for " + msg.describe() + why}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	return true
}

// handler is the SDK handler that serves a request: the endpoint's; the
// sessionless one for a sessionless request to a stateful endpoint
// (generation.go); on a json_response endpoint, the SSE one for a
// sessionless call that carries a progress token, so that its progress
// notifications can go out.
func (ep *Endpoint) handler(r *http.Request, p *peeked) func(http.ResponseWriter, *http.Request) {
	gen := ep.generation(r, p)
	if !ep.transport.stateful || gen == genSessionless {
		if ep.transport.sse != nil && p.body != nil && p.message().progressToken() {
			return ep.transport.sse.ServeHTTP
		}
		if ep.transport.sessionless != nil {
			return ep.counted(r, p, ep.transport.sessionless.ServeHTTP) // generation.go
		}
		return ep.counted(r, p, ep.serveMCP)
	}
	return ep.serveMCP
}

// sseWriter wraps the response of an MCP request. Once the response is an
// SSE stream it writes a keep-alive comment whenever the stream was silent
// for the interval, and adds the retry field to the priming event. Writes
// from the SDK and from the keep-alive timer are serialised; stop must be
// called before the handler returns.
type sseWriter struct {
	http.ResponseWriter
	interval time.Duration
	retry    string

	mu      sync.Mutex
	checked bool // the response's content type was looked at
	sse     bool
	primed  bool // the priming event was seen
	wrote   bool // something was written since the last tick
	stopped bool
	timer   *time.Timer
	// held: the priming event's flush, held back for up to
	// primeFlushDelay so that the headers, the priming event and a
	// result that follows at once leave in one write (primeflush.go).
	began      bool // the body's first write was seen
	holdPrime  bool
	held       *time.Timer
	primeDelay time.Duration
	// settle, when set, waits until the priming event is stored before
	// its held flush; hold is the stream's until its first write
	// (primeflush.go).
	settle func()
	hold   *streamHold
}

// wrap returns w wrapped for keep-alives and priming, and the function
// that stops them.
func (ep *Endpoint) wrap(w http.ResponseWriter) (http.ResponseWriter, func()) {
	if ep.transport.keepalive <= 0 && ep.transport.retry == "" {
		return w, func() {}
	}
	sw := &sseWriter{ResponseWriter: w, interval: ep.transport.keepalive, retry: ep.transport.retry, primeDelay: ep.transport.primeDelay}
	if sw.primeDelay == 0 {
		sw.primeDelay = primeFlushDelay
	}
	return sw, sw.stop
}

// checkLocked notes whether the response is an SSE stream, as its headers
// are about to be sent, and starts the keep-alive timer for one.
func (s *sseWriter) checkLocked() {
	if s.checked {
		return
	}
	s.checked = true
	ct := s.Header().Get("Content-Type")
	s.sse = strings.HasPrefix(ct, "text/event-stream")
	if s.sse && s.interval > 0 && !s.stopped {
		s.timer = time.AfterFunc(s.interval, s.tick)
	}
}

func (s *sseWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == http.StatusOK {
		s.checkLocked()
	} else if code >= 200 {
		s.checked = true
	}
	s.ResponseWriter.WriteHeader(code)
}

var primePrefix = []byte("event: prime\n")

func (s *sseWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkLocked()
	s.wrote = true
	if !s.began && s.sse && bytes.HasPrefix(p, primePrefix) {
		s.holdPrime = true
	}
	s.began = true
	if s.sse && !s.primed && s.retry != "" && bytes.HasPrefix(p, primePrefix) {
		// The SDK's priming event has an id and empty data; the retry field
		// tells the client how soon to resume after the stream drops.
		s.primed = true
		if i := bytes.Index(p, []byte("\ndata:")); i > 0 {
			q := make([]byte, 0, len(p)+len(s.retry)+8)
			q = append(q, p[:i+1]...)
			q = append(q, "retry: "+s.retry+"\n"...)
			q = append(q, p[i+1:]...)
			if _, err := s.ResponseWriter.Write(q); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return s.ResponseWriter.Write(p)
}

// Flush sends what was written; the SDK flushes after every event. The
// priming event's flush is held back (primeflush.go).
func (s *sseWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holdFlushLocked() {
		return
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *sseWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

var keepaliveComment = []byte(": keep-alive\n\n")

func (s *sseWriter) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	if !s.wrote {
		if _, err := s.ResponseWriter.Write(keepaliveComment); err != nil {
			return // the client is gone; the SDK notices on its own
		}
		_ = http.NewResponseController(s.ResponseWriter).Flush()
	}
	s.wrote = false
	s.timer.Reset(s.interval)
}

func (s *sseWriter) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.firstWriteLocked() // the handler's return sends what is buffered
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.held != nil {
		s.held.Stop() // the handler's return sends what is buffered
	}
}

// Interface guards.
var (
	_ http.ResponseWriter = (*sseWriter)(nil)
	_ http.Flusher        = (*sseWriter)(nil)
)
