package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// crankBin is the crank executable built once by TestMain.
var crankBin string

// raceGateway builds the gateway with the race detector
// (CRANK_E2E_RACE=1, `make e2e-race`): a race in the gateway or an
// adapter process fails the test whose process reported it.
var raceGateway = os.Getenv("CRANK_E2E_RACE") != ""

// raceReport is what the race detector prints on finding a race.
const raceReport = "WARNING: DATA RACE"

// repoRoot is the repository root.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}()

func TestMain(m *testing.M) {
	serveBareMCP()            // bench_test.go: this binary as a bare MCP server, when asked
	serveFedProxy()           // bench_federation_test.go: this binary as the federation floor's proxy
	serveMCPUpstream()        // mcp_upstream_test.go: this binary as an upstream MCP server over stdio
	serveConformanceFixture() // conformance_fixture_test.go: this binary as the conformance fixture
	dir, err := os.MkdirTemp("", "crank-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	crankBin = filepath.Join(dir, "crank")
	args := []string{"build", "-o", crankBin}
	if raceGateway {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/crank")...)
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building crank:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// gateway is a running crank process.
type gateway struct {
	t        testing.TB
	dir      string
	port     int
	admin    int
	etcd     int
	peer     int
	cmd      *exec.Cmd
	log      *syncBuffer
	exited   chan struct{}
	MCPURL   string
	AdminURL string
	binary   string // gatewayOptions.Binary
	hosts    string // the hosts file of gatewayOptions.Hosts, "" for none
}

type gatewayOptions struct {
	// Operations is the operations file's content.
	Operations string
	// Handler holds extra lines for the crank directive's block;
	// {{mcp_url}} in them stands for the endpoint's URL.
	Handler string
	// Matcher replaces the crank directive's matcher (default /mcp), and
	// Site holds extra lines for the site block (e.g. a named matcher or
	// an authentication handler).
	Matcher, Site string
	// Env is extra environment, NAME=value.
	Env []string
	// Crank replaces the body of the crank global option (by default an
	// embedded etcd in the gateway's directory), e.g. with an etcd block
	// naming an external cluster.
	Crank string
	// Binary runs another crank executable than the one TestMain built
	// (the benchmarks' CRANK_BENCH_BEFORE).
	Binary string
	// Global holds extra lines for the global options block (e.g. debug).
	Global string
	// AnyHost serves the site for every Host (http://:port, still bound to
	// loopback) rather than for 127.0.0.1 alone, where Caddy answers any
	// other Host with an empty 200 before Crank sees it: the endpoint's own
	// DNS rebinding protection then decides.
	AnyHost bool
	// Hosts, when set, is the /etc/hosts the gateway and its adapters
	// resolve names with: crank runs in a mount namespace of its own
	// with this file over /etc/hosts (needsHostsFile says whether the
	// machine can).
	Hosts string
}

func (g *gateway) caddyfile(opts gatewayOptions) string {
	crank := opts.Crank
	if crank == "" {
		crank = fmt.Sprintf(`embedded_etcd {
			data_dir %s
			client_url http://127.0.0.1:%d
			peer_url http://127.0.0.1:%d
		}`, filepath.Join(g.dir, "etcd"), g.etcd, g.peer)
	}
	site := "http://127.0.0.1"
	if opts.AnyHost {
		site = "http://"
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	%s
	crank {
		%s
	}
}

%s:%d {
	bind 127.0.0.1
	%s
	crank %s %s {
		%s
	}
}
`, g.admin, opts.Global, crank, site, g.port, opts.Site, cmp.Or(opts.Matcher, "/mcp"), filepath.Join(g.dir, "ops.yaml"),
		strings.ReplaceAll(opts.Handler, "{{mcp_url}}", fmt.Sprintf("http://127.0.0.1:%d/mcp", g.port)))
}

// startGateway starts crank with the given operations and waits until the
// MCP endpoint answers. Ports are picked free just before the start; when
// another test took one meanwhile, it starts again on new ports.
func startGateway(t testing.TB, opts gatewayOptions) *gateway {
	t.Helper()
	for attempt := 1; ; attempt++ {
		g, err := tryStartGateway(t, opts)
		if err == nil {
			return g
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("crank could not bind a port, retrying: %v", err)
	}
}

func tryStartGateway(t testing.TB, opts gatewayOptions) (*gateway, error) {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), port: freePort(t), admin: freePort(t), etcd: freePort(t), peer: freePort(t),
		log: &syncBuffer{}}
	g.MCPURL = fmt.Sprintf("http://127.0.0.1:%d/mcp", g.port)
	g.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	writeFile(t, filepath.Join(g.dir, "ops.yaml"), opts.Operations)
	writeFile(t, filepath.Join(g.dir, "Caddyfile"), g.caddyfile(opts))

	g.binary = opts.Binary
	if opts.Hosts != "" {
		g.hosts = filepath.Join(g.dir, "hosts")
		writeFile(t, g.hosts, opts.Hosts)
	}
	if err := g.launch(opts.Env); err != nil {
		return nil, err
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-g.exited:
			return nil, fmt.Errorf("crank exited during start:\n%s", g.log.String())
		default:
		}
		// Caddy logs "serving initial configuration" once every app has
		// started; before that the HTTP server may already answer while
		// the crank app is still failing its start.
		started := strings.Contains(g.log.String(), "serving initial configuration")
		if resp, err := http.Get(g.AdminURL + "/crank/adapters"); err == nil {
			resp.Body.Close()
			if started && resp.StatusCode == http.StatusOK {
				if r2, err := http.Get(g.MCPURL); err == nil {
					r2.Body.Close()
					if r2.StatusCode == http.StatusNotFound {
						// Not the MCP endpoint: another test's server took
						// the port between freePort and crank's bind.
						g.stop()
						return nil, fmt.Errorf("address already in use: another server answers on %s", g.MCPURL)
					}
					t.Cleanup(g.stop)
					return g, nil
				}
			}
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, fmt.Errorf("crank did not come up:\n%s", g.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// launch starts crank on g's Caddyfile, in g's directory (its home and
// XDG directories too), with env (NAME=value) added, writing to g's log;
// g.exited closes when the process ends.
func (g *gateway) launch(env []string) error {
	g.exited = make(chan struct{})
	g.cmd = exec.Command(cmp.Or(g.binary, crankBin), "run", "--config", filepath.Join(g.dir, "Caddyfile"), "--adapter", "caddyfile")
	if g.hosts != "" {
		// Its own /etc/hosts, in a mount namespace of its own.
		g.cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /etc/hosts && shift && exec "$@"`, "sh", g.hosts}, g.cmd.Args...)...)
	}
	g.cmd.Dir = g.dir
	g.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+g.dir, "XDG_CONFIG_HOME="+g.dir, "HOME="+g.dir)
	g.cmd.Env = append(g.cmd.Env, env...)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		return err
	}
	exited, cmd := g.exited, g.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// waitAnswering waits until g's MCP URL answers HTTP at all.
