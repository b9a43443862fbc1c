package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// sessionProtocol makes a go-sdk client open a session (2025-11-25)
// instead of speaking the sessionless protocol, which it prefers.
var sessionProtocol = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// rawReply is an HTTP answer to a raw JSON-RPC POST.
type rawReply struct {
	status int
	header http.Header
	body   string
	err    *mcptest.Error
	result json.RawMessage
}

// rawPost posts one JSON-RPC message with exactly the given headers (and
// the Content-Type and Accept every client sends), and reads the reply
// from a JSON or SSE answer.
func rawPost(t *testing.T, url string, hdr map[string]string, msg map[string]any) rawReply {
	t.Helper()
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := rawReply{status: resp.StatusCode, header: resp.Header, body: string(body)}
	payload := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				payload = []byte(d)
			}
		}
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *mcptest.Error  `json:"error"`
	}
	if json.Unmarshal(payload, &env) == nil {
		r.err, r.result = env.Error, env.Result
	}
	return r
}

// newParams are request params of the sessionless protocol at version v,
// with the key-value pairs kv.
func newParams(v string, kv ...any) map[string]any {
	p := map[string]any{"_meta": map[string]any{mcp.MetaKeyProtocolVersion: v,
		mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}},
		mcp.MetaKeyClientInfo:         map[string]any{"name": "raw", "version": "1"}}}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// The 2026-07-28 request headers: on a stateful and on a stateless
// endpoint, every method of the sessionless protocol is refused (400,
// -32020, a message naming the header) when Mcp-Method is missing or
// differs from the body's method, and a method that names something
// (tools/call, prompts/get, resources/read) when Mcp-Name is missing or
// differs from the body's name; with the right headers it is served.
func TestSessionlessHeaderChecks(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	for _, stateless := range []bool{false, true} {
		url, _ := newTaskReplica(t, st, up.URL, func(o *Options) { o.Stateless = stateless })
		mode := map[bool]string{true: "stateless", false: "stateful"}[stateless]
		for _, c := range []struct {
			method, name string // name: "" for a method without Mcp-Name
			params       map[string]any
			notification bool
		}{
			{method: "server/discover", params: newParams(sessionlessProtocolVersion)},
			{method: "tools/list", params: newParams(sessionlessProtocolVersion)},
			{method: "tools/call", name: "get_user", params: newParams(sessionlessProtocolVersion, "name", "get_user", "arguments", map[string]any{"id": 1})},
			{method: "prompts/list", params: newParams(sessionlessProtocolVersion)},
			{method: "prompts/get", name: "p", params: newParams(sessionlessProtocolVersion, "name", "p")},
			{method: "resources/list", params: newParams(sessionlessProtocolVersion)},
			{method: "resources/templates/list", params: newParams(sessionlessProtocolVersion)},
			{method: "resources/read", name: "file:///x", params: newParams(sessionlessProtocolVersion, "uri", "file:///x")},
			{method: "completion/complete", params: newParams(sessionlessProtocolVersion, "ref", map[string]any{"type": "ref/prompt", "name": "p"}, "argument", map[string]any{"name": "a", "value": ""})},
			{method: "tasks/get", params: newParams(sessionlessProtocolVersion, "taskId", "job_x")},
			{method: "tasks/update", params: newParams(sessionlessProtocolVersion, "taskId", "job_x", "inputResponses", map[string]any{})},
			{method: "tasks/cancel", params: newParams(sessionlessProtocolVersion, "taskId", "job_x")},
			{method: "notifications/cancelled", params: map[string]any{"requestId": 1}, notification: true},
		} {
			t.Run(mode+"/"+c.method, func(t *testing.T) {
				msg := map[string]any{"jsonrpc": "2.0", "method": c.method, "params": c.params}
				if !c.notification {
					msg["id"] = 7
				}
				good := map[string]string{"MCP-Protocol-Version": sessionlessProtocolVersion, "Mcp-Method": c.method, "X-Agent": "agent-1"}
				if c.name != "" {
					good["Mcp-Name"] = c.name
				}
				with := func(k, v string) map[string]string {
					h := maps(good)
					if v == "" {
						delete(h, k)
					} else {
						h[k] = v
					}
					return h
				}
				refused := func(what string, hdr map[string]string, want string) {
					t.Helper()
					r := rawPost(t, url, hdr, msg)
					if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != mcp.CodeHeaderMismatch || !strings.Contains(r.err.Message, want) {
						t.Errorf("%s: %d %s, want 400 with error %d naming %q", what, r.status, r.body, mcp.CodeHeaderMismatch, want)
					}
					if r.header.Get(sessionIDHeader) != "" {
						t.Errorf("%s: answered with a session id", what)
					}
				}
				refused("no Mcp-Method", with("Mcp-Method", ""), "Mcp-Method")
				refused("another Mcp-Method", with("Mcp-Method", "tools/list"+map[bool]string{true: "x"}[c.method == "tools/list"]), "Mcp-Method")
				if c.name != "" {
					refused("no Mcp-Name", with("Mcp-Name", ""), "Mcp-Name")
					refused("another Mcp-Name", with("Mcp-Name", "other"), "Mcp-Name")
				}
				r := rawPost(t, url, good, msg)
				// Served: a result, or the method's own error (an unknown
				// prompt, resource or task: 400 with -32602 in this
				// protocol; a method the server lacks: 404 with -32601),
				// never a header error.
				if r.err != nil && r.err.Code == mcp.CodeHeaderMismatch || r.status >= 400 && (r.err == nil || r.err.Code != -32602 && r.err.Code != -32601) {
					t.Errorf("with the right headers: %d %s", r.status, r.body)
				}
				if r.header.Get(sessionIDHeader) != "" {
					t.Errorf("a sessionless request was answered with a session id")
				}
			})
		}
	}
}

