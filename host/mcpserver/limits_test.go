package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// limitedReplica serves get_user with the given session limits, its MCP
// sessions in st (a fresh embedded etcd when nil); a request comes from
// the address in its X-Test-Client header.
func limitedReplica(t *testing.T, st Store, lim SessionLimits) (string, *countingStore, *Endpoint) {
	t.Helper()
	if st == nil {
		_, st = storetest.Embedded(t)
	}
	up := mcptest.NewUsers(t)
	opts := testOptions("default")
	opts.SessionLimits = lim
	opts.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	cst := &countingStore{Store: st}
	ep.Attach(newTestHost(t, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil), cst)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	return srv.URL + "/mcp", cst, ep
}

func clientAt(t *testing.T, url, addr string) *mcptest.Client {
	return &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Test-Client": {addr}}}
}

func initializeParams(name string) map[string]any {
	return map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": name, "version": "1"}}
}

// A flood of sessions from one address, then from many, is refused before
// the SDK creates a session or the store is written — 429 naming the
// per-client limit, then 503 naming the endpoint's — while the session
// opened before it keeps being served; ending a session frees its place.
func TestSessionFlood(t *testing.T) {
	t.Parallel()
	url, st, ep := limitedReplica(t, nil, SessionLimits{MaxSessions: 7, MaxSessionsPerClient: 3})
	kept := clientAt(t, url, "192.0.2.1")
	kept.Initialize("2025-06-18")
	mcptest.WaitUntil(t, "the kept session's records", func() bool { return st.calls.Load() == 2 })

	var flood []*mcptest.Client
	open := func(addr string) mcptest.Reply {
		c := clientAt(t, url, addr)
		r := c.Call("initialize", initializeParams("flood"))
		if r.HTTPStatus == http.StatusOK && r.Error == nil {
			flood = append(flood, c)
		}
		return r
	}
	for i := range 3 {
		if r := open("192.0.2.2"); r.HTTPStatus != http.StatusOK || r.Error != nil {
			t.Fatalf("session %d of 192.0.2.2: %+v", i, r)
		}
	}
	writes := st.calls.Load()
	for range 20 {
		r := open("192.0.2.2")
		if r.HTTPStatus != http.StatusTooManyRequests || r.Error == nil || !strings.Contains(r.Error.Message, "max_mcp_sessions_per_client") ||
			!strings.Contains(r.Error.Message, "at most 3") {
			t.Fatalf("a 4th session of 192.0.2.2: %+v", r)
		}
	}
	// An IPv6 host's addresses are one client: its /64.
	for i, addr := range []string{"[2001:db8::1]:1", "[2001:db8::2]:2", "[2001:db8::3]:3"} {
		if r := open(addr); r.HTTPStatus != http.StatusOK {
			t.Fatalf("session %d of 2001:db8::/64: %+v", i, r)
		}
	}
	if r := open("[2001:db8::ffff]:4"); r.HTTPStatus != http.StatusTooManyRequests || !strings.Contains(r.Error.Message, "2001:db8::/64") {
		t.Fatalf("a 4th session of 2001:db8::/64: %+v", r)
	}
	// The endpoint's own limit: 1 + 3 + 3 sessions are all it holds.
	for i := range 20 {
		r := open(fmt.Sprintf("198.51.100.%d", i))
		if r.HTTPStatus != http.StatusServiceUnavailable || !strings.Contains(r.Error.Message, "max_mcp_sessions") {
			t.Fatalf("a session past the endpoint's limit: %+v", r)
		}
	}
	if st.calls.Load() != writes+3 { // the three IPv6 sessions' initialize records
		t.Errorf("refused sessions wrote to the store: %d calls, want %d", st.calls.Load(), writes+3)
	}
	if total, _ := ep.sessions.live(""); total != 7 {
		t.Errorf("%d sessions counted, want 7", total)
	}

	// The session opened before the flood is served throughout.
	var res mcptest.CallResult
	kept.OK("tools/call", map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}, &res)
	if res.IsError || !strings.Contains(res.Text(), "Ada Lovelace") {
		t.Fatalf("the kept session's call: %+v", res)
	}

	// Ending a session frees its place for its client.
	del, _ := http.NewRequest(http.MethodDelete, url, nil)
	del.Header.Set(sessionIDHeader, flood[0].Session)
	resp, err := http.DefaultClient.Do(del)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
	mcptest.WaitUntil(t, "the ended session's place", func() bool { _, n := ep.sessions.live("192.0.2.2"); return n == 2 })
	if r := open("192.0.2.2"); r.HTTPStatus != http.StatusOK {
		t.Fatalf("a session after one ended: %+v", r)
	}
}

