package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// countingStore is a real store that counts the MCP session calls made
// through it (calls) and the event-log writes (writes: each stream's run
// of events an append stores, each stream deleted).
type countingStore struct {
	Store
	calls, writes atomic.Int64
}

func (c *countingStore) AppendStreams(ctx context.Context, streams []store.StreamEvents, lim store.EventLimits) []error {
	c.writes.Add(int64(len(streams)))
	return c.Store.AppendStreams(ctx, streams, lim)
}

func (c *countingStore) DeleteEventStream(ctx context.Context, session, stream string) error {
	c.writes.Add(1)
	return c.Store.DeleteEventStream(ctx, session, stream)
}

func (c *countingStore) PutMCPSession(ctx context.Context, s store.MCPSession) error {
	c.calls.Add(1)
	return c.Store.PutMCPSession(ctx, s)
}

func (c *countingStore) GetMCPSession(ctx context.Context, id string) (*store.MCPSession, error) {
	c.calls.Add(1)
	return c.Store.GetMCPSession(ctx, id)
}

func (c *countingStore) TouchMCPSession(ctx context.Context, id string) error {
	c.calls.Add(1)
	return c.Store.TouchMCPSession(ctx, id)
}

func (c *countingStore) DeleteMCPSession(ctx context.Context, id string) error {
	c.calls.Add(1)
	return c.Store.DeleteMCPSession(ctx, id)
}

// replica is one MCP endpoint with its own adapter process, as a Crank
// replica has, served on a loopback port.
type replica struct {
	ep  *Endpoint
	st  *countingStore
	URL string
}

// newReplica serves a REST operation against the API at upURL, keeping
// MCP sessions in st.
func newReplica(t testing.TB, st Store, upURL string, workspace string) *replica {
	t.Helper()
	hst := newTestHost(t, fmt.Sprintf(mcptest.UsersOps, upURL), nil, nil)
	ep, err := New(testOptions(workspace))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{ep: ep, st: &countingStore{Store: st}}
	ep.Attach(hst, r.st)
	srv := httptest.NewServer(http.HandlerFunc(ep.serveMCP))
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	r.URL = srv.URL + "/mcp"
	return r
}

// router sends a client's requests to whichever replica is current, as a
// load balancer without affinity would.
type router struct {
	mu     sync.Mutex
	target string
	agent  string
}

func (rt *router) to(r *replica) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.target = r.URL
}

func (rt *router) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	u, _ := url.Parse(rt.target)
	agent := rt.agent
	rt.mu.Unlock()
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = u.Host, u.Host
	if agent != "" {
		req.Header.Set("X-Agent", agent)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// connectVia opens a session through rt (the session protocol: left to
// itself, a go-sdk client speaks the sessionless one).
func connectVia(t *testing.T, ctx context.Context, rt *router) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "replica-test", Title: "Replica test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://router/mcp", HTTPClient: &http.Client{Transport: rt},
	}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callGetUser(ctx context.Context, cs *mcp.ClientSession) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("tool error: %+v", res)
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// An MCP session initialized on replica A is served by replica B, which has
// never seen it, from its record in the shared store; the record holds the
// negotiated version and what B needs of the client's initialize params.
func TestReplicaServesSessionOfAnother(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	a, b := newReplica(t, st, up.URL, "default"), newReplica(t, st, up.URL, "default")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rt := &router{agent: "agent-1"}
	rt.to(a)
	cs := connectVia(t, ctx, rt)
	if _, err := callGetUser(ctx, cs); err != nil {
		t.Fatalf("call on A: %v", err)
	}
	mcptest.WaitUntil(t, "the initialized flag in the record", func() bool {
		rec, err := st.GetMCPSession(ctx, cs.ID())
		return err == nil && rec.Initialized
	})
	rec, err := st.GetMCPSession(ctx, cs.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.ProtocolVersion != cs.InitializeResult().ProtocolVersion || rec.ClientName != "replica-test" ||
		rec.ClientTitle != "Replica test" || rec.WorkspaceID != "default" || rec.AgentID != "header:agent-1" ||
		!strings.Contains(string(rec.InitializeParams), `"capabilities":{"roots":{"listChanged":true}}`) {
		t.Fatalf("record = %+v", rec)
	}

	rt.to(b)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list on B: %v", err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "get_user" {
		t.Fatalf("tools on B: %+v", tools.Tools)
	}
	if got, err := callGetUser(ctx, cs); err != nil || !strings.Contains(got, "Ada Lovelace") {
		t.Fatalf("call on B: %q, %v", got, err)
	}
	if ls := b.ep.replicas.get(cs.ID()); ls == nil || ls.transport == nil {
		t.Fatal("B does not hold the restored session")
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping on B: %v", err)
	}
	// Back on A, which still holds it.
	rt.to(a)
	if _, err := callGetUser(ctx, cs); err != nil {
		t.Fatalf("call back on A: %v", err)
	}
}

