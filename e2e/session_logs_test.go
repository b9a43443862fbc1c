package e2e

import (
	"context"
	"crypto/rand"
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
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// An Mcp-Session-Id is its client's credential: no log line of a gateway
// (its own, its adapters', at debug level) and no live-state list carries
// one, on any path that names a session — a result too large for the
// event log, a resume and a session restored on another replica, a
// session ended elsewhere by an operator, an unknown session, and a
// session not recorded, not deleted or not found while etcd is down. Each
// path is seen in the logs (by the session's digest), and then every line
// of both replicas' logs is searched for every session ID the test used.
func TestSessionIDsNeverLoggedOrListed(t *testing.T) {
	t.Parallel()
	// Slow too: an answer that leaves in its stream's first write (the
	// priming event's held flush) is never stored, too large or not.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"blob": strings.Repeat("x", 64<<10)})
	}))
	t.Cleanup(big.Close)
	// A call that outlives its stream's first write, so that its events
	// are stored and its stream can be resumed on another replica.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"name": "User 2"})
	}))
	t.Cleanup(slow.Close)
	ops := opsFile(t, newUpstream(t), "2s", fmt.Sprintf(`  - name: big
    description: A result larger than the event log keeps.
    adapter: rest
    config: {method: GET, url: "%s/big"}
  - name: slow_user
    description: A user, answered after a while.
    adapter: rest
    config: {method: GET, url: "%s/user"}
`, big.URL, slow.URL))
	etcd := storetest.NewServer(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: ops, Global: "debug",
			Handler: "session_timeout 20s\nevent_max_bytes 4KiB",
			Crank: fmt.Sprintf(`etcd {
			%s
			op_timeout 2s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var ids []string // every Mcp-Session-Id the test saw or sent
	// logged reports whether g logged msg about the session, naming it by
	// its digest (or by its ID, which the search at the end reports).
	logged := func(g *gateway, msg, id string) bool {
		for _, line := range strings.Split(g.log.String(), "\n") {
			if strings.Contains(line, msg) && (strings.Contains(line, store.MCPSessionDigest(id)) || strings.Contains(line, id)) {
				return true
			}
		}
		return false
	}
	waitLogged := func(g *gateway, msg, id string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%q naming the session", msg), func() bool { return logged(g, msg, id) })
	}

	// A go-sdk session on A gets a result over event_max_bytes: delivered,
	// not stored.
	lb := &balancer{}
	lb.to(a)
	cs := connectThrough(t, ctx, lb)
	ids = append(ids, cs.ID())
	if _, err := getUser(ctx, cs, 1); err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big"}); err != nil || res.IsError {
		t.Fatalf("big: %v %+v", err, res)
	}
	waitLogged(a, "SSE events not stored", cs.ID())

	// A raw session on A resumes its stream on B, which restores the
	// session from the store.
	rc := &mcptest.Client{T: t, URL: a.MCPURL}
	rc.Initialize("2025-11-25")
	ids = append(ids, rc.Session)
	resp, _, err := rc.Request(ctx, "tools/call", map[string]any{"name": "slow_user", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	prime, ok := newSSEReader(resp.Body).next()
	resp.Body.Close()
	if !ok || prime.ID == "" {
		t.Fatalf("priming event %+v", prime)
	}
	onB := &rawMCP{t: t, url: b.MCPURL, version: rc.Version, session: rc.Session}
	waitFor(t, "the resumed stream on B", func() bool {
		code, body := onB.status(http.MethodGet, "", map[string]string{"Last-Event-ID": prime.ID, "Content-Type": ""})
		return code == http.StatusOK && strings.Contains(body, "User 2")
	})
	waitLogged(b, "MCP session restored from the store", rc.Session)

	// The operator lists the sessions (on B) and ends A's go-sdk session
	// by the digest the list shows; A notices at the session's next use.
	list := func() string {
		resp, err := http.Get(b.AdminURL + "/crank/live/default/mcp-sessions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %s %s", resp.Status, body)
		}
		return string(body)
	}
	digest := store.MCPSessionDigest(cs.ID())
	body := list()
	var page struct {
		Entries []map[string]any `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || !slices.ContainsFunc(page.Entries, func(e map[string]any) bool { return e["id"] == digest }) {
		t.Fatalf("the list does not name the session by its digest %s: %s", digest, body)
	}
	for _, id := range ids {
		if strings.Contains(body, id) {
			t.Fatalf("the list carries the session ID %s: %s", id, body)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, b.AdminURL+"/crank/live/default/mcp-sessions/"+digest, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stop by digest: %v %v", resp, err)
	}
	waitFor(t, "A to end the session the operator stopped", func() bool {
		_, _ = getUser(ctx, cs, 3) // a use makes A touch the record
		return logged(a, "MCP session ended elsewhere", cs.ID())
	})

	// An unknown session is refused.
	unknown := rand.Text()
	ids = append(ids, unknown)
	if code, _ := (&rawMCP{t: t, url: a.MCPURL, version: "2025-11-25", session: unknown}).status(http.MethodPost,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); code != http.StatusNotFound {
		t.Fatalf("unknown session: %d", code)
	}

	// While etcd is down: a new session on A is not recorded, B cannot
	// look it up, and its end on A is not deleted from the store.
	etcd.Stop()
	down := &mcptest.Client{T: t, URL: a.MCPURL}
	down.Initialize("2025-11-25")
	ids = append(ids, down.Session)
	waitLogged(a, "MCP session not recorded in the store", down.Session)
	if code, body := (&rawMCP{t: t, url: b.MCPURL, version: down.Version, session: down.Session}).status(http.MethodPost,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("B during the outage: %d %s", code, body)
	}
	waitLogged(b, "MCP session lookup in the store failed", down.Session)
	if code, body := (&rawMCP{t: t, url: a.MCPURL, version: down.Version, session: down.Session}).status(http.MethodDelete, "", nil); code/100 != 2 {
		t.Fatalf("DELETE on A during the outage: %d %s", code, body)
	}
	waitLogged(a, "ended MCP session not deleted from the store", down.Session)
	etcd.Start()

	for name, g := range map[string]*gateway{"A": a, "B": b} {
		for i, line := range strings.Split(g.log.String(), "\n") {
			for _, id := range ids {
				if strings.Contains(line, id) {
					t.Errorf("line %d of %s's log carries the session ID %s: %s", i+1, name, id, line)
				}
			}
		}
	}
}
