package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one scrape of the admin endpoint's /metrics.
type scrape map[string]*dto.MetricFamily

func (g *gateway) scrape() scrape {
	g.t.Helper()
	s, err := scrapeURL(g.AdminURL + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	return s
}

// scrapeURL reads and parses the Prometheus text at url (a gateway's
// admin /metrics, an etcd member's /metrics).
func scrapeURL(url string) (scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %v", url, err)
	}
	return fams, nil
}

// value is the value of the series of name whose labels include labels
// ("k=v" pairs), summed over the series that match; for a histogram, its
// sample count. ok is false when no series matches.
func (s scrape) value(name string, labels ...string) (v float64, ok bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, want, _ := strings.Cut(kv, "=")
			if have[k] != want {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v, ok
}

func (s scrape) get(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		var names []string
		for n := range s {
			if strings.HasPrefix(n, "crank_") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		t.Fatalf("no series %s%v in the scrape (crank metrics: %v)", name, labels, names)
	}
	return v
}

// metricsOps is every kind of tool: unary REST tools (ok, each failure
// class), a window, a stream session and an async job.
func metricsOps(up *upstream, feed *feedUpstream, stream string) string {
	extra := fmt.Sprintf(`  - name: logs_window
    description: A window over a log stream.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, max_items: 6}
    config: {method: GET, url: "%[1]s/logs"}
  - name: follow
    description: Follow the feed.
    adapter: rest
    mode: session
    limits: {max_items: 50, idle_timeout_ms: 60000}
    config: {method: GET, url: "%[2]s/feed"}
  - name: export
    description: A slow export.
    adapter: rest
    mode: async_job
    timeout: 2m
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%[2]s/job", query: [ms]}
`, stream, feed.URL)
	return opsFile(nil, up, "500ms", extra)
}

// Calls of every kind move exactly the series they should, on the admin
// endpoint's /metrics of the built binary; a reload neither resets nor
// duplicates them.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	up, feed, stream := newUpstream(t), newFeedUpstream(t), streamUpstream(t)
	opts := gatewayOptions{Operations: metricsOps(up, feed, stream.URL),
		Handler: "agent_header X-Agent-Id\n\t\tquotas {\n\t\t\tmax_jobs_per_agent 1\n\t\t}"}
	g := startGateway(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	before := g.scrape()
	// Registered at load, before any call: the closed label sets at 0.
	if v := before.get(t, "crank_quota_refusals_total", "quota=max_jobs_per_agent"); v != 0 {
		t.Errorf("quota refusals before any call: %v", v)
	}

	cs := g.connectAs(ctx, "agent-1")
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	call("get_user", map[string]any{"id": 1})
	call("get_user", map[string]any{"id": 2})
	call("get_user", map[string]any{"id": "seven"}) // invalid_arguments
	call("get_user", map[string]any{"id": 404})     // upstream_status
	call("down", nil)                               // upstream_unreachable
	call("slow", nil)                               // timeout
	if res := call("logs_window", nil); res.IsError {
		t.Fatalf("window: %s", textOf(res))
	}
	sid := callOK(t, cs, "follow_start", nil)["session_id"].(string)
	callOK(t, cs, "follow_poll", map[string]any{"session_id": sid})
	callOK(t, cs, "follow_stop", map[string]any{"session_id": sid})
	job := callOK(t, cs, "export_start", map[string]any{"ms": 600000})["job_id"].(string)
	if res := call("export_start", map[string]any{"ms": 1}); !res.IsError { // quota
		t.Fatalf("second job not refused: %s", textOf(res))
	}
	callOK(t, cs, "export_cancel", map[string]any{"job_id": job})

	// An adapter kill: found gone by the next call, which restarts it.
	pid := g.adapter("rest").PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the adapter to be seen dead", func() bool { return !g.adapter("rest").Running })
	if res := call("get_user", map[string]any{"id": 3}); res.IsError {
		t.Fatalf("call after the kill: %s", textOf(res))
	}
	drain := func() {
		for len(up.slowStarted) > 0 {
			<-up.slowStarted
		}
	}
	// A call the client cancels.
	drain()
	cctx, ccancel := context.WithCancel(ctx)
	go func() { <-up.slowStarted; ccancel() }()
	if _, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "slow"}); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	// The adapter killed during a call.
	waitFor(t, "the cancelled call to end", func() bool {
		v, _ := g.scrape().value("crank_tool_calls_total", "tool=slow", "outcome=cancelled")
		return v == 1
	})
	drain()
	pid = g.adapter("rest").PID
	go func() { <-up.slowStarted; _ = syscall.Kill(pid, syscall.SIGKILL) }()
	if res := call("slow", nil); !res.IsError {
		t.Fatal("the call of a killed adapter succeeded")
	}
	waitFor(t, "the adapter to be seen dead", func() bool { return !g.adapter("rest").Running })
	if res := call("get_user", map[string]any{"id": 5}); res.IsError {
		t.Fatalf("call after the second kill: %s", textOf(res))
	}
	waitFor(t, "the session to end", func() bool {
		v, _ := g.scrape().value("crank_stream_sessions_ended_total", "operation=follow", "status=stopped")
		return v == 1
	})
	waitFor(t, "the job to end", func() bool {
		v, _ := g.scrape().value("crank_jobs_ended_total", "operation=export", "status=canceled")
		return v == 1
	})

	s := g.scrape()
	tool := func(name, mode, role, outcome string) float64 {
		return s.get(t, "crank_tool_calls_total", "tool="+name, "mode="+mode, "role="+role, "outcome="+outcome)
	}
	for _, c := range []struct {
		name, mode, role, outcome string
		want                      float64
	}{
		{"get_user", "unary", "call", "ok", 4},
		{"get_user", "unary", "call", "invalid_arguments", 1},
		{"get_user", "unary", "call", "upstream_status", 1},
		{"down", "unary", "call", "upstream_unreachable", 1},
		{"slow", "unary", "call", "timeout", 1},
		{"slow", "unary", "call", "adapter_crash", 1},
		{"logs_window", "window", "call", "ok", 1},
		{"follow_start", "session", "start", "ok", 1},
		{"follow_poll", "session", "poll", "ok", 1},
		{"follow_stop", "session", "stop", "ok", 1},
		{"export_start", "async_job", "start", "ok", 1},
		{"export_start", "async_job", "start", "quota", 1},
		{"export_cancel", "async_job", "cancel", "ok", 1},
	} {
		if got := tool(c.name, c.mode, c.role, c.outcome); got != c.want {
			t.Errorf("crank_tool_calls_total{tool=%s,mode=%s,role=%s,outcome=%s} = %v, want %v", c.name, c.mode, c.role, c.outcome, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"crank_tool_call_duration_seconds", []string{"tool=get_user", "mode=unary"}, 6},
		{"crank_tool_calls_in_flight", []string{"tool=get_user"}, 0},
		{"crank_windows_total", []string{"tool=logs_window", "end_reason=max_items"}, 1},
		{"crank_window_items_total", []string{"tool=logs_window"}, 6},
		{"crank_windows_truncated_total", []string{"tool=logs_window"}, 1},
		{"crank_jobs_ended_total", []string{"operation=export", "status=canceled"}, 1},
		{"crank_jobs_running", []string{"operation=export"}, 0},
		{"crank_stream_sessions_running", []string{"operation=follow"}, 0},
		{"crank_stream_session_buffer_fill_ratio", []string{"operation=follow"}, 1},
		{"crank_quota_refusals_total", []string{"quota=max_jobs_per_agent"}, 1},
		{"crank_adapter_crashes_total", []string{"adapter=rest"}, 2},
		{"crank_adapter_restarts_total", []string{"adapter=rest"}, 2},
		{"crank_adapter_starts_total", []string{"adapter=rest"}, 3},
		{"crank_adapter_up", []string{"adapter=rest"}, 1},
		{"crank_mcp_sessions", nil, 1},
		{"crank_mcp_sessions_opened_total", []string{"how=initialize"}, 1},
		{"crank_mcp_requests_total", []string{"method=initialize", "outcome=ok"}, 1},
		{"crank_mcp_requests_total", []string{"method=tools/call", "outcome=ok"}, 16},
		{"crank_mcp_requests_total", []string{"method=tools/call", "outcome=cancelled"}, 1},
	} {
		if got := s.get(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Adapter hop and etcd latency moved; no id is ever a label.
	if v := s.get(t, "crank_adapter_calls_total", "adapter=rest", "rpc=invoke", "result=ok"); v < 3 {
		t.Errorf("adapter invoke calls ok = %v", v)
	}
	for _, name := range []string{"crank_etcd_request_duration_seconds", "crank_etcd_event_log_events_total",
		"crank_etcd_event_log_bytes_total", "crank_etcd_lease_grants_total", "crank_etcd_leases"} {
		if v := s.get(t, name); v == 0 {
			t.Errorf("%s did not move", name)
		}
	}
	// The cancelled call: cancelled or, if the client's cancellation
	// reached the gateway late, not counted as anything else.
	if v := s.get(t, "crank_tool_calls_total", "tool=slow", "outcome=cancelled"); v != 1 {
		t.Errorf("cancelled slow calls = %v", v)
	}
	// One access record per call, naming the outcome and the trace, never
	// an argument.
	var access int
	for _, line := range strings.Split(g.log.String(), "\n") {
		if !strings.Contains(line, `"msg":"tool call"`) {
			continue
		}
		access++
		if !strings.Contains(line, `"outcome":"`) || !strings.Contains(line, `"request_id":"`) || !strings.Contains(line, `"agent":"header:agent-1"`) {
			t.Errorf("access record: %s", line)
		}
		if strings.Contains(line, "seven") {
			t.Errorf("an argument in an access record: %s", line)
		}
	}
	if access != 17 {
		t.Errorf("%d access records, want one per tool call (17)", access)
	}
	for name, f := range s {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); strings.HasPrefix(name, "crank_") && (v == sid || v == job || v == cs.ID() || strings.Contains(v, "agent-1")) {
					t.Errorf("%s has an id as a label: %s=%s", name, l.GetName(), v)
				}
			}
		}
	}

	checkDashboard(t, s)

	// A reload keeps every series: nothing reset, nothing duplicated.
	g.reload(opts)
	after := g.scrape()
	for _, c := range [][]string{
		{"crank_tool_calls_total", "tool=get_user", "outcome=ok"},
		{"crank_adapter_crashes_total", "adapter=rest"},
		{"crank_windows_total", "tool=logs_window"},
	} {
		if a, b := after.get(t, c[0], c[1:]...), s.get(t, c[0], c[1:]...); a != b {
			t.Errorf("%v after the reload = %v, before %v", c, a, b)
		}
	}
	if n := len(after["crank_adapter_up"].GetMetric()); n != 1 {
		t.Errorf("crank_adapter_up has %d series after the reload", n)
	}
	call("get_user", map[string]any{"id": 6})
	if v := g.scrape().get(t, "crank_tool_calls_total", "tool=get_user", "outcome=ok"); v != 5 {
		t.Errorf("get_user ok after the reload = %v, want 5", v)
	}
}

