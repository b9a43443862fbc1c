package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// gateway is a Caddy config with the crank app and handler running in this
// process. Only one Caddy config runs per process: tests that start one
// must not run in parallel.
type gateway struct {
	dir      string
	MCPURL   string
	AdminURL string
	etcdURL  string
	logFile  string
}

const integrationAllowedOrigin = "https://app.example.com"

// startGateway loads a config serving ops (an operations file's content) at
// /mcp with an embedded etcd, everything on free loopback ports and in
// t.TempDir(). Cleanup stops the config (adapters, etcd) and the admin
// endpoint. extra holds more fields of the handler's config.
func startGateway(t *testing.T, ops string, extra ...map[string]any) *gateway {
	t.Helper()
	g := &gateway{dir: t.TempDir()}
	g.logFile = filepath.Join(g.dir, "caddy.log")
	// Keep Caddy's instance id, autosave and the like out of $HOME.
	t.Setenv("XDG_DATA_HOME", filepath.Join(g.dir, "data"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(g.dir, "config"))
	opsPath := filepath.Join(g.dir, "ops.yaml")
	if err := os.WriteFile(opsPath, []byte(ops), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		stopCaddy(t)
		if t.Failed() {
			if b, err := os.ReadFile(g.logFile); err == nil {
				t.Logf("caddy log:\n%s", b)
			}
		}
	})

	// Free ports are only free until someone else binds them: retry on a
	// clash.
	var err error
	for attempt := range 3 {
		var ports []int
		ports, err = storetest.FreePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		httpPort, adminPort, clientPort, peerPort := ports[0], ports[1], ports[2], ports[3]
		g.MCPURL = fmt.Sprintf("http://127.0.0.1:%d/mcp", httpPort)
		g.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
		g.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
		cfg := map[string]any{
			"admin": map[string]any{
				"listen": fmt.Sprintf("127.0.0.1:%d", adminPort),
				"config": map[string]any{"persist": false},
			},
			"storage": map[string]any{"module": "file_system", "root": filepath.Join(g.dir, "storage")},
			"logging": map[string]any{"logs": map[string]any{"default": map[string]any{
				"level":  "INFO",
				"writer": map[string]any{"output": "file", "filename": g.logFile, "roll": false},
			}}},
			"apps": map[string]any{
				"crank": map[string]any{"embedded_etcd": map[string]any{
					"data_dir":   filepath.Join(g.dir, fmt.Sprintf("etcd-%d", attempt)),
					"client_url": g.etcdURL,
					"peer_url":   fmt.Sprintf("http://127.0.0.1:%d", peerPort),
				}},
				"http": map[string]any{
					"grace_period": int64(time.Second),
					"servers": map[string]any{"mcp": map[string]any{
						"listen":          []string{fmt.Sprintf("127.0.0.1:%d", httpPort)},
						"automatic_https": map[string]any{"disable": true},
						"routes": []any{map[string]any{
							"match": []any{map[string]any{"path": []string{"/mcp"}}},
							"handle": []any{map[string]any{
								"handler":         "crank",
								"operations":      []string{opsPath},
								"allowed_origins": []string{integrationAllowedOrigin},
							}},
						}},
					}},
				},
			},
		}
		for _, x := range extra {
			handle := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["mcp"].(map[string]any)["routes"].([]any)[0].(map[string]any)["handle"].([]any)[0].(map[string]any)
			for k, v := range x {
				handle[k] = v
			}
		}
		raw, merr := json.Marshal(cfg)
		if merr != nil {
			t.Fatal(merr)
		}
		err = caddy.Load(raw, true)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		t.Logf("port clash, retrying: %v", err)
	}
	if err != nil {
		t.Fatalf("caddy.Load: %v", err)
	}
	return g
}

