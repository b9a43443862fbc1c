package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store"
)

// Transport modes.
const (
	modeStateful  = "stateful"
	modeStateless = "stateless"
)

// Transport defaults.
const (
	// DefaultKeepaliveInterval is how long an SSE stream may stay silent
	// before it gets a keep-alive comment.
	DefaultKeepaliveInterval = 15 * time.Second
	// DefaultEventTTL is how long a stored SSE event can be replayed.
	DefaultEventTTL = 5 * time.Minute
	// DefaultSSERetry is the reconnection delay the priming event of a
	// resumable stream asks for.
	DefaultSSERetry = time.Second
	// maxPeekBytes bounds how much of a session-less POST is read to find
	// its JSON-RPC method (the SDK's own body limit).
	maxPeekBytes = mcp.DefaultMaxRequestBodyBytes
)

// TransportConfig holds the MCP transport options of a handler (its JSON
// fields are the handler's own).
type TransportConfig struct {
	// Mode is "stateful" (the default: MCP sessions with Mcp-Session-Id,
	// a GET stream and resumable SSE streams) or "stateless" (no sessions,
	// for fleets behind a load balancer; the only mode that also serves
	// the sessionless 2026-07-28 protocol). The stateless flag is the same
	// as mode stateless.
	Mode string `json:"mode,omitempty"`
	// KeepaliveInterval: an SSE stream silent for this long gets an SSE
	// comment line, so that idle streams survive write timeouts and
	// proxies. Default 15s; negative turns keep-alives off.
	KeepaliveInterval caddy.Duration `json:"keepalive_interval,omitempty"`
	// EventStore is where stateful mode keeps SSE events for clients that
	// resume a dropped stream with Last-Event-ID: "etcd" (the default: the
	// crank app's store, so any replica can replay them) or "off" (no
	// event ids, no resumption).
	EventStore string `json:"event_store,omitempty"`
	// EventMaxEvents and EventMaxBytes bound each stream's stored events
	// (defaults 1000 and 1 MiB).
	EventMaxEvents int   `json:"event_max_events,omitempty"`
	EventMaxBytes  int64 `json:"event_max_bytes,omitempty"`
	// EventTTL is how long a stored event can be replayed: the time a
	// client has to reconnect. Default 5m, at most the session timeout.
	EventTTL caddy.Duration `json:"event_ttl,omitempty"`
}

// provisionTransport checks the transport options and settles the mode.
func (h *Handler) provisionTransport() error {
	t := &h.TransportConfig
	switch t.Mode {
	case "":
		t.Mode = modeStateful
		if h.Stateless {
			t.Mode = modeStateless
		}
	case modeStateful:
		if h.Stateless {
			return errors.New("crank: mode: stateful contradicts stateless")
		}
	case modeStateless:
		h.Stateless = true
	default:
		return fmt.Errorf("crank: mode: must be %q or %q, got %q", modeStateful, modeStateless, t.Mode)
	}
	switch t.EventStore {
	case "", "etcd", "off":
	default:
		return fmt.Errorf("crank: event_store: must be \"etcd\" or \"off\", got %q", t.EventStore)
	}
	if t.EventMaxEvents < 0 || t.EventMaxEvents > store.MaxEventLogEvents {
		return fmt.Errorf("crank: event_max_events: must be 0-%d, got %d", store.MaxEventLogEvents, t.EventMaxEvents)
	}
	if t.EventTTL < 0 {
		return fmt.Errorf("crank: event_ttl: must be positive (got %s)", time.Duration(t.EventTTL))
	}
	if t.EventMaxBytes < 0 || t.EventMaxBytes > store.MaxEventLogBytes {
		return fmt.Errorf("crank: event_max_bytes: must be 0-%d, got %d", store.MaxEventLogBytes, t.EventMaxBytes)
	}
	return nil
}

// keepalive returns the keep-alive interval in effect (0: none).
func (t *TransportConfig) keepalive() time.Duration {
	switch {
	case t.KeepaliveInterval < 0:
		return 0
	case t.KeepaliveInterval == 0:
		return DefaultKeepaliveInterval
	}
	return time.Duration(t.KeepaliveInterval)
}

// transport is what the endpoint needs of the transport options at
// request time.
type transport struct {
	stateful  bool
	keepalive time.Duration
	retry     string // the priming event's retry field, in ms ("" for none)
	// sse serves stateless json_response calls that carry a progress
	// token: go-sdk drops progress on a JSON answer, so they get SSE.
	sse *mcp.StreamableHTTPHandler
}

// streamableOptions completes the SDK handler's options for the endpoint:
// the event store in stateful mode, cancellation tied to the request for
// the sessionless protocol.
func (ep *endpoint) streamableOptions(h *Handler, opts *mcp.StreamableHTTPOptions) {
	t := &h.TransportConfig
	ep.transport = transport{stateful: !h.Stateless, keepalive: t.keepalive()}
	// The sessionless protocol has no notifications/cancelled: the POST is
	// the request, so its end cancels the call.
	opts.PropagateRequestCancellation = true
	if h.Stateless && h.JSONResponse {
		sse := *opts
		sse.JSONResponse = false
		ep.transport.sse = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server }, &sse)
	}
	if h.Stateless || t.EventStore == "off" {
		return
	}
	ttl := time.Duration(t.EventTTL)
	if ttl == 0 {
		ttl = DefaultEventTTL
	}
	if h.SessionTimeout > 0 {
		ttl = min(ttl, time.Duration(h.SessionTimeout))
	}
	es := newEventStore(func() eventLogStore {
		if p := ep.store.Load(); p != nil {
			return *p
		}
		return nil
	}, store.EventLimits{MaxEvents: t.EventMaxEvents, MaxBytes: t.EventMaxBytes, TTL: ttl})
	es.logger = h.logger
	es.standaloneOnly = h.JSONResponse
	ep.eventStore = es
	opts.EventStore = es
	ep.transport.retry = strconv.FormatInt(DefaultSSERetry.Milliseconds(), 10)
}