// The Grafana dashboard parses, and every metric its queries name is in a
// real scrape.
func checkDashboard(t *testing.T, s scrape) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "crank.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	metric := regexp.MustCompile(`\bcrank_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				queried++
				base := name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && s[b] != nil {
						base = b
					}
				}
				if s[base] == nil {
					t.Errorf("dashboard panel %q queries %s, which the scrape does not have", p.Title, name)
				}
			}
		}
	}
	if queried < 20 {
		t.Errorf("the dashboard queries only %d metrics", queried)
	}
}

// demoMetrics checks that the demo's admin endpoint serves Crank's
// metrics (`make run`: http://localhost:2019/metrics) and that they saw
// the requests the demo test made.
func demoMetrics(t *testing.T, adminURL string) {
	t.Helper()
	g := &gateway{t: t, AdminURL: adminURL}
	s := g.scrape()
	if v := s.get(t, "crank_mcp_requests_total", "method=initialize", "outcome=ok"); v < 3 {
		t.Errorf("demo: %v initialize requests counted", v)
	}
	if v := s.get(t, "crank_adapter_up", "adapter=rest"); v != 1 {
		t.Errorf("demo: rest adapter up = %v", v)
	}
}

// quietShutdown fails when a gateway's log has lines at error level or
// above from a normal run and shutdown.
func quietShutdown(t *testing.T, log string) {
	t.Helper()
	bad := false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"fatal"`) || strings.Contains(line, `"level":"panic"`) {
			t.Errorf("an error logged by a normal run and shutdown: %s", line)
			bad = true
		}
	}
	if bad {
		t.Logf("the whole log:\n%s", log)
	}
}
