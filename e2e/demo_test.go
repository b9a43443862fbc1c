package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
)

// demoRun is the repository's demo (`make run`: its Caddyfile and operations
// files) running with its ports and data directory moved, so tests run in
// parallel on a clean clone.
type demoRun struct {
	t     *testing.T
	dir   string
	ports map[string]int // ":8080" → the port used instead
	cmd   *exec.Cmd
	log   *syncBuffer
	done  chan struct{}
}

// demoPorts are the ports of the demo's Caddyfile and operations files.
var demoPorts = regexp.MustCompile(`:(8080|8081|8082|8083|8084|8085|2019|23790|23800)\b`)

// startDemo copies the demo to a temporary directory, its ports replaced
// by free ones and its Caddyfile changed by edits, and runs it.
func startDemo(t *testing.T, edits ...func(string) string) *demoRun {
	t.Helper()
	d := &demoRun{t: t, dir: t.TempDir(), ports: map[string]int{}}
	used := map[int]bool{}
	move := func(text string) string {
		return demoPorts.ReplaceAllStringFunc(text, func(m string) string {
			if d.ports[m] == 0 {
				// A port freed a moment ago can be handed out again: two
				// of the demo's addresses on one port make an ambiguous
				// site ("ambiguous site definition").
				p := freePort(t)
				for used[p] {
					p = freePort(t)
				}
				used[p], d.ports[m] = true, p
			}
			return fmt.Sprintf(":%d", d.ports[m])
		})
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := move(string(src))
	for _, edit := range edits {
		text = edit(text)
	}
	// The demo waits 3s for requests still open when it stops. A connection
	// dialed to one of its ports in the last 5s and not used yet — on a
	// loaded machine, another test's client reaching a port number handed
	// out twice — holds Go's graceful shutdown for 5s and makes the demo
	// log a shutdown timeout: the tests' demo waits longer, still failing
	// on a request that never ends (quietShutdown).
	if !strings.Contains(text, "grace_period 3s") {
		t.Fatal("the demo Caddyfile's grace_period changed; update this test")
	}
	text = strings.Replace(text, "grace_period 3s", "grace_period 8s", 1)
	if !strings.Contains(text, "data_dir .crank/etcd") {
		t.Fatal("the demo Caddyfile's data_dir moved; update this test")
	}
	text = strings.Replace(text, "data_dir .crank/etcd", "data_dir "+filepath.Join(d.dir, "etcd"), 1)
	writeFile(t, filepath.Join(d.dir, "Caddyfile"), text)
	files, _ := filepath.Glob(filepath.Join(repoRoot, "demo", "*"))
	if err := os.Mkdir(filepath.Join(d.dir, "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d.dir, "demo", filepath.Base(f)), move(string(b)))
	}
	d.run()
	return d
}

// run starts the demo's process and waits until the gateway answers.
func (d *demoRun) run() {
	t := d.t
	t.Helper()
	d.cmd = exec.Command(crankBin, "run", "--config", filepath.Join(d.dir, "Caddyfile"), "--adapter", "caddyfile")
	d.cmd.Dir = d.dir // the operations files are relative to it
	d.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+d.dir, "XDG_CONFIG_HOME="+d.dir, "HOME="+d.dir, "CRANK_DEMO_TOKEN=demo-token")
	d.log, d.done = &syncBuffer{}, make(chan struct{})
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, log, done := d.cmd, d.log, d.done
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { quietShutdown(t, log.String()) }) // metrics_test.go; runs after the stop below
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("crank log:\n%s", log.String())
		}
	})
	waitFor(t, "the demo gateway to serve its tools", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", d.ports[":8080"]))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusNotFound // the gateway's own 404
	})
}

// mcpURL is the demo's MCP endpoint; admin its admin API.
func (d *demoRun) mcpURL() string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", d.ports[":8080"]) }
func (d *demoRun) admin() string  { return fmt.Sprintf("http://localhost:%d", d.ports[":2019"]) }

