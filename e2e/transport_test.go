package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseEvent is one raw server-sent event.
type sseEvent struct {
	ID, Name, Retry, Data string
	Comment               bool // a comment line (": ...") alone
}

// sseReader reads raw SSE events from a response body.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	return &sseReader{sc}
}

// next returns the next event (or comment block), or false at the end of
// the stream.
func (r *sseReader) next() (sseEvent, bool) {
	var ev sseEvent
	seen := false
	var data []string
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if seen {
				ev.Data = strings.Join(data, "\n")
				return ev, true
			}
			continue
		}
		seen = true
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimPrefix(v, " ")
		switch k {
		case "":
			ev.Comment = true
		case "id":
			ev.ID = v
		case "event":
			ev.Name = v
		case "retry":
			ev.Retry = v
		case "data":
			data = append(data, v)
		}
	}
	return ev, false
}

// rawMCP sends raw Streamable HTTP requests to an MCP endpoint.
type rawMCP struct {
	t       *testing.T
	url     string
	version string
	session string
}

func (c *rawMCP) do(ctx context.Context, method, body string, hdr map[string]string) *http.Response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, c.url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.version != "" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// status sends a request and returns its status and body.
func (c *rawMCP) status(method, body string, hdr map[string]string) (int, string) {
	c.t.Helper()
	resp := c.do(context.Background(), method, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// initialize opens a session at version.
func (c *rawMCP) initialize(version string) {
	c.t.Helper()
	c.version = ""
	resp := c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.session == "" {
		c.t.Fatalf("initialize: %s, session %q", resp.Status, c.session)
	}
	c.version = version
	if code, body := c.status(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusAccepted || body != "" {
		c.t.Fatalf("notifications/initialized: %d %q", code, body)
	}
}

const chatCall = `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"chat","arguments":{"messages":[{"role":"user","content":"hi"}]},"_meta":{"progressToken":%s}}}`

var chatChunks = []string{"Echo: ", "hi", "\nline two", " — done"}

// callChat calls the chat tool with a progress token and checks that every
// chunk arrived as progress, then the joined text as the result.
func callChat(ctx context.Context, t *testing.T, cs *mcp.ClientSession, progress *progressLog, token any) {
	t.Helper()
	params := &mcp.CallToolParams{Name: "chat", Arguments: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}
	params.SetProgressToken(token)
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	var got []string
	for _, p := range progress.take(len(chatChunks)) {
		got = append(got, p.Message)
	}
	if strings.Join(got, "|") != strings.Join(chatChunks, "|") || textOf(res) != strings.Join(chatChunks, "") {
		t.Fatalf("chunks %q, text %q", got, textOf(res))
	}
}

// TestTransportStatusCodes checks the Streamable HTTP status codes and
// headers of a stateful and a stateless endpoint.
func TestTransportStatusCodes(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL)})
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")
	if !regexp.MustCompile(`^[\x21-\x7E]{16,}$`).MatchString(c.session) {
		t.Fatalf("session id %q: want at least 16 visible ASCII characters", c.session)
	}

	// Without Mcp-Session-Id a request other than initialize is a
	// session-less legacy call, served as a one-shot stateless one; with
	// sessionless_legacy refuse only initialize is allowed.
	refusing := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: "sessionless_legacy refuse"})
	r := &rawMCP{t: t, url: refusing.MCPURL}
	noSession := map[string]string{"Mcp-Session-Id": ""}
	for body, served := range map[string]int{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`:         http.StatusOK,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`:               http.StatusOK,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`: http.StatusAccepted,
	} {
		if code, resp := c.status(http.MethodPost, body, noSession); code != served || strings.Contains(resp, "Mcp-Session-Id header") {
			t.Errorf("%s without a session: %d %s, want %d", body, code, resp, served)
		}
		if code, resp := r.status(http.MethodPost, body, noSession); code != http.StatusBadRequest || !strings.Contains(resp, "sessionless_legacy refuse") {
			t.Errorf("%s without a session, legacy calls refused: %d %s, want 400 naming Mcp-Session-Id", body, code, resp)
		}
	}
	// With it, ping works and a notification is accepted with no body.
	if code, _ := c.status(http.MethodPost, `{"jsonrpc":"2.0","id":4,"method":"ping"}`, nil); code != http.StatusOK {
		t.Errorf("ping: %d", code)
	}
	// A JSON-RPC response from the client is accepted like a notification.
	if code, body := c.status(http.MethodPost, `{"jsonrpc":"2.0","id":99,"result":{}}`, nil); code != http.StatusAccepted || body != "" {
		t.Errorf("client response: %d %q, want 202 and no body", code, body)
	}
	// An unknown session is 404; so is GET and DELETE of one.
	unknown := map[string]string{"Mcp-Session-Id": "no-such-session"}
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if code, _ := c.status(m, map[bool]string{true: `{"jsonrpc":"2.0","id":5,"method":"ping"}`}[m == http.MethodPost], unknown); code != http.StatusNotFound {
			t.Errorf("%s with an unknown session: %d, want 404", m, code)
		}
	}
	// An unsupported protocol version is 400.
	for _, v := range []string{"1999-01-01", "2025-13-45", "2099-01-01"} {
		if code, _ := c.status(http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, map[string]string{"MCP-Protocol-Version": v}); code != http.StatusBadRequest {
			t.Errorf("MCP-Protocol-Version %s: %d, want 400", v, code)
		}
	}
	// GET opens the session's stream.
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodGet, "", nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("GET: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	cancel()
	resp.Body.Close()
	// DELETE ends the session; it is 404 from then on.
	if code, _ := c.status(http.MethodDelete, "", nil); code != http.StatusNoContent {
		t.Errorf("DELETE: %d", code)
	}
	if code, _ := c.status(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, nil); code != http.StatusNotFound {
		t.Errorf("ping after DELETE: %d, want 404", code)
	}

	// A stateless endpoint has no GET stream and no sessions to delete.
	gs := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: "mode stateless"})
	s := &rawMCP{t: t, url: gs.MCPURL, version: "2025-11-25"}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if code, _ := s.status(m, "", nil); code != http.StatusMethodNotAllowed {
			t.Errorf("stateless %s: %d, want 405", m, code)
		}
	}
	if code, body := s.status(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); code != http.StatusOK || !strings.Contains(body, `"chat"`) {
		t.Errorf("stateless tools/list: %d %s", code, body)
	}
}

// TestTransportResume drops a streaming call's connection midway and
// resumes it with Last-Event-ID: the priming event carries an id and a
// retry delay, and the resumed stream brings every remaining message once,
// from the event log in etcd.
func TestTransportResume(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL)})
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, fmt.Sprintf(chatCall, "10", `"tok"`), nil)
	rd := newSSEReader(resp.Body)
	prime, ok := rd.next()
	if !ok || prime.ID == "" || prime.Data != "" || prime.Retry != "1000" {
		t.Fatalf("priming event %+v: want an id, retry 1000 and empty data", prime)
	}
	var seen []sseEvent
	for len(seen) < 2 {
		ev, ok := rd.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if !ev.Comment {
			seen = append(seen, ev)
		}
	}
	cancel() // the connection drops after two chunks
	resp.Body.Close()

	resume := func(lastID string) []sseEvent {
		// Until the server has noticed the dropped connection, the stream
		// is still taken (409), as a client retrying after the priming
		// event's retry delay would find it.
		var resp *http.Response
		waitFor(t, "the dropped stream to be released", func() bool {
			resp = c.do(context.Background(), http.MethodGet, "", map[string]string{"Last-Event-ID": lastID, "Content-Type": ""})
			if resp.StatusCode == http.StatusConflict {
				resp.Body.Close()
				return false
			}
			return true
		})
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("resume from %s: %s %s", lastID, resp.Status, b)
		}
		var out []sseEvent
		rd := newSSEReader(resp.Body)
		for {
			ev, ok := rd.next()
			if !ok {
				return out
			}
			if ev.Comment {
				continue
			}
			out = append(out, ev)
			if strings.Contains(ev.Data, `"id":10`) {
				return out // the response ends the stream
			}
		}
	}
	all := append(seen, resume(seen[len(seen)-1].ID)...)
	checkChat := func(what string, evs []sseEvent) {
		t.Helper()
		if len(evs) != len(chatChunks)+1 {
			t.Fatalf("%s: %d events, want %d progress + 1 response: %+v", what, len(evs), len(chatChunks), evs)
		}
		ids := map[string]bool{}
		for i, ev := range evs {
			if ids[ev.ID] || ev.ID == "" {
				t.Fatalf("%s: event %d has id %q (duplicate or missing)", what, i, ev.ID)
			}
			ids[ev.ID] = true
			if i < len(chatChunks) {
				var n struct {
					Method string
					Params struct {
						Progress float64
						Message  string
					}
				}
				if err := json.Unmarshal([]byte(ev.Data), &n); err != nil || n.Method != "notifications/progress" ||
					n.Params.Progress != float64(i) || n.Params.Message != chatChunks[i] {
					t.Fatalf("%s: event %d: %s, want chunk %q", what, i, ev.Data, chatChunks[i])
				}
			} else if !strings.Contains(ev.Data, `"text":"Echo: hi\nline two — done"`) {
				t.Fatalf("%s: response %s", what, ev.Data)
			}
		}
	}
	checkChat("dropped and resumed", all)
	// Resuming from the priming event replays the whole stream again.
	checkChat("replayed from the start", resume(prime.ID))
	// An event id the log never had is refused, not answered with a
	// partial stream.
	if code, _ := c.status(http.MethodGet, "", map[string]string{"Last-Event-ID": "OTHERSTREAM_3", "Content-Type": ""}); code != http.StatusBadRequest {
		t.Errorf("resume of an unknown stream: %d, want 400", code)
	}
}

// TestTransportGoSDKResume runs the go-sdk client through a proxy that
// cuts the first streaming response after its second chunk: the client
// resumes by itself and gets every chunk once.
func TestTransportGoSDKResume(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL)})
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, g.MCPURL, strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		cut := false
		if strings.Contains(string(body), `"progressToken"`) {
			once.Do(func() { cut = true })
		}
		rd := bufio.NewReader(resp.Body)
		chunks := 0
		for {
			line, err := rd.ReadString('\n')
			_, _ = io.WriteString(w, line)
			w.(http.Flusher).Flush()
			if strings.Contains(line, "notifications/progress") {
				chunks++
			}
			if err != nil || (cut && chunks == 2 && line == "\n") {
				return // drop the connection after the second chunk's event
			}
		}
	}))
	t.Cleanup(proxy.Close)

	var progress progressLog
	client := mcp.NewClient(&mcp.Implementation{Name: "resume", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proxy.URL, DisableStandaloneSSE: true}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callChat(ctx, t, cs, &progress, "resume-tok")
	if p := progress.take(0); len(p) != 0 {
		t.Fatalf("%d more progress notifications (duplicates)", len(p))
	}
}

// TestTransportKeepalive checks that an idle SSE stream gets keep-alive
// comments.
func TestTransportKeepalive(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: "keepalive_interval 50ms"})
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := c.do(ctx, http.MethodGet, "", map[string]string{"Content-Type": ""})
	defer resp.Body.Close()
	expectKeepalives(t, resp.Body)
}

// expectKeepalives reads an idle GET stream: the SDK's first comment, then
// two keep-alive comments, each arriving on its own.
func expectKeepalives(t *testing.T, body io.Reader) {
	t.Helper()
	rd := bufio.NewReader(body)
	var lines []string
	for len(lines) < 6 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		lines = append(lines, line)
	}
	if strings.Join(lines, "") != ": ok\n\n: keep-alive\n\n: keep-alive\n\n" {
		t.Fatalf("idle stream: %q", lines)
	}
}

// TestTransportModes drives a streaming tool with the go-sdk client in
// each mode and protocol version: every chunk arrives as progress, then
// the result.
func TestTransportModes(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	for _, c := range []struct {
		name, handler, version, want string
	}{
		// A stateful endpoint serves both generations: the client's
		// server/discover offers 2026-07-28, which it takes; a client
		// asking for an older version gets a session.
		{"stateful", "", "", "2026-07-28"},
		{"stateful-2025-11-25", "", "2025-11-25", "2025-11-25"},
		{"stateful-2025-06-18", "", "2025-06-18", "2025-06-18"},
		{"stateful-json", "json_response", "", "2026-07-28"},
		{"stateful-json-2025-11-25", "json_response", "2025-11-25", "2025-11-25"},
		{"stateless-2026-07-28", "mode stateless", "", "2026-07-28"},
		{"stateless-2025-11-25", "mode stateless", "2025-11-25", "2025-11-25"},
		// go-sdk drops progress in stateless JSON mode; a call with a
		// progress token is answered with SSE.
		{"stateless-json-2026-07-28", "mode stateless\n\t\tjson_response", "", "2026-07-28"},
		{"stateless-json-2025-11-25", "mode stateless\n\t\tjson_response", "2025-11-25", "2025-11-25"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: c.handler})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var progress progressLog
			client := mcp.NewClient(&mcp.Implementation{Name: "modes", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, &mcp.ClientSessionOptions{ProtocolVersion: c.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if ir := cs.InitializeResult(); ir == nil || ir.ProtocolVersion != c.want {
				t.Fatalf("negotiated %+v, want %s", ir, c.want)
			}
			callChat(ctx, t, cs, &progress, 42)
		})
	}
}

// blockingUpstream answers GET /block only when the request ends, and
// reports when requests start and end.
type blockingUpstream struct {
	*httptest.Server
	started, ended chan struct{}
}

func newBlockingUpstream(t testing.TB) *blockingUpstream {
	u := &blockingUpstream{started: make(chan struct{}, 16), ended: make(chan struct{}, 16)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.started <- struct{}{}
		<-r.Context().Done()
		u.ended <- struct{}{}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *blockingUpstream) ops() string {
	return fmt.Sprintf(`
operations:
  - name: block
    description: An upstream that answers only when the request is cancelled.
    adapter: rest
    timeout: 120s
    config: {method: GET, url: "%s/block"}
`, u.URL)
}

func waitChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// TestTransportCancellation cancels a call from the go-sdk client
// (notifications/cancelled in a session; in the sessionless protocol, on
// either mode, the end of the POST): the upstream request made by the
// REST adapter process ends.
func TestTransportCancellation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, handler string
		sessionless   bool // the client speaks 2026-07-28
	}{
		{"stateful", "", false},
		{"stateful-2026-07-28", "", true},
		{"stateless-2026-07-28", "mode stateless", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			up := newBlockingUpstream(t)
			g := startGateway(t, gatewayOptions{Operations: up.ops(), Handler: c.handler})
			var cs *mcp.ClientSession
			if c.sessionless {
				var err error
				cs, err = mcp.NewClient(&mcp.Implementation{Name: "cancel", Version: "1"}, nil).Connect(context.Background(),
					&mcp.StreamableClientTransport{Endpoint: g.MCPURL}, nil)
				if err != nil || cs.InitializeResult().ProtocolVersion != "2026-07-28" {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { _ = cs.Close() })
			} else {
				cs = g.connect(context.Background())
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block"})
				done <- err
			}()
			waitChan(t, up.started, "the upstream got the request")
			cancel()
			waitChan(t, up.ended, "the upstream request was cancelled")
			if err := <-done; err == nil {
				t.Fatal("the cancelled call succeeded")
			}
			// The session carries on.
			if _, err := cs.ListTools(context.Background(), nil); err != nil {
				t.Fatalf("after a cancelled call: %v", err)
			}
		})
	}
}

// TestTransportDisconnect drops a call's connection: the call keeps
// running (a disconnect is not a cancellation) and the session keeps
// working; notifications/cancelled then stops it.
func TestTransportDisconnect(t *testing.T) {
	t.Parallel()
	up := newBlockingUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: up.ops()})
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"block"}}`, nil)
	waitChan(t, up.started, "the upstream got the request")
	cancel()
	resp.Body.Close()

	if code, body := c.status(http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil); code != http.StatusOK || !strings.Contains(body, `"block"`) {
		t.Fatalf("tools/list after a disconnect: %d %s", code, body)
	}
	select {
	case <-up.ended:
		t.Fatal("the disconnect cancelled the upstream request")
	default:
	}
	if code, _ := c.status(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"test"}}`, nil); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d", code)
	}
	waitChan(t, up.ended, "the upstream request was cancelled")
}

// TestTransportBehindReverseProxy puts Caddy's reverse_proxy (with encode
// gzip) in front of the endpoint: SSE passes uncompressed and unbuffered —
// an idle GET stream's keep-alives arrive one by one — and the go-sdk
// client streams a tool through it.
func TestTransportBehindReverseProxy(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	// The handler block is closed early to add a proxied route on the same
	// site; the harness's closing brace ends the trailing empty block.
	front := "keepalive_interval 50ms\n\t}\n\thandle /front {\n\t\tencode gzip\n\t\trewrite * /mcp\n\t\treverse_proxy {http.request.hostport}\n\t}\n\thandle /unused {"
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: front})
	url := strings.TrimSuffix(g.MCPURL, "/mcp") + "/front"

	var progress progressLog
	client := mcp.NewClient(&mcp.Implementation{Name: "proxied", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v\n%s", err, g.log.String())
	}
	defer cs.Close()
	callChat(ctx, t, cs, &progress, "proxied")

	c := &rawMCP{t: t, url: url}
	c.initialize("2025-11-25")
	resp := c.do(ctx, http.MethodGet, "", map[string]string{"Content-Type": "", "Accept-Encoding": "gzip"})
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("proxied SSE: Content-Encoding %q, Content-Type %q", ce, resp.Header.Get("Content-Type"))
	}
	expectKeepalives(t, resp.Body)
}

// TestTransportHotPathOff: a gateway with hot_path off answers a go-sdk
// client's tool calls, in both protocol generations, as one with the hot
// path on does (the differential tests in host/mcpserver compare the
// bytes).
func TestTransportHotPathOff(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	ops := opsFile(t, up, "5s", "")
	env := []string{"CRANK_E2E_TOKEN=" + secretToken}
	on := startGateway(t, gatewayOptions{Operations: ops, Env: env})
	off := startGateway(t, gatewayOptions{Operations: ops, Env: env, Handler: "hot_path off"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, gen := range generations {
		var answers []string
		for _, g := range []*gateway{on, off} {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "hot-path-off", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, gen.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range []map[string]any{{"id": 7}, {"id": 404}, {"id": "seven"}} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: args})
				if err != nil {
					t.Fatalf("%s: get_user %v: %v", gen.name, args, err)
				}
				b, _ := json.Marshal(res)
				answers = append(answers, string(b))
			}
			_ = cs.Close()
		}
		if n := len(answers) / 2; strings.Join(answers[:n], "\n") != strings.Join(answers[n:], "\n") {
			t.Errorf("%s: hot_path on and off differ\non:  %q\noff: %q", gen.name, answers[:n], answers[n:])
		}
	}
}
