package mcpserver

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// Requests without a session are budgeted per client: a client address
// gets max_sessionless_requests_per_client a second in bursts of twice as
// many, then 429 with Retry-After and a retryable error naming the limit;
// another address, and another authenticated user behind the same
// address, have budgets of their own; a session's requests are not
// counted; the budget refills with time. On by default.
func TestSessionlessRequestsPerClient(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	ep, url, _ := newTaskEndpoint(t, st, up.URL, func(o *Options) {
		o.SessionLimits.MaxSessionlessRequestsPerClient = 3
		o.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
		o.AuthenticatedUser = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
	})
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	ep.sessionless.now = func() time.Time { return time.Unix(0, now.Load()) }

	list := func(client, user string) rawReply {
		t.Helper()
		return rawPost(t, url, map[string]string{"MCP-Protocol-Version": sessionlessProtocolVersion, "Mcp-Method": "tools/list",
			"X-Test-Client": client, "X-Test-User": user},
			map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": newParams(sessionlessProtocolVersion)})
	}
	served := func(what string, r rawReply) {
		t.Helper()
		if r.status != http.StatusOK || r.err != nil {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
	}
	refused := func(what string, r rawReply) {
		t.Helper()
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.err == nil ||
			!strings.Contains(r.err.Message, "max_sessionless_requests_per_client") || !strings.Contains(r.body, `"retryable":true`) {
			t.Fatalf("%s: %d %s, want 429 naming max_sessionless_requests_per_client", what, r.status, r.body)
		}
	}

	for range 6 {
		served("request in the burst", list("10.0.0.1", ""))
	}
	refused("request past the burst", list("10.0.0.1", ""))
	served("another address", list("10.0.0.2", ""))
	served("a user behind the same address", list("10.0.0.1", "alice"))

	// A session's requests are bounded by the sessions a client holds,
	// not by this budget.
	c := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Test-Client": {"10.0.0.1"}}}
	c.Initialize("2025-11-25")
	if r := c.Call("tools/list", map[string]any{}); r.HTTPStatus != http.StatusOK || r.Error != nil {
		t.Fatalf("a session's request from a client past its budget: %d %s", r.HTTPStatus, r.Body)
	}

	now.Add(int64(time.Second))
	for range 3 {
		served("request after a second", list("10.0.0.1", ""))
	}
	refused("request past the refill", list("10.0.0.1", ""))
}

// The default is on.
func TestSessionlessRequestsDefault(t *testing.T) {
	if got := (SessionLimits{}).withDefaults().MaxSessionlessRequestsPerClient; got != DefaultMaxSessionlessRequestsPerClient || got <= 0 {
		t.Errorf("default sessionless request budget %d", got)
	}
	if got := (SessionLimits{MaxSessionlessRequestsPerClient: -1}).withDefaults().MaxSessionlessRequestsPerClient; got != 0 {
		t.Errorf("off: %d, want 0 (no limit)", got)
	}
}
