package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/internal/telemetry"
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
	ep.sessionless.SetClock(func() time.Time { return time.Unix(0, now.Load()) })

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

// A limit on a tool refuses a caller's calls past its budget with a
// JSON-RPC error of code 429 whose data names the limit and the seconds
// to wait, as the go-sdk client surfaces it: in a 2025-11-25 session and
// without one (2026-07-28), on the hot path and the SDK's, through
// call_tool too. Each agent has its own bucket; another tool is not
// limited; the refusal is counted and written to the access log with the
// limit's name; nothing reaches the upstream.
func TestToolCallRateLimit(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	core, access := observer.New(zapcore.InfoLevel)
	ops := fmt.Sprintf(mcptest.UsersOps, up.URL) + fmt.Sprintf(`  - name: get_user_again
    description: The same.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}}
    config: {method: GET, url: "%s/users/{id}"}
`, up.URL)
	hst := newTestHostOf(t, "rest", ops, nil, nil, func(o *host.Options) { o.Logger = zap.New(core) })
	opts := testOptions("default")
	opts.RateLimits = []ratelimit.Limit{{Name: "users_per_agent", Rate: "2/h", Per: ratelimit.PerAgent, Tool: "get_user"}}
	opts.View = &ViewConfig{Discovery: DiscoveryBeside}
	reg := prometheus.NewRegistry()
	if err := telemetry.Register(reg); err != nil {
		t.Fatal(err)
	}
	ep, url := serveEndpoint(t, hst, st, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(agent string, session bool) *mcp.ClientSession {
		t.Helper()
		var o *mcp.ClientSessionOptions
		if session {
			o = sessionProtocol
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "limit-test", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: agentTransport(agent)}}, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	refused := func(what string, err error) {
		t.Helper()
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != ratelimit.CodeRateLimited {
			t.Fatalf("%s: %v, want a JSON-RPC error of code 429", what, err)
		}
		var data struct {
			Limit      string `json:"limit"`
			Scope      string `json:"scope"`
			RetryAfter int    `json:"retryAfterSeconds"`
		}
		if json.Unmarshal(werr.Data, &data) != nil || data.Limit != "users_per_agent" || data.Scope != "tool" ||
			data.RetryAfter < 1700 || data.RetryAfter > 1800 || !strings.Contains(werr.Message, "rate limit users_per_agent reached: at most 2 calls an hour per agent, for tool get_user") {
			t.Fatalf("%s: %s %s", what, werr.Message, werr.Data)
		}
	}
	requests := func() int { p, _ := up.Requests(); return len(p) }
	before := requests()
	for _, c := range []struct {
		agent   string
		session bool
		sdk     bool
	}{{"a", true, false}, {"b", false, false}, {"c", true, true}, {"d", false, true}} {
		ep.noHotPath.Store(c.sdk)
		cs := connect(c.agent, c.session)
		hot := ep.hotCalls.Load()
		for range 2 {
			if _, err := callGetUser(ctx, cs); err != nil {
				t.Fatalf("agent %s: a call within the budget: %v", c.agent, err)
			}
		}
		_, err := callGetUser(ctx, cs)
		refused(fmt.Sprintf("agent %s (session %v, sdk %v)", c.agent, c.session, c.sdk), err)
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}})
		refused("call_tool", err)
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user_again", Arguments: map[string]any{"id": 7}}); err != nil || res.IsError {
			t.Fatalf("agent %s: another tool: %v %v", c.agent, res, err)
		}
		if served := ep.hotCalls.Load() - hot; c.sdk && served != 0 || !c.sdk && served < 3 {
			t.Errorf("agent %s: the hot path served %d calls", c.agent, served)
		}
	}
	if n := requests() - before; n != 4*3 {
		t.Errorf("the upstream saw %d requests, want 12: refused calls reached it", n)
	}
	logged := access.FilterField(zap.String("limit", "users_per_agent")).FilterField(zap.String("outcome", host.OutcomeRateLimited)).Len()
	if logged != 8 {
		t.Errorf("%d access records of refused calls, want 8", logged)
	}
	if got := metricValue(t, reg, "crank_rate_limited_total", map[string]string{"limit": "users_per_agent", "scope": "tool"}); got < 8 {
		t.Errorf("crank_rate_limited_total = %v, want at least 8", got)
	}
	if st := ep.RateLimits(); len(st) != 1 || st[0].Refused != 8 || st[0].Admitted != 8 || st[0].Keys != 4 {
		t.Errorf("state %+v", st)
	}
}

// metricValue is the value of the series of name with labels in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The job lock of the security review: one anonymous client, a new agent
// in every MCP session, fills its own budget of finished jobs kept and
// its next start is refused, naming the per-client quota and when room
// frees; another client's start in the same workspace is not refused.
func TestClientJobBudget(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	hst := newTestHostOf(t, "rest", fmt.Sprintf(tasksOps, up.URL), st, nil, func(o *host.Options) {
		o.Quotas = host.Quotas{JobsPerWorkspace: 100, RetainedJobsPerWorkspace: 100, RetainedJobsPerClient: 2, JobsPerClient: 5}
	})
	opts := testOptions("default")
	opts.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	_, url := serveEndpoint(t, hst, st, opts)
	start := func(address string) startAnswer {
		t.Helper()
		c := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Test-Client": {address}}}
		c.Initialize("2025-11-25") // a new session: a new agent
		r := c.Call("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1000}})
		var res struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				JobID string `json:"job_id"`
			} `json:"structuredContent"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
			t.Fatalf("report_start: %d %s", r.HTTPStatus, r.Body)
		}
		out := startAnswer{isError: res.IsError, job: res.StructuredContent.JobID}
		if len(res.Content) > 0 {
			out.text = res.Content[0].Text
		}
		if !res.IsError {
			mcptest.WaitUntil(t, "the job finishes", func() bool {
				s := c.Call("tools/call", map[string]any{"name": "report_status", "arguments": map[string]any{"job_id": out.job}})
				return strings.Contains(string(s.Result), `"succeeded"`)
			})
		}
		return out
	}
	for i := range 2 {
		if r := start("10.0.0.1"); r.isError {
			t.Fatalf("start %d of the first client: %s", i, r.text)
		}
	}
	r := start("10.0.0.1")
	if !r.isError || !strings.Contains(r.text, `quota max_retained_jobs_per_client exceeded: client "addr:10.0.0.1" of workspace "default" keeps 2 finished jobs (limit 2)`) ||
		!strings.Contains(r.text, "there is room again when the oldest of them expires, at ") {
		t.Fatalf("the first client past its budget: %+v", r)
	}
	if r := start("10.0.0.2"); r.isError {
		t.Fatalf("another client's start was refused: %s", r.text)
	}
}

// startAnswer is a start's answer: an error's text, or the job started.
type startAnswer struct {
	isError   bool
	text, job string
}