func (g *gateway) waitAnswering(what string) {
	g.t.Helper()
	waitFor(g.t, what, func() bool {
		resp, err := http.Get(g.MCPURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

// stop ends crank gracefully (so it stops its adapters) and kills it if it
// does not exit in time.
func (g *gateway) stop() {
	if g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-g.exited:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
	if strings.Contains(g.log.String(), raceReport) {
		g.t.Errorf("the race detector reported a race in the gateway or an adapter")
	}
	if g.t.Failed() {
		g.t.Logf("crank log:\n%s", g.log.String())
	}
}

// adapters returns the admin API's view of the adapter processes.
func (g *gateway) adapters() []adapterStatus {
	g.t.Helper()
	resp, err := http.Get(g.AdminURL + "/crank/adapters")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []adapterStatus
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		g.t.Fatal(err)
	}
	return out
}

type adapterStatus struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Starts  int    `json:"starts"`
}

func (g *gateway) adapter(name string) adapterStatus {
	g.t.Helper()
	for _, a := range g.adapters() {
		if a.Name == name {
			return a
		}
	}
	g.t.Fatalf("no adapter %q in %+v", name, g.adapters())
	return adapterStatus{}
}

// reload loads a new Caddyfile through the admin API, as `caddy reload`
// does.
func (g *gateway) reload(opts gatewayOptions) {
	g.t.Helper()
	if code, body := g.tryReload(opts); code != http.StatusOK {
		g.t.Fatalf("reload: %d %s: %s", code, http.StatusText(code), body)
	}
	// The old config's server closes the keep-alive connections it had;
	// a POST on one of them, which the transport does not retry, would
	// fail with EOF. Clients dial afresh, as after any server restart.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// tryReload is reload that returns the admin API's answer instead of
// failing the test on a refused config.
func (g *gateway) tryReload(opts gatewayOptions) (int, string) {
	g.t.Helper()
	writeFile(g.t, filepath.Join(g.dir, "ops.yaml"), opts.Operations)
	req, _ := http.NewRequest(http.MethodPost, g.AdminURL+"/load", strings.NewReader(g.caddyfile(opts)))
	req.Header.Set("Content-Type", "text/caddyfile")
	// As `caddy reload --force`: reload even though the Caddyfile itself
	// is unchanged (the operations file it names changed).
	req.Header.Set("Cache-Control", "must-revalidate")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// connect opens a go-sdk client session to the gateway.
func (g *gateway) connect(ctx context.Context) *mcp.ClientSession {
	g.t.Helper()
	return g.connectWith(ctx, nil)
}

// connectProgress opens a go-sdk client session to the gateway whose
// progress notifications p records.
func (g *gateway) connectProgress(ctx context.Context, p *progressLog) *mcp.ClientSession {
	g.t.Helper()
	return g.connectWith(ctx, &mcp.ClientOptions{ProgressNotificationHandler: p.handler})
}

func (g *gateway) connectWith(ctx context.Context, opts *mcp.ClientOptions) *mcp.ClientSession {
	g.t.Helper()
	return g.connectTransport(ctx, opts, &mcp.StreamableClientTransport{Endpoint: g.MCPURL})
}

// connectAs opens a go-sdk client session whose requests carry the agent
// header X-Agent-Id: agent, as a proxy in front of the gateway that sets
// it would; the gateway's handler needs `agent_header X-Agent-Id`.
func (g *gateway) connectAs(ctx context.Context, agent string) *mcp.ClientSession {
	g.t.Helper()
	return g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
		HTTPClient: &http.Client{Transport: headerTransport{"X-Agent-Id": agent}}})
}

// headerTransport sets its headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// sessionProtocol makes a go-sdk client open an MCP session (2025-11-25):
// left to itself it asks server/discover first and speaks the sessionless
// 2026-07-28 protocol. The harness's clients open sessions, as what most
// tests drive (families of a session's agent, resumption, replicas) is
// the session generation's; generations_test.go drives both.
var sessionProtocol = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func (g *gateway) connectTransport(ctx context.Context, opts *mcp.ClientOptions, tr *mcp.StreamableClientTransport) *mcp.ClientSession {
	g.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, opts)
	cs, err := client.Connect(ctx, tr, sessionProtocol)
	if err != nil {
		g.t.Fatalf("connect: %v\n%s", err, g.log.String())
	}
	g.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// textOf returns the text of a tool result's first content block.
func textOf(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// windowCursorValue is the upstream cursor inside a window's cursor (the
// gateway seals it: "crank2:<base64url JSON>.<tag>"), "" when c is not
// one. Tests look inside; clients pass cursors back unchanged.
func windowCursorValue(c string) string {
	v, _, ok := strings.Cut(strings.TrimPrefix(c, "crank2:"), ".")
	b, err := base64.RawURLEncoding.DecodeString(v)
	var st struct{ C string }
	if !ok || err != nil || json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.C
}

// upstreamCursor is the upstream cursor inside a window result's cursor.
func upstreamCursor(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var w struct{ Cursor string }
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("window result %s: %v", b, err)
	}
	return windowCursorValue(w.Cursor)
}

// waitFor polls cond until it holds or 15s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// needsHostsFile skips the test (fails it on CI) when crank cannot be
// given a hosts file of its own: that takes root and unshare(1).
func needsHostsFile(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		missing.Tool(t, "unshare(1) is not installed", "apt-get install util-linux")
	} else if os.Geteuid() != 0 {
		missing.Tool(t, "not root: a hosts file of the gateway's own needs a mount namespace", "run the test as root, as CI does")
	}
}

// startNodeServer starts e2e/<dir>/server.mjs, a server of the npm
// packages of its lockfile, which listens on a free loopback port, prints
// {"port":N} and serves until its stdin closes; it returns its address.
// It skips the test when the package pkg is not installed in its
// node_modules (fails it on CI): `make <target>` installs them.
func startNodeServer(t *testing.T, dir, pkg, target string) string {
	t.Helper()
	path := filepath.Join(repoRoot, "e2e", dir)
	requireNode(t, dir, pkg, target)
	cmd := exec.Command("node", filepath.Join(path, "server.mjs"))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the server exits when its stdin ends
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var addr struct{ Port int }
	if err != nil || json.Unmarshal([]byte(line), &addr) != nil || addr.Port == 0 {
		t.Fatalf("e2e/%s/server.mjs did not start: %q %v", dir, line, err)
	}
	return fmt.Sprintf("127.0.0.1:%d", addr.Port)
}

// requireNode skips the test (fails it on CI) without node or the npm
// package pkg in e2e/<dir>, which `make <target>` installs.
func requireNode(t *testing.T, dir, pkg, target string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot, "e2e", dir, "node_modules", pkg)); err != nil {
		missing.Tool(t, fmt.Sprintf("e2e/%s/node_modules/%s is missing", dir, pkg), fmt.Sprintf("make %s: npm ci in e2e/%s", target, dir))
	} else if _, err := exec.LookPath("node"); err != nil {
		missing.Tool(t, "node is not installed", "apt-get install nodejs npm")
	}
}