// checkRequest answers what the SDK would get wrong, and reports whether
// it did:
//   - in stateful mode a POST without Mcp-Session-Id must be an initialize
//     (or a sessionless 2026-07-28 request, which the SDK refuses with
//     -32022 so that the client falls back); anything else is 400;
//   - in stateless json_response mode a call with a progress token is
//     served with SSE, where its progress notifications can go.
func (ep *endpoint) checkRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	needSession := ep.transport.stateful && r.Header.Get("Mcp-Session-Id") == "" &&
		r.Header.Get("MCP-Protocol-Version") < "2026-07-28"
	if !needSession && ep.transport.sse == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPeekBytes+1))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || len(body) > maxPeekBytes {
		return false // the SDK reports it
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false // a batch or malformed JSON: the SDK decides
	}
	if ep.transport.sse != nil {
		if msg.Params.Meta["progressToken"] == nil {
			return false
		}
		w, stop := ep.wrap(w)
		defer stop()
		ep.transport.sse.ServeHTTP(w, r)
		return true
	}
	if msg.Method == "initialize" || msg.Method == "server/discover" || msg.Params.Meta[mcp.MetaKeyProtocolVersion] != nil {
		return false
	}
	what := "a response"
	if msg.Method != "" {
		what = strconv.Quote(msg.Method)
	}
	body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600,
		"message": "Bad Request: Mcp-Session-Id header is required for " + what + " (only initialize opens a session)"}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	return true
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
}

// wrap returns w wrapped for keep-alives and priming, and the function
// that stops them.
func (ep *endpoint) wrap(w http.ResponseWriter) (http.ResponseWriter, func()) {
	if ep.transport.keepalive <= 0 && ep.transport.retry == "" {
		return w, func() {}
	}
	sw := &sseWriter{ResponseWriter: w, interval: ep.transport.keepalive, retry: ep.transport.retry}
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

// Flush sends what was written; the SDK flushes after every event.
func (s *sseWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	if s.timer != nil {
		s.timer.Stop()
	}
}

// UnmarshalCaddyfile reads one transport subdirective of the crank block
// and reports whether it was one. Syntax:
//
//	mode               stateful|stateless
//	keepalive_interval <duration>|off
//	event_store        etcd|off
//	event_max_events   <n>
//	event_max_bytes    <size>
//	event_ttl          <duration>
func (t *TransportConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) (bool, error) {
	opt := d.Val()
	var arg string
	switch opt {
	case "mode", "keepalive_interval", "event_store", "event_max_events", "event_max_bytes", "event_ttl":
		if err := oneArg(d, &arg); err != nil {
			return true, err
		}
	default:
		return false, nil
	}
	switch opt {
	case "mode":
		if arg != modeStateful && arg != modeStateless {
			return true, d.Errf("mode: must be stateful or stateless, got %q", arg)
		}
		t.Mode = arg
	case "keepalive_interval":
		if arg == "off" {
			t.KeepaliveInterval = -1
			return true, nil
		}
		dur, err := parseDuration(d, opt, arg)
		if err != nil {
			return true, err
		}
		t.KeepaliveInterval = dur
	case "event_ttl":
		dur, err := parseDuration(d, opt, arg)
		if err != nil {
			return true, err
		}
		t.EventTTL = dur
	case "event_store":
		if arg != "etcd" && arg != "off" {
			return true, d.Errf("event_store: must be etcd or off, got %q", arg)
		}
		t.EventStore = arg
	case "event_max_events":
		n, err := strconv.Atoi(arg)
		if err != nil || n <= 0 || n > store.MaxEventLogEvents {
			return true, d.Errf("event_max_events: must be a whole number 1-%d, got %q", store.MaxEventLogEvents, arg)
		}
		t.EventMaxEvents = n
	case "event_max_bytes":
		size, err := humanizeBytes(arg)
		if err != nil || size <= 0 || size > store.MaxEventLogBytes {
			return true, d.Errf("event_max_bytes: must be a size of 1 byte to %d bytes (e.g. 512KiB), got %q", store.MaxEventLogBytes, arg)
		}
		t.EventMaxBytes = size
	}
	return true, nil
}

// Interface guards.
var (
	_ http.ResponseWriter = (*sseWriter)(nil)
	_ http.Flusher        = (*sseWriter)(nil)
)

// humanizeBytes parses a byte size: a whole number with an optional unit
// (B, KB, KiB, MB, MiB; case-insensitive).
func humanizeBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1000}, {"mb", 1000 * 1000}, {"b", 1}}
	num, mult := strings.ToLower(strings.TrimSpace(s)), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}
