package mcpserver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedRecorder is a ResponseWriter safe to read while it is written.
type lockedRecorder struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	body    bytes.Buffer
	flushes int
}

func newLockedRecorder() *lockedRecorder { return &lockedRecorder{header: http.Header{}} }

func (r *lockedRecorder) Header() http.Header { return r.header }
func (r *lockedRecorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = code
}

func (r *lockedRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.Write(p)
}

func (r *lockedRecorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
}

func (r *lockedRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}

// TestSSEWriterKeepaliveAndPriming writes events from several goroutines
// while the keep-alive timer runs: every block on the wire is a whole
// event or a whole comment, and the priming event carries the retry field.
func TestSSEWriterKeepaliveAndPriming(t *testing.T) {
	t.Parallel()
	rec := newLockedRecorder()
	ep := &Endpoint{transport: transport{keepalive: 50 * time.Microsecond, retry: "1000"}}
	w, stop := ep.wrap(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	if _, err := io.WriteString(w, "event: prime\nid: S_0\ndata: \n\n"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				_, _ = io.WriteString(w, "event: message\ndata: {\"g\":"+string(rune('0'+g))+"}\n\n")
				if i%50 == 0 {
					http.NewResponseController(w).Flush()
				}
			}
		}()
	}
	wg.Wait()
	// Wait for an idle tick to write a comment.
	for !strings.Contains(rec.String(), ": keep-alive\n\n") {
		http.NewResponseController(w).Flush()
	}
	stop()
	after := rec.String()
	blocks := strings.Split(strings.TrimSuffix(after, "\n\n"), "\n\n")
	if blocks[0] != "event: prime\nid: S_0\nretry: 1000\ndata: " {
		t.Fatalf("priming event %q", blocks[0])
	}
	messages := 0
	for _, b := range blocks[1:] {
		switch {
		case b == ": keep-alive":
		case strings.HasPrefix(b, "event: message\ndata: {\"g\":") && strings.Count(b, "\n") == 1:
			messages++
		default:
			t.Fatalf("torn block %q", b)
		}
	}
	if messages != 800 {
		t.Fatalf("%d messages, want 800", messages)
	}
	if rec.String() != after {
		t.Fatal("written to after stop")
	}
}

// TestSSEWriterLeavesJSONAlone checks that a JSON answer gets neither
// keep-alives nor a retry field.
func TestSSEWriterLeavesJSONAlone(t *testing.T) {
	t.Parallel()
	rec := newLockedRecorder()
	ep := &Endpoint{transport: transport{keepalive: time.Microsecond, retry: "1000"}}
	w, stop := ep.wrap(rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "event: prime\ndata: not an SSE stream\n")
	sw := w.(*sseWriter)
	sw.mu.Lock()
	timer := sw.timer
	sw.mu.Unlock()
	stop()
	if timer != nil || rec.String() != "event: prime\ndata: not an SSE stream\n" {
		t.Fatalf("JSON response altered: timer %v, body %q", timer, rec.String())
	}
	// Without keep-alives or a retry field there is nothing to wrap.
	plain := &Endpoint{}
	if w, _ := plain.wrap(rec); w != http.ResponseWriter(rec) {
		t.Fatal("wrapped without a reason")
	}
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	stateful := &Endpoint{transport: transport{stateful: true, refuseLegacy: true}}
	legacy := &Endpoint{transport: transport{stateful: true}}
	for _, c := range []struct {
		name    string
		ep      *Endpoint
		method  string
		body    string
		headers map[string]string
		refused bool
	}{
		{"initialize", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil, false},
		{"tools/list without session", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, true},
		{"notification without session", stateful, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, true},
		{"tools/list without session, legacy allowed", legacy, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, false},
		{"notification without session, legacy allowed", legacy, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, false},
		{"response without session, legacy allowed", legacy, http.MethodPost, `{"jsonrpc":"2.0","id":1,"result":{}}`, nil, true},
		{"response without session", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"result":{}}`, nil, true},
		{"with session", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": "x"}, false},
		{"sessionless protocol header", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, false},
		{"sessionless protocol meta", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil, false},
		{"discover", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, nil, false},
		{"trailing data without session", stateful, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"} x`, nil, true},
		{"batch", stateful, http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, nil, false},
		{"malformed", stateful, http.MethodPost, `{"jsonrpc":`, nil, false},
		{"GET", stateful, http.MethodGet, ``, nil, false},
		{"stateless", &Endpoint{}, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, "/mcp", strings.NewReader(c.body))
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			if got := c.ep.checkRequest(w, r, peek(r)); got != c.refused {
				t.Fatalf("refused = %v, want %v (%d %s)", got, c.refused, w.Code, w.Body)
			}
			if c.refused {
				if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Mcp-Session-Id header is required") {
					t.Fatalf("answer %d %s", w.Code, w.Body)
				}
				return
			}
			if b, _ := io.ReadAll(r.Body); string(b) != c.body {
				t.Fatalf("body passed on as %q, want %q", b, c.body)
			}
		})
	}
}