// maps copies a header map.
func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// The classification edge cases on a stateful endpoint: discovery offers
// both generations, with or without a session id; a 2026-07-28 request
// naming a session is refused; an unknown future version gets -32022
// with the versions served; _meta naming a version without the header
// gets -32020; the session protocol keeps its sessions and its checks.
func TestGenerationClassification(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL)
	v := sessionlessProtocolVersion
	hdr := func(kv ...string) map[string]string {
		h := map[string]string{"X-Agent": "agent-1"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	req := func(method string, params map[string]any) map[string]any {
		return map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
	}

	// A session of the older generation.
	old := newTaskClient(t, url, "agent-1", "")
	old.Initialize(tasksProtocolVersion)
	if old.Session == "" {
		t.Fatal("initialize gave no session")
	}
	var tools struct {
		Tools []map[string]any `json:"tools"`
	}
	old.OK("tools/list", map[string]any{}, &tools)
	if len(tools.Tools) == 0 {
		t.Fatal("the session lists no tools")
	}

	discover := func(what string, h map[string]string) {
		t.Helper()
		r := rawPost(t, url, h, req("server/discover", newParams(v)))
		var res struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if r.status != http.StatusOK || r.err != nil || json.Unmarshal(r.result, &res) != nil {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		for _, want := range []string{v, tasksProtocolVersion, "2025-06-18"} {
			if !slices.Contains(res.SupportedVersions, want) {
				t.Errorf("%s: supportedVersions %v lack %s", what, res.SupportedVersions, want)
			}
		}
		if r.header.Get(sessionIDHeader) != "" {
			t.Errorf("%s: answered with a session id", what)
		}
	}
	discover("server/discover", hdr("MCP-Protocol-Version", v, "Mcp-Method", "server/discover"))
	discover("server/discover with a session id", hdr("MCP-Protocol-Version", v, "Mcp-Method", "server/discover", sessionIDHeader, old.Session))

	// A 2026-07-28 request naming a session.
	r := rawPost(t, url, hdr("MCP-Protocol-Version", v, "Mcp-Method", "tools/list", sessionIDHeader, old.Session), req("tools/list", newParams(v)))
	if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != -32600 || !strings.Contains(r.err.Message, "no Mcp-Session-Id") {
		t.Errorf("2026-07-28 with a session id: %d %s", r.status, r.body)
	}
	// The session is unharmed.
	old.OK("tools/list", map[string]any{}, &tools)
	// A session's request whose _meta carries the sessionless envelope
	// (with the session's own version header, or none) is served in the
	// session's generation: ping and logging/setLevel, which the
	// sessionless protocol removed, answer as the session's.
	for _, h := range []map[string]string{hdr("MCP-Protocol-Version", tasksProtocolVersion, sessionIDHeader, old.Session), hdr(sessionIDHeader, old.Session)} {
		for _, m := range []string{"ping", "logging/setLevel", "tools/list"} {
			params := newParams(v)
			if m == "logging/setLevel" {
				params["level"] = "debug"
			}
			r := rawPost(t, url, h, req(m, params))
			if r.status != http.StatusOK || r.err != nil || r.result == nil {
				t.Errorf("%s of a session with the sessionless envelope (%v): %d %s", m, h, r.status, r.body)
			}
		}
	}

	// An unknown future version: -32022 naming every version served.
	future := "2099-01-01"
	r = rawPost(t, url, hdr("MCP-Protocol-Version", future, "Mcp-Method", "tools/list"), req("tools/list", newParams(future)))
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if r.err == nil || r.err.Code != mcp.CodeUnsupportedProtocolVersion || json.Unmarshal(r.err.Data, &data) != nil ||
		!slices.Contains(data.Supported, v) || !slices.Contains(data.Supported, tasksProtocolVersion) || data.Requested != future {
		t.Errorf("a future version: %d %s", r.status, r.body)
	}
	r = rawPost(t, url, hdr("MCP-Protocol-Version", future, "Mcp-Method", "tools/list", sessionIDHeader, old.Session), req("tools/list", newParams(future)))
	if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != -32600 {
		t.Errorf("a future version with a session id: %d %s", r.status, r.body)
	}

	// _meta names the version, the header is missing.
	r = rawPost(t, url, hdr("Mcp-Method", "tools/list"), req("tools/list", newParams(v)))
	if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != mcp.CodeHeaderMismatch {
		t.Errorf("_meta version without the header: %d %s", r.status, r.body)
	}
	// The header says 2025-11-25, _meta 2026-07-28.
	r = rawPost(t, url, hdr("MCP-Protocol-Version", tasksProtocolVersion, "Mcp-Method", "server/discover"), req("server/discover", newParams(v)))
	if r.status != http.StatusBadRequest || r.err == nil || r.err.Code != mcp.CodeHeaderMismatch {
		t.Errorf("server/discover with a 2025-11-25 header: %d %s", r.status, r.body)
	}

	// The session protocol without a session: a session-less legacy
	// call, served as a one-shot stateless one (legacy.go).
	r = rawPost(t, url, hdr("MCP-Protocol-Version", tasksProtocolVersion), req("tools/list", map[string]any{}))
	if r.status != http.StatusOK || r.err != nil || !strings.Contains(string(r.result), "get_user") {
		t.Errorf("tools/list without a session: %d %s", r.status, r.body)
	}

	// A sessionless call runs, with no session.
	r = rawPost(t, url, hdr("MCP-Protocol-Version", v, "Mcp-Method", "tools/call", "Mcp-Name", "get_user"),
		req("tools/call", newParams(v, "name", "get_user", "arguments", map[string]any{"id": 1})))
	if r.status != http.StatusOK || r.err != nil || r.header.Get(sessionIDHeader) != "" {
		t.Errorf("a sessionless tools/call: %d %s", r.status, r.body)
	}
}

// On a stateful endpoint a sessionless caller without credentials or agent
// header has no agent: an agent-scoped start is refused with a message
// saying how to give it one, while a session of the same endpoint runs as
// its session and gets its task.
func TestSessionlessCallerWithoutAgent(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL)
	v := sessionlessProtocolVersion
	r := rawPost(t, url, map[string]string{"MCP-Protocol-Version": v, "Mcp-Method": "tools/call", "Mcp-Name": "report_start"},
		map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": newParams(v, "name", "report_start", "arguments", map[string]any{"n": 1001})})
	var res mcptest.CallResult
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || !res.IsError || !strings.Contains(res.Text(), "sessionless request") ||
		!strings.Contains(res.Text(), "agent_header") {
		t.Errorf("anonymous sessionless start: %d %s", r.status, r.body)
	}
	anon := &mcptest.Client{T: t, URL: url}
	anon.Initialize(tasksProtocolVersion)
	if task := anon.StartTask("report_start", map[string]any{"n": 1002}); task.TaskID == "" {
		t.Errorf("a session's task-augmented start = %+v", task)
	}
}

// BenchmarkGenerations compares a tools/call of a go-sdk client speaking
// the sessionless protocol with one of a client in a session, on the same
// default endpoint (one get_user through the REST adapter to a loopback
// upstream each): sessionless/session is what serving 2026-07-28 beside
// sessions costs per call.
func BenchmarkGenerations(b *testing.B) {
	up := mcptest.NewUsers(b)
	ep, err := New(testOptions("default"))
	if err != nil {
		b.Fatal(err)
	}
	ep.Attach(newTestHost(b, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil), nil)
	srv := httptest.NewServer(ep)
	b.Cleanup(func() { srv.Close(); _ = ep.Close() })
	ctx := context.Background()
	connect := func(opts *mcp.ClientSessionOptions) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", DisableStandaloneSSE: true}, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	sessionless, session := connect(nil), connect(sessionProtocol)
	if sessionless.ID() != "" || session.ID() == "" {
		b.Fatalf("sessions %q and %q", sessionless.ID(), session.ID())
	}
	measure := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		for range b.N {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
			if err != nil || res.IsError {
				b.Fatalf("get_user: %v %+v", err, res)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	for _, cs := range []*mcp.ClientSession{session, sessionless} { // warm: the adapter process, connections
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}}); err != nil || res.IsError {
			b.Fatalf("get_user: %v %+v", err, res)
		}
	}
	b.ResetTimer()
	inSession := measure(session)
	without := measure(sessionless)
	b.ReportMetric(float64(inSession.Microseconds()), "session-us/op")
	b.ReportMetric(float64(without.Microseconds()), "sessionless-us/op")
	b.ReportMetric(float64(without)/float64(inSession), "sessionless/session")
}

// A sessionless subscriptions/listen holds a session place of its client
// while it is open: past max_mcp_sessions_per_client another listen, or an
// initialize, is refused with 429 naming the limit; the place is freed
// when the stream ends.
func TestSessionlessListenCounted(t *testing.T) {
	t.Parallel()
	url, _, ep := limitedReplica(t, nil, SessionLimits{MaxSessionsPerClient: 1})
	v := sessionlessProtocolVersion
	listen := func(ctx context.Context) (*http.Response, error) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": methodListen,
			"params": newParams(v, "notifications", map[string]any{"toolsListChanged": true})})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", v)
		req.Header.Set("Mcp-Method", methodListen)
		req.Header.Set("X-Test-Client", "192.0.2.9")
		return http.DefaultClient.Do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if resp, err := listen(ctx); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	mcptest.WaitUntil(t, "the listen stream to be counted", func() bool { _, n := ep.sessions.live("192.0.2.9"); return n == 1 })

	resp, err := listen(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "max_mcp_sessions_per_client") {
		t.Errorf("a second listen: %d %s", resp.StatusCode, body)
	}
	if r := clientAt(t, url, "192.0.2.9").Call("initialize", initializeParams("x")); r.HTTPStatus != http.StatusTooManyRequests {
		t.Errorf("an initialize beside the listen: %+v", r)
	}
	if r := clientAt(t, url, "192.0.2.10").Call("initialize", initializeParams("x")); r.HTTPStatus != http.StatusOK {
		t.Errorf("another client's initialize: %+v", r)
	}

	cancel()
	mcptest.WaitUntil(t, "the listen stream's place to be freed", func() bool { _, n := ep.sessions.live("192.0.2.9"); return n == 0 })
}