// Serving a session a replica holds costs no store call: the record is
// written at initialize and notifications/initialized, and only read by a
// replica that does not hold the session.
func TestHeldSessionNeedsNoStore(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	a, b := newReplica(t, st, up.URL, "default"), newReplica(t, st, up.URL, "default")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := &router{}
	rt.to(a)
	cs := connectVia(t, ctx, rt)
	mcptest.WaitUntil(t, "the initialized record", func() bool { return a.st.calls.Load() == 2 })
	for range 20 {
		if _, err := callGetUser(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := a.st.calls.Load(); n != 2 {
		t.Fatalf("A made %d store calls, want 2 (initialize, initialized)", n)
	}
	rt.to(b)
	for range 20 {
		if _, err := callGetUser(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.st.calls.Load(); n != 1 {
		t.Fatalf("B made %d store calls, want 1 (the lookup)", n)
	}
}

// rawSession drives the Streamable HTTP wire by hand.
type rawSession struct {
	t     testing.TB
	id    string
	agent string
}

func (s *rawSession) post(url, body string) (*http.Response, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set(sessionIDHeader, s.id)
	}
	if s.agent != "" {
		req.Header.Set("X-Agent", s.agent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return resp, d
			}
		}
		return resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (s *rawSession) do(method, url string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set(sessionIDHeader, s.id)
	req.Header.Set("Accept", "text/event-stream")
	if s.agent != "" {
		req.Header.Set("X-Agent", s.agent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (s *rawSession) initialize(url, version string) string {
	s.t.Helper()
	resp, body := s.post(url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	s.id = resp.Header.Get(sessionIDHeader)
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		s.t.Fatalf("initialize: %v: %s", err, body)
	}
	if resp, body := s.post(url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("initialized: %s %s", resp.Status, body)
	}
	return res.Result.ProtocolVersion
}

const toolsList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// The record keeps the version the server negotiated, not the one the
// client asked for; a session is refused (404, as an unknown one) to
// another agent or workspace; DELETE on any replica ends it everywhere.
func TestReplicaSessionScopeAndDelete(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	a, b := newReplica(t, st, up.URL, "default"), newReplica(t, st, up.URL, "default")
	other := newReplica(t, st, up.URL, "other-workspace")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s := &rawSession{t: t, agent: "alice"}
	negotiated := s.initialize(a.URL, "2099-01-01")
	if negotiated == "" || negotiated == "2099-01-01" {
		t.Fatalf("negotiated %q", negotiated)
	}
	mcptest.WaitUntil(t, "the initialized record", func() bool {
		rec, err := st.GetMCPSession(ctx, s.id)
		return err == nil && rec.Initialized
	})
	if rec, _ := st.GetMCPSession(ctx, s.id); rec.ProtocolVersion != negotiated || rec.AgentID != "header:alice" {
		t.Fatalf("record = %+v, want version %s for alice", rec, negotiated)
	}

	mallory := &rawSession{t: t, id: s.id, agent: "mallory"}
	for _, r := range []*replica{a, b} {
		if resp, body := mallory.post(r.URL, toolsList); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another agent got %s: %s", resp.Status, body)
		}
	}
	if resp, body := s.post(other.URL, toolsList); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another workspace got %s: %s", resp.Status, body)
	}
	if resp, body := s.post(b.URL, toolsList); resp.StatusCode != http.StatusOK || !strings.Contains(body, "get_user") {
		t.Fatalf("tools/list on B: %s %s", resp.Status, body)
	}

	// DELETE on B ends the session: its record goes, A ends its copy at
	// its next touch, and a replica that never held it answers 404.
	if resp := s.do(http.MethodDelete, b.URL); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE on B: %s", resp.Status)
	}
	if _, err := st.GetMCPSession(ctx, s.id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after DELETE: %v", err)
	}
	held := a.ep.replicas.get(s.id)
	if held == nil {
		t.Fatal("A does not hold the session it created")
	}
	held.lastTouch.Store(0) // as if the last touch were a session timeout / 10 ago
	mcptest.WaitUntil(t, "A to end its copy", func() bool {
		resp, _ := s.post(a.URL, toolsList)
		return resp.StatusCode == http.StatusNotFound
	})
	c := newReplica(t, st, up.URL, "default")
	if resp, body := s.post(c.URL, toolsList); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("deleted session on C: %s %s", resp.Status, body)
	}

	// DELETE of a session held nowhere but recorded.
	s2 := &rawSession{t: t}
	s2.initialize(a.URL, "2025-06-18")
	mcptest.WaitUntil(t, "the second record", func() bool {
		rec, err := st.GetMCPSession(ctx, s2.id)
		return err == nil && rec.Initialized
	})
	if resp := s2.do(http.MethodDelete, c.URL); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE on C: %s", resp.Status)
	}
	if _, err := st.GetMCPSession(ctx, s2.id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after DELETE on C: %v", err)
	}
	if resp := s2.do(http.MethodDelete, c.URL); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("second DELETE: %s", resp.Status)
	}
}

// While etcd is down, a replica keeps serving the sessions it holds (tool
// calls need no state); a session it does not hold is refused with a
// retryable 503 naming the store, and served once etcd is back.
func TestReplicaDuringEtcdOutage(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	open := func() *store.Etcd {
		st, err := store.NewEtcd(context.Background(), store.EtcdConfig{Endpoints: srv.Endpoints(), TLS: srv.TLS(), OpTimeout: 2 * time.Second, DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	up := mcptest.NewUsers(t)
	a, b := newReplica(t, open(), up.URL, "default"), newReplica(t, open(), up.URL, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := &router{}
	rt.to(a)
	cs := connectVia(t, ctx, rt)
	mcptest.WaitUntil(t, "the initialized record", func() bool { return a.st.calls.Load() == 2 })

	srv.Stop()
	for range 5 {
		if _, err := callGetUser(ctx, cs); err != nil {
			t.Fatalf("call on A during the outage: %v", err)
		}
	}
	raw := &rawSession{t: t, id: cs.ID()}
	resp, body := raw.post(b.URL, toolsList)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "etcd") || !strings.Contains(body, `"retryable":true`) {
		t.Fatalf("lookup on B during the outage: %s %s", resp.Status, body)
	}

	srv.Start()
	// The store's client reconnects with a backoff: give it a while.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, body := raw.post(b.URL, toolsList)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not serve the session after the outage: %s %s", resp.Status, body)
		}
	}
	rt.to(b)
	if _, err := callGetUser(ctx, cs); err != nil {
		t.Fatalf("call on B after the outage: %v", err)
	}
}

// BenchmarkReplicaSessionLookup compares a request (tools/list) in a
// session the replica holds with the same request on a replica that must
// first rebuild the session from its record in etcd (one get and an
// in-memory connect). The ratio restored/held is the cost of moving.
func BenchmarkReplicaSessionLookup(b *testing.B) {
	_, st := storetest.Embedded(b)
	const noUpstream = "http://127.0.0.1:1" // tools/list calls no upstream
	a, c := newReplica(b, st, noUpstream, "default"), newReplica(b, st, noUpstream, "default")
	s := &rawSession{t: b}
	s.initialize(a.URL, "2025-06-18")
	ctx := context.Background()
	for {
		if rec, err := st.GetMCPSession(ctx, s.id); err == nil && rec.Initialized {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.ResetTimer()
	measure := func(n int, req func()) time.Duration {
		start := time.Now()
		for range n {
			req()
		}
		return time.Since(start) / time.Duration(n)
	}
	held := measure(b.N, func() {
		if resp, body := s.post(a.URL, toolsList); resp.StatusCode != http.StatusOK {
			b.Fatalf("held: %s %s", resp.Status, body)
		}
	})
	restored := measure(b.N, func() {
		if ls := c.ep.replicas.get(s.id); ls != nil {
			ls.close() // C forgets the session: the next request restores it
		}
		if resp, body := s.post(c.URL, toolsList); resp.StatusCode != http.StatusOK {
			b.Fatalf("restored: %s %s", resp.Status, body)
		}
	})
	b.ReportMetric(float64(held.Microseconds()), "held-us/op")
	b.ReportMetric(float64(restored.Microseconds()), "restored-us/op")
	b.ReportMetric(float64(restored)/float64(held), "restored/held")
}