// What a session keeps in its record is bounded: an initialize whose
// clientInfo and capabilities are over the limit is refused with a
// JSON-RPC error naming it, and nothing is recorded; a session keeps only
// what another replica needs to serve it.
func TestSessionStateBounded(t *testing.T) {
	t.Parallel()
	url, st, ep := limitedReplica(t, nil, SessionLimits{MaxStateBytes: 4 << 10})
	big := initializeParams("big")
	big["capabilities"] = map[string]any{"experimental": map[string]any{"x": strings.Repeat("a", 5<<10)}}
	c := clientAt(t, url, "192.0.2.9")
	r := c.Call("initialize", big)
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "max_mcp_session_state") ||
		!strings.Contains(r.Error.Message, "limit of 4096 bytes") {
		t.Fatalf("oversized initialize: %+v", r)
	}
	long := initializeParams(strings.Repeat("n", 5<<10))
	if r := clientAt(t, url, "192.0.2.9").Call("initialize", long); r.Error == nil || !strings.Contains(r.Error.Message, "max_mcp_session_state") {
		t.Fatalf("initialize with a long clientInfo.name: %+v", r)
	}
	if n := st.calls.Load(); n != 0 {
		t.Errorf("refused initializes made %d store calls", n)
	}
	mcptest.WaitUntil(t, "the refused sessions to close", func() bool { total, _ := ep.sessions.live(""); return total == 0 })

	// A session's record keeps what a replica needs, not _meta or icons.
	ok := initializeParams("ok")
	ok["_meta"] = map[string]any{"pad": strings.Repeat("m", 8<<10)}
	ok["clientInfo"].(map[string]any)["icons"] = []any{map[string]any{"src": "data:" + strings.Repeat("i", 8<<10)}}
	c = clientAt(t, url, "192.0.2.9")
	c.OK("initialize", ok, new(map[string]any))
	rec, err := st.GetMCPSession(context.Background(), c.Session)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.InitializeParams) > 200 || strings.Contains(string(rec.InitializeParams), "pad") ||
		!strings.Contains(string(rec.InitializeParams), `"name":"ok"`) || len(rec.ClientCapabilities) != 0 {
		t.Errorf("record keeps %s (capabilities %s)", rec.InitializeParams, rec.ClientCapabilities)
	}
	// A log level is one of the protocol's, not anything a client sends.
	c.Fails("logging/setLevel", map[string]any{"level": strings.Repeat("l", 1<<20)}, -32602, "not a logging level")
	var empty map[string]any
	c.OK("logging/setLevel", map[string]any{"level": "debug"}, &empty)
}

func TestSessionCounterAndClientKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.1:5000":               "192.0.2.1",
		"192.0.2.1":                    "192.0.2.1",
		"[::ffff:192.0.2.1]:80":        "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443":   "2001:db8:1:2::/64",
		"2001:db8:1:2::9":              "2001:db8:1:2::/64",
		"[fe80::1%eth0]:1":             "fe80::/64",
		"not-an-ip":                    "not-an-ip",
		strings.Repeat("h", 200) + ":": strings.Repeat("h", 64),
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
	c := &sessionCounter{max: 3, perClient: 2}
	a1, _ := c.acquire("a")
	if _, err := c.acquire("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.acquire("a"); err == nil || !strings.Contains(err.Error(), optMaxSessionsPerClient) {
		t.Fatalf("third of a: %v", err)
	}
	if _, err := c.acquire("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.acquire("c"); err == nil || !strings.Contains(err.Error(), optMaxSessions) {
		t.Fatalf("fourth in all: %v", err)
	}
	a1.release()
	a1.release() // once only
	if total, a := c.live("a"); total != 2 || a != 1 {
		t.Fatalf("after a release: %d in all, %d of a", total, a)
	}
	if l := (SessionLimits{}).withDefaults(); l.MaxSessions != DefaultMaxSessions || l.MaxSessionsPerClient != DefaultMaxSessionsPerClient ||
		l.MaxStateBytes != DefaultMaxSessionStateBytes {
		t.Errorf("defaults: %+v", l)
	}
	if l := (SessionLimits{MaxSessions: -1, MaxSessionsPerClient: -1}).withDefaults(); l.MaxSessions != 0 || l.MaxSessionsPerClient != 0 {
		t.Errorf("off: %+v", l)
	}
}