// stopCaddy stops the running config, which cleans up the crank handler
// (stopping its adapter processes) and app (closing the store and the
// embedded etcd), then replaces the admin endpoint by none: caddy.Stop
// leaves the admin server running.
func stopCaddy(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Errorf("caddy.Stop: %v", err)
	}
	if err := caddy.Load([]byte(`{"admin":{"disabled":true,"config":{"persist":false}}}`), true); err != nil {
		t.Errorf("load the empty config: %v", err)
	}
	if err := caddy.Stop(); err != nil {
		t.Errorf("caddy.Stop: %v", err)
	}
}

// originTransport sets an Origin header on every request, as a browser
// would.
type originTransport struct {
	origin string
	base   http.RoundTripper
}

func (o originTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Origin", o.origin)
	return o.base.RoundTrip(r)
}

func doMCP(t *testing.T, method, url, origin, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	// A GET that opens an SSE stream would not end: read what is there.
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, b
}

func TestGatewayInProcess(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL))

	t.Run("disallowed origin is refused", func(t *testing.T) {
		for _, origin := range []string{"https://evil.example", "null", "https://app.example.com.evil.example"} {
			for _, method := range []string{http.MethodPost, http.MethodGet} {
				body := ""
				if method == http.MethodPost {
					body = mcptest.InitializeBody
				}
				resp, b := doMCP(t, method, g.MCPURL, origin, body)
				mcptest.CheckOriginRefusal(t, resp.StatusCode, resp.Header, b, origin)
			}
		}
	})

	t.Run("allowed origins pass", func(t *testing.T) {
		for _, origin := range []string{
			"",                                   // no Origin: not a browser
			integrationAllowedOrigin,             // allow-listed
			"HTTPS://APP.EXAMPLE.COM",            // allow-listed, other case
			"http://localhost:6274",              // loopback
			strings.TrimSuffix(g.MCPURL, "/mcp"), // the endpoint's own origin
		} {
			resp, b := doMCP(t, http.MethodPost, g.MCPURL, origin, mcptest.InitializeBody)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("POST initialize with Origin %q: %s: %s", origin, resp.Status, b)
			}
			if resp.Header.Get("Mcp-Session-Id") == "" {
				t.Errorf("POST initialize with Origin %q: no Mcp-Session-Id", origin)
			}
			// A GET without a session is the transport's to refuse, not
			// the origin check's.
			resp, b = doMCP(t, http.MethodGet, g.MCPURL, origin, "")
			if resp.StatusCode == http.StatusForbidden || strings.Contains(string(b), "allowed_origins") {
				t.Errorf("GET with Origin %q refused by the origin check: %s: %s", origin, resp.Status, b)
			}
		}
	})

	t.Run("MCP client with an allowed origin calls the rest adapter", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "caddymodule-test", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   g.MCPURL,
			HTTPClient: &http.Client{Transport: originTransport{origin: integrationAllowedOrigin, base: http.DefaultTransport}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session, recorded below (left to itself, the client speaks the sessionless 2026-07-28)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer cs.Close()

		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if len(tools.Tools) != 1 || tools.Tools[0].Name != "get_user" {
			t.Fatalf("tools = %+v, want get_user only", tools.Tools)
		}
		if a := tools.Tools[0].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("get_user annotations = %+v, want read-only", a)
		}

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		if res.IsError {
			t.Fatalf("tools/call: error result: %+v", res.Content)
		}
		if len(res.Content) == 0 {
			t.Fatal("tools/call: no content")
		}
		text, _ := res.Content[0].(*mcp.TextContent)
		if text == nil || !strings.Contains(text.Text, "Ada Lovelace") {
			t.Errorf("tools/call: content %+v does not hold the upstream's answer", res.Content[0])
		}
		paths, token := up.Requests()
		if !slices.Contains(paths, "GET /users/7") {
			t.Errorf("upstream saw %q, want GET /users/7", paths)
		}
		if token != "s3cret-token-value" {
			t.Errorf("upstream got X-Token %q: the {env.…} placeholder was not expanded", token)
		}

		// An upstream error is a tool error result, not a protocol error.
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 404}})
		if err != nil {
			t.Fatalf("tools/call 404: %v", err)
		}
		if !res.IsError {
			t.Errorf("tools/call 404: IsError = false, content %+v", res.Content)
		}

		// The session was recorded in the (embedded etcd) store.
		appVal, err := caddy.ActiveContext().App("crank")
		if err != nil {
			t.Fatal(err)
		}
		st := appVal.(*App).Store()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rec, err := st.GetMCPSession(ctx, cs.ID())
			if err == nil {
				if rec.ClientName != "caddymodule-test" {
					t.Errorf("recorded session client %q, want caddymodule-test", rec.ClientName)
				}
				break
			}
			if !errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
				t.Fatalf("session %s not recorded: %v", cs.ID(), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	var adapterPID int
	t.Run("admin lists the rest adapter", func(t *testing.T) {
		resp, err := http.Get(g.AdminURL + "/crank/adapters")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET /crank/adapters: %s: %s", resp.Status, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		var got []AdapterStatus
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("adapters = %+v, want just rest", got)
		}
		a := got[0]
		exe, _ := os.Executable()
		if a.Name != "rest" || !a.Running || a.PID <= 0 || a.Starts != 1 {
			t.Errorf("rest adapter = %+v, want running, started once", a)
		}
		if a.Command != exe || !slices.Equal(a.Args, []string{AdapterCommand, "rest"}) {
			t.Errorf("rest adapter runs %q %q, want %q [%s rest]", a.Command, a.Args, exe, AdapterCommand)
		}
		if !slices.Equal(a.Modes, []string{"unary", "window", "session", "async_job"}) || !slices.Contains(a.Protocol, "http") || a.Version == "" {
			t.Errorf("rest adapter description = %+v", a)
		}
		if a.PID == os.Getpid() {
			t.Errorf("the adapter runs in the test process (pid %d)", a.PID)
		}
		adapterPID = a.PID

		req, _ := http.NewRequest(http.MethodPost, g.AdminURL+"/crank/adapters", nil)
		resp2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /crank/adapters: %s, want 405", resp2.Status)
		}
	})

	t.Run("stop tears everything down", func(t *testing.T) {
		stopCaddy(t)
		poolSize := func(p *caddy.UsagePool) int {
			n := 0
			p.Range(func(any, any) bool { n++; return true })
			return n
		}
		for name, p := range map[string]*caddy.UsagePool{"adapterPool": adapterPool, "endpointPool": endpointPool, "storePool": storePool} {
			if n := poolSize(p); n != 0 {
				t.Errorf("%s holds %d entries after stop", name, n)
			}
		}
		if adapterPID > 0 {
			mcptest.WaitUntil(t, "the adapter process to exit", func() bool {
				return errors.Is(syscall.Kill(adapterPID, 0), syscall.ESRCH)
			})
		}
		mcptest.WaitUntil(t, "the embedded etcd to stop listening", func() bool {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(g.etcdURL, "http://"), 200*time.Millisecond)
			if err == nil {
				c.Close()
				return false
			}
			return true
		})
		mcptest.WaitUntil(t, "the MCP listener to close", func() bool {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(strings.TrimSuffix(g.MCPURL, "/mcp"), "http://"), 200*time.Millisecond)
			if err == nil {
				c.Close()
				return false
			}
			return true
		})
	})
}

// TestReloadChangingEmbeddedEtcdPrefix documents a bug: the store pool key
// is the whole app config, so a reload that changes only embedded_etcd's
// key prefix (a client-side setting) starts a second embedded etcd on the
// same ports and data directory while the first still runs, and the reload
// fails with "address already in use".
func TestReloadChangingEmbeddedEtcdPrefix(t *testing.T) {
	up := mcptest.NewUsers(t)
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL))

	resp, err := http.Get(g.AdminURL + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	err = json.NewDecoder(resp.Body).Decode(&cfg)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	emb := cfg["apps"].(map[string]any)["crank"].(map[string]any)["embedded_etcd"].(map[string]any)
	emb["prefix"] = "/crank-other/"
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(raw, true); err != nil {
		t.Fatalf("a reload changing only embedded_etcd.prefix fails: %v", err)
	}
}