// The demo Caddyfile (`make run`) serves http://127.0.0.1:8080/mcp and
// http://localhost:8080/mcp alike, and answers any other Host — a DNS
// rebinding probe — with a clear 4xx that never reaches the endpoint.
func TestDemoCaddyfileHosts(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	ports := d.ports
	port := ports[":8080"]
	// The test's own connections, closed before the demo stops: a
	// connection the client dialed and never used would hold the server's
	// graceful shutdown (Go waits 5s for a new connection's first request,
	// longer than the demo's grace period) and have it log an error.
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	do := func(method, host, path, body string) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port)} {
		resp, body := do(http.MethodPost, host, "/mcp", mcptest.InitializeBody)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(body, `"serverInfo"`) {
			t.Errorf("initialize with Host %s: %s %s", host, resp.Status, body)
		}
		if resp, body := do(http.MethodGet, host, "/", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "/mcp") {
			t.Errorf("GET / with Host %s: %s %s", host, resp.Status, body)
		}
	}
	for _, host := range []string{"evil.example.com", fmt.Sprintf("evil.example.com:%d", port), fmt.Sprintf("127.0.0.1.nip.io:%d", port)} {
		for _, path := range []string{"/mcp", "/"} {
			resp, body := do(http.MethodPost, host, path, mcptest.InitializeBody)
			if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Mcp-Session-Id") != "" ||
				!strings.Contains(body, fmt.Sprintf("http://localhost:%d/mcp", port)) {
				t.Errorf("%s with Host %s: %s %q", path, host, resp.Status, body)
			}
		}
	}

	// A go-sdk client pointed at localhost, in an MCP session, lists the
	// demo's tools.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-hosts", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://localhost:%d/mcp", port), HTTPClient: hc}, sessionProtocol)
	if err != nil {
		t.Fatalf("connect to localhost: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list via localhost: %v %v", tools, err)
	}
	demoMCPWindow(t, cs)                                               // mcp_upstream_test.go
	demoGraphQLSubscription(t, cs)                                     // graphql_subscription_test.go
	demoMetrics(t, fmt.Sprintf("http://localhost:%d", ports[":2019"])) // metrics_test.go
}

// Ctrl-C stops the demo within seconds even while a session reads its
// endless upstream stream, a job waits on a slow upstream and the client
// holds its MCP stream open: Crank ends its runners before Caddy's servers
// wait for their requests. The session is recorded stopped and the job
// failed, both with end "shutdown", which the restarted gateway reports;
// no adapter process is left.
func TestDemoStopsFast(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-stop", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: d.mcpURL()}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tool, err, textOf(res))
		}
		m, _ := res.StructuredContent.(map[string]any)
		return m
	}
	sid := call(cs, "follow_logs_start", map[string]any{})["session_id"].(string)
	jid := call(cs, "slow_count_start", map[string]any{"ms": 600000})["job_id"].(string)
	waitFor(t, "the session to read the upstream", func() bool {
		m := call(cs, "follow_logs_poll", map[string]any{"session_id": sid, "max_items": 1})
		items, _ := m["items"].([]any)
		return len(items) > 0
	})
	var adapters []adapterStatus
	resp, err := http.Get(d.admin() + "/crank/adapters")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&adapters)
	resp.Body.Close()
	if err != nil || len(adapters) == 0 {
		t.Fatalf("adapters: %v %v", adapters, err)
	}

	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway did not exit within 5s of SIGINT")
	}
	for _, a := range adapters {
		if a.PID == 0 {
			continue
		}
		waitFor(t, fmt.Sprintf("adapter %s (pid %d) to be gone", a.Name, a.PID), func() bool {
			return syscall.Kill(a.PID, 0) == syscall.ESRCH
		})
	}

	// The restarted gateway serves the same MCP session from its record,
	// and with it the caller's session and job.
	d.run()
	old := &mcptest.Client{T: t, URL: d.mcpURL(), Session: cs.ID(), Version: "2025-11-25"}
	restored := func(tool string, args map[string]any) map[string]any {
		var res mcptest.CallResult
		old.OK("tools/call", map[string]any{"name": tool, "arguments": args}, &res)
		return res.StructuredContent
	}
	poll := restored("follow_logs_poll", map[string]any{"session_id": sid})
	if poll["status"] != "stopped" || poll["end_reason"] != "shutdown" {
		t.Errorf("session after the restart: %v", poll)
	}
	status := restored("slow_count_status", map[string]any{"job_id": jid})
	if e, _ := status["error"].(map[string]any); status["status"] != "failed" || e["code"] != "shutdown" {
		t.Errorf("job after the restart: %v", status)
	}
}
