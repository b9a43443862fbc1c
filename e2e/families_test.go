package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store/storetest"
)

// feedUpstream is a loopback upstream for session and job families: an
// endless SSE feed that reports when a reader leaves, and a slow job
// endpoint that reports when its request is cancelled.
type feedUpstream struct {
	*httptest.Server
	feedOpen     atomic.Int32
	feedSeen     atomic.Int32
	feedClosed   chan struct{}
	jobStarted   chan struct{}
	jobCancelled chan struct{}
}

func newFeedUpstream(t testing.TB) *feedUpstream {
	u := &feedUpstream{feedClosed: make(chan struct{}, 16), jobStarted: make(chan struct{}, 16), jobCancelled: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /feed", func(w http.ResponseWriter, r *http.Request) {
		u.feedOpen.Add(1)
		u.feedSeen.Add(1)
		defer func() { u.feedOpen.Add(-1); u.feedClosed <- struct{}{} }()
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 1; ; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"line\":\"event %d\"}\n\n", i, i, i)
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("GET /job", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("ms") + "ms")
		u.jobStarted <- struct{}{}
		select {
		case <-time.After(d):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"rows":%d}`, d.Milliseconds())
		case <-r.Context().Done():
			u.jobCancelled <- struct{}{}
		}
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

func familiesOps(base string) string {
	return fmt.Sprintf(`
operations:
  - name: follow
    description: Follow the feed.
    adapter: rest
    mode: session
    limits: {max_items: 50, idle_timeout_ms: 60000}
    config: {method: GET, url: "%[1]s/feed"}
  - name: brief
    description: Follow the feed briefly.
    adapter: rest
    mode: session
    # Idle 3s: on a loaded machine a start and the first poll after it
    # took more than 1s together, and the session had idled out.
    limits: {idle_timeout_ms: 3000, max_session_lifetime_ms: 6000}
    config: {method: GET, url: "%[1]s/feed"}
  - name: export
    description: A slow export.
    adapter: rest
    mode: async_job
    timeout: 2m
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%[1]s/job", query: [ms]}
`, base)
}

func callOK(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", tool, textOf(res))
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		t.Fatalf("%s: structured content %s: %v", tool, b, err)
	}
	return m
}

func TestStreamSessionFamilyGoSDK(t *testing.T) {
	t.Parallel()
	up := newFeedUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: familiesOps(up.URL), Handler: "agent_header X-Agent-Id"})
	ctx := context.Background()
	cs := g.connectAs(ctx, "agent-1")

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "brief_poll,brief_start,brief_stop,export_cancel,export_result,export_start,export_status,follow_poll,follow_start,follow_stop" {
		t.Fatalf("tools: %s", got)
	}

	id := callOK(t, cs, "follow_start", nil)["session_id"].(string)
	var first map[string]any
	waitFor(t, "items in the session", func() bool {
		first = callOK(t, cs, "follow_poll", map[string]any{"session_id": id, "max_items": 3})
		return len(first["items"].([]any)) == 3
	})
	// A repeated poll (same cursor: none) returns the same items.
	again := callOK(t, cs, "follow_poll", map[string]any{"session_id": id, "max_items": 3})
	if fmt.Sprint(again["items"]) != fmt.Sprint(first["items"]) {
		t.Errorf("repeated poll: %v, want %v", again["items"], first["items"])
	}
	var second map[string]any
	waitFor(t, "items after the first poll", func() bool {
		second = callOK(t, cs, "follow_poll", map[string]any{"session_id": id, "cursor": first["cursor"], "max_items": 3})
		return len(second["items"].([]any)) > 0
	})
	if n := second["items"].([]any)[0].(map[string]any)["n"]; n != float64(4) {
		t.Errorf("second poll starts at n=%v, want 4", n)
	}
	// A client disconnect does not stop the session: a new MCP session of
	// the same agent keeps polling it. A client that names no agent, with
	// the same clientInfo, reaches none of it.
	_ = cs.Close()
	anon := g.connect(ctx)
	if res, err := anon.CallTool(ctx, &mcp.CallToolParams{Name: "follow_poll", Arguments: map[string]any{"session_id": id}}); err != nil ||
		!res.IsError || !strings.Contains(textOf(res), "not found") {
		t.Errorf("poll by a client without the agent: %v %v", err, res)
	}
	cs2 := g.connectAs(ctx, "agent-1")
	waitFor(t, "items after reconnecting", func() bool {
		third := callOK(t, cs2, "follow_poll", map[string]any{"session_id": id, "cursor": second["cursor"]})
		return third["status"] == "active" && len(third["items"].([]any)) > 0
	})
	stop := callOK(t, cs2, "follow_stop", map[string]any{"session_id": id})
	if stop["status"] != "stopping" && stop["status"] != "stopped" {
		t.Errorf("stop: %v", stop)
	}
	select {
	case <-up.feedClosed:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream feed was not closed after stop")
	}
	waitFor(t, "the session to stop", func() bool {
		return callOK(t, cs2, "follow_poll", map[string]any{"session_id": id})["status"] == "stopped"
	})
	if !strings.Contains(g.log.String(), `"event":"session.stop"`) {
		t.Errorf("no audit record of the stop in the gateway log")
	}
}

func TestJobFamilyGoSDK(t *testing.T) {
	t.Parallel()
	up := newFeedUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: familiesOps(up.URL),
		Handler: "agent_header X-Agent-Id\n\t\tquotas {\n\t\t\tmax_jobs_per_agent 2\n\t\t}"})
	ctx := context.Background()
	cs := g.connectAs(ctx, "agent-1")

	// A job that finishes, followed from a second MCP session of the same
	// agent after the first disconnected.
	done := callOK(t, cs, "export_start", map[string]any{"ms": 2000})["job_id"].(string)
	// A job cancelled mid-run: the upstream sees its request cancelled.
	long := callOK(t, cs, "export_start", map[string]any{"ms": 600000})["job_id"].(string)
	// Quota: a third open job of this agent is refused, naming the quota.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "export_start", Arguments: map[string]any{"ms": 1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "max_jobs_per_agent") {
		t.Errorf("third job: %v %v", err, res)
	}
	_ = cs.Close()

	// A client that names no agent reaches none of the agent's jobs, and
	// the agent's quota is not its own.
	anon := g.connect(ctx)
	if res, err := anon.CallTool(ctx, &mcp.CallToolParams{Name: "export_cancel", Arguments: map[string]any{"job_id": long}}); err != nil ||
		!res.IsError || !strings.Contains(textOf(res), "not found") {
		t.Errorf("cancel by a client without the agent: %v %v", err, res)
	}
	if res, err := anon.CallTool(ctx, &mcp.CallToolParams{Name: "export_start", Arguments: map[string]any{"ms": 1}}); err != nil || res.IsError {
		t.Errorf("a job of a client without the agent: %v %v", err, res)
	}

	cs2 := g.connectAs(ctx, "agent-1")
	waitFor(t, "the job to finish", func() bool {
		return callOK(t, cs2, "export_status", map[string]any{"job_id": done})["status"] == "succeeded"
	})
	r := callOK(t, cs2, "export_result", map[string]any{"job_id": done})
	if r["ready"] != true || fmt.Sprint(r["result"]) != "map[rows:2000]" {
		t.Errorf("result: %v", r)
	}
	if r := callOK(t, cs2, "export_result", map[string]any{"job_id": long}); r["ready"] != false || r["status"] != "running" {
		t.Errorf("result of a running job: %v", r)
	}
	c := callOK(t, cs2, "export_cancel", map[string]any{"job_id": long})
	if c["status"] != "canceling" && c["status"] != "canceled" {
		t.Errorf("cancel: %v", c)
	}
	cancelled := 0
	for cancelled == 0 {
		select {
		case <-up.jobCancelled:
			cancelled++
		case <-time.After(20 * time.Second):
			t.Fatal("the upstream request was not cancelled")
		}
	}
	waitFor(t, "the job to be canceled", func() bool {
		return callOK(t, cs2, "export_status", map[string]any{"job_id": long})["status"] == "canceled"
	})
	res, err = cs2.CallTool(ctx, &mcp.CallToolParams{Name: "export_result", Arguments: map[string]any{"job_id": long}})
	if err != nil || !res.IsError {
		t.Errorf("result of a canceled job: %v %v", err, res)
	}
	// Unknown and malformed IDs are clear errors, not panics.
	res, err = cs2.CallTool(ctx, &mcp.CallToolParams{Name: "export_status", Arguments: map[string]any{"job_id": "job_nope"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), `job "job_nope" not found`) {
		t.Errorf("unknown job: %v %v", err, res)
	}
}

// TestFamiliesTypeScript drives a session and a job with the official
// TypeScript SDK, which checks every structured result against the tool's
// output schema.
func TestFamiliesTypeScript(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	up := newFeedUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: familiesOps(up.URL)})
	run := runTSCalls(t, g.MCPURL, `[
		{"op":"callTool","name":"follow_start"},
		{"op":"callTool","name":"follow_poll","arguments":{"session_id":"{{0.session_id}}","max_items":2},"until":{"field":"has_more","equals":true}},
		{"op":"callTool","name":"follow_poll","arguments":{"session_id":"{{0.session_id}}","cursor":"{{1.cursor}}","max_items":2}},
		{"op":"callTool","name":"follow_stop","arguments":{"session_id":"{{0.session_id}}"}},
		{"op":"callTool","name":"export_start","arguments":{"ms":200}},
		{"op":"callTool","name":"export_status","arguments":{"job_id":"{{4.job_id}}"},"until":{"field":"status","equals":"succeeded"}},
		{"op":"callTool","name":"export_result","arguments":{"job_id":"{{4.job_id}}"}}
	]`, 7)
	for i, s := range run.Steps {
		if !s.OK || s.Result.IsError {
			t.Fatalf("step %d failed: %s\n%+v", i, s.Error.Message, run)
		}
	}
	sc := func(i int) map[string]any { return run.Steps[i].Result.StructuredContent }
	if len(sc(1)["items"].([]any)) != 2 || sc(2)["items"].([]any)[0].(map[string]any)["n"] != float64(3) {
		t.Errorf("polls: %v / %v", sc(1), sc(2))
	}
	if sc(6)["ready"] != true || fmt.Sprint(sc(6)["result"]) != "map[rows:200]" {
		t.Errorf("result: %v", sc(6))
	}
}

// TestFamiliesDemo runs the demo's session and job tools (demo/families.yaml,
// served by `make run`) against the demo upstream: follow the log stream,
// and build a report through the upstream's ticket.
func TestFamiliesDemo(t *testing.T) {
	t.Parallel()
	addr := startDemoREST(t)
	ops, err := os.ReadFile(filepath.Join(repoRoot, "demo", "families.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{Operations: strings.ReplaceAll(string(ops), "127.0.0.1:8081", addr)})
	cs := g.connect(context.Background())

	id := callOK(t, cs, "follow_logs_start", map[string]any{"service": "checkout"})["session_id"].(string)
	waitFor(t, "log lines in the session", func() bool {
		items := callOK(t, cs, "follow_logs_poll", map[string]any{"session_id": id})["items"].([]any)
		for _, it := range items {
			line := it.(map[string]any)
			if line["service"] != "checkout" || strings.Contains(fmt.Sprint(line["user"]), "@") {
				t.Fatalf("unexpected or unredacted line: %v", line)
			}
		}
		return len(items) > 0
	})
	callOK(t, cs, "follow_logs_stop", map[string]any{"session_id": id})

	job := callOK(t, cs, "build_report_start", map[string]any{"service": "search"})["job_id"].(string)
	st := callOK(t, cs, "build_report_status", map[string]any{"job_id": job})
	if st["status"] != "running" {
		t.Errorf("status: %v", st)
	}
	var final map[string]any
	waitFor(t, "the report", func() bool {
		final = callOK(t, cs, "build_report_status", map[string]any{"job_id": job})
		return final["status"] == "succeeded"
	})
	// The upstream's last progress report ("running", 83%) describes the
	// job under way; the final status does not repeat it.
	if p, ok := final["progress"]; ok {
		t.Errorf("a succeeded job still reports progress %v", p)
	}
	r := callOK(t, cs, "build_report_result", map[string]any{"job_id": job})
	if rep, _ := r["result"].(map[string]any); rep == nil || rep["service"] != "search" || rep["requests"] == nil {
		t.Errorf("report: %v", r)
	}
}

// Two gateways share one etcd: a session started on A is polled and
// stopped on B (A's reader stops; B takes the cursor of a poll on A), a job started on A is cancelled on B (the
// upstream request on A ends), and when A is killed with SIGKILL, its
// running job is marked failed by B within the owner TTL.
func TestFamiliesAcrossReplicas(t *testing.T) {
	t.Parallel()
	up := newFeedUpstream(t)
	a, b, lb, cs := familyReplicas(t, familiesOps(up.URL))

	session := callOK(t, cs, "follow_start", nil)["session_id"].(string)
	long := callOK(t, cs, "export_start", map[string]any{"ms": 600000})["job_id"].(string)
	orphan := callOK(t, cs, "export_start", map[string]any{"ms": 600000})["job_id"].(string)
	<-up.jobStarted
	<-up.jobStarted

	// A poll's cursor from A is taken on B: the replicas seal cursors with
	// the key they share in etcd.
	var cursor any
	waitFor(t, "items polled on A", func() bool {
		p := callOK(t, cs, "follow_poll", map[string]any{"session_id": session})
		cursor = p["cursor"]
		return len(p["items"].([]any)) > 0
	})
	lb.to(b) // the same MCP session, now served by B
	waitFor(t, "A's items polled on B", func() bool {
		return len(callOK(t, cs, "follow_poll", map[string]any{"session_id": session, "cursor": cursor})["items"].([]any)) > 0
	})
	callOK(t, cs, "follow_stop", map[string]any{"session_id": session})
	select {
	case <-up.feedClosed:
	case <-time.After(20 * time.Second):
		t.Fatal("A's upstream feed was not closed by a stop on B")
	}
	callOK(t, cs, "export_cancel", map[string]any{"job_id": long})
	select {
	case <-up.jobCancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("A's upstream request was not cancelled by a cancel on B")
	}
	waitFor(t, "the job to be canceled", func() bool {
		return callOK(t, cs, "export_status", map[string]any{"job_id": long})["status"] == "canceled"
	})

	adapterPID := a.adapter("rest").PID
	_ = a.cmd.Process.Kill()
	waitFor(t, "A's adapter process to exit after A was killed", func() bool { return !processAlive(adapterPID, crankBin) })
	waitFor(t, "B to mark A's running job failed", func() bool {
		st := callOK(t, cs, "export_status", map[string]any{"job_id": orphan})
		return st["status"] == "failed" && strings.Contains(fmt.Sprint(st["error"]), "owner_lost")
	})
}

// familyReplicas starts two gateways a and b serving ops on one etcd, with an
// owner TTL of 2s (a killed replica's work is swept soon), and connects a
// client through a balancer that sends it to a.
func familyReplicas(t *testing.T, ops string) (a, b *gateway, lb *balancer, cs *mcp.ClientSession) {
	t.Helper()
	etcd := storetest.NewServer(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: ops, Crank: fmt.Sprintf(`etcd {
			%s
			owner_ttl 2s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b = startGateway(t, opts("a")), startGateway(t, opts("b"))
	lb = &balancer{}
	lb.to(a)
	return a, b, lb, connectThrough(t, context.Background(), lb)
}

// Sessions end by themselves: without polls after idle_timeout_ms (the
// session is gone and its upstream closed), and at max_session_lifetime_ms
// however often it is polled (it stays readable as stopped).
func TestStreamSessionExpiryGoSDK(t *testing.T) {
	t.Parallel()
	up := newFeedUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: familiesOps(up.URL)})
	cs := g.connect(context.Background())

	idle := callOK(t, cs, "brief_start", nil)["session_id"].(string)
	waitFor(t, "the feed to open", func() bool { return up.feedSeen.Load() == 1 })
	waitFor(t, "the idle session to close its feed", func() bool { return up.feedOpen.Load() == 0 })
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "brief_poll", Arguments: map[string]any{"session_id": idle}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "not found") {
		t.Errorf("poll of an idled-out session: %v %v", err, res)
	}

	life := callOK(t, cs, "brief_start", nil)["session_id"].(string)
	var end map[string]any
	waitFor(t, "the session to reach its lifetime", func() bool {
		end = callOK(t, cs, "brief_poll", map[string]any{"session_id": life})
		return end["status"] != "active"
	})
	if end["status"] != "stopped" || end["end_reason"] != "max_session_lifetime" {
		t.Errorf("end of life: %v", end)
	}
}
