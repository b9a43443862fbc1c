package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
)

// upstream is a real loopback REST API.
type upstream struct {
	*httptest.Server
	slowStarted chan struct{}
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{slowStarted: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") == "404" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"no such user"}`)
			return
		}
		fmt.Fprintf(w, `{"id":%s,"name":"User %s"}`, r.PathValue("id"), r.PathValue("id"))
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		u.slowStarted <- struct{}{}
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"slow":true}`)
	})
	mux.HandleFunc("GET /headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": r.Header.Get("X-Token")})
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

// operations returns an operations file for the upstream at base; down is
// the URL of a port nothing listens on.
func operations(base, down string, extra string) string {
	return fmt.Sprintf(`
operations:
  - name: get_user
    description: Fetch a user by id.
    adapter: rest
    annotations: {read_only: true}
    input_schema:
      type: object
      properties: {id: {type: integer}}
      required: [id]
    output_schema:
      type: object
      properties: {id: {type: integer}, name: {type: string}}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: slow
    description: An upstream that takes 5s.
    adapter: rest
    timeout: %[3]s
    config: {method: GET, url: "%[1]s/slow"}
  - name: down
    description: An upstream that is not running.
    adapter: rest
    config: {method: GET, url: "%[2]s/anything"}
  - name: whoami
    description: Echoes the configured token header back.
    adapter: rest
    config:
      method: GET
      url: "%[1]s/headers"
      headers: {X-Token: "{env.CRANK_E2E_TOKEN}"}
%[4]s`, base, down, "%s", extra)
}

func opsFile(t testing.TB, up *upstream, slowTimeout string, extra string) string {
	// Port 1 (tcpmux) has no listener here: connections are refused, and
	// no parallel test can start a server on it by chance.
	down := "http://127.0.0.1:1"
	return fmt.Sprintf(operations(up.URL, down, extra), slowTimeout)
}

const secretToken = "tok-3f9a-very-secret"

func TestGoSDKClient(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "500ms", ""), Env: []string{"CRANK_E2E_TOKEN=" + secretToken}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "down,get_user,slow,whoami" {
		t.Fatalf("tools = %v", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"id":7,"name":"User 7"}` || textOf(res) != `{"id":7,"name":"User 7"}` {
		t.Fatalf("get_user: isError=%v structured=%s text=%q", res.IsError, sc, textOf(res))
	}

	// Every failure is a specific, readable tool error.
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"get_user", map[string]any{"id": "seven"}, `invalid arguments for tool "get_user": id: must be an integer, got a string`},
		{"get_user", map[string]any{}, `invalid arguments for tool "get_user": missing required argument id`},
		{"get_user", map[string]any{"id": 404}, `upstream answered with an error (GET ` + up.URL + `/users/404): upstream answered 404 Not Found`},
		{"down", nil, `upstream could not be reached (GET http://127.0.0.1:`},
		{"slow", nil, `upstream timed out (GET ` + up.URL + `)`},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if !res.IsError || !strings.Contains(textOf(res), c.want) {
			t.Errorf("%s %v: want isError with %q, got isError=%v %q", c.tool, c.args, c.want, res.IsError, textOf(res))
		}
	}

	// An unknown tool is a protocol error.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil || !strings.Contains(err.Error(), `unknown tool "no_such_tool"`) {
		t.Errorf("unknown tool: %v", err)
	}

	// The secret reaches the upstream but never the client or the log.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(textOf(res), secretToken) || !strings.Contains(textOf(res), `"token":"[REDACTED]"`) {
		t.Errorf("whoami: %q", textOf(res))
	}
	if strings.Contains(g.log.String(), secretToken) {
		t.Error("the secret token appears in the gateway log")
	}

	// The MCP session is recorded in etcd.
	st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: []string{fmt.Sprintf("https://127.0.0.1:%d", g.etcd)},
		TLS: store.EmbeddedClientTLS(filepath.Join(g.dir, "etcd"))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetMCPSession(ctx, cs.ID())
	if err != nil {
		t.Fatalf("session %q not in etcd: %v", cs.ID(), err)
	}
	if rec.ClientName != "crank-e2e" || rec.ProtocolVersion == "" {
		t.Errorf("session record: %+v", rec)
	}
}

func TestAdapterCrash(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "10s", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	if res := call("get_user", map[string]any{"id": 1}); res.IsError {
		t.Fatal(textOf(res))
	}
	before := g.adapter("rest")

	// kill -9 between calls: the next call succeeds after a restart.
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the adapter to be seen dead", func() bool { return !g.adapter("rest").Running })
	if res := call("get_user", map[string]any{"id": 2}); res.IsError {
		t.Fatalf("call after kill: %s", textOf(res))
	}
	after := g.adapter("rest")
	if after.Starts != before.Starts+1 || after.PID == before.PID {
		t.Fatalf("adapter not restarted: before %+v after %+v", before, after)
	}

	// kill -9 during a call: that call gets a clear error, not a hang.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
		done <- res
	}()
	<-up.slowStarted
	if err := syscall.Kill(after.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || !res.IsError || !strings.Contains(textOf(res), `adapter "rest" stopped during the call of tool "slow"`) {
			t.Fatalf("in-flight call: %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("in-flight call hangs after the adapter was killed")
	}
	waitFor(t, "the adapter to be seen dead", func() bool { return !g.adapter("rest").Running })
	if res := call("get_user", map[string]any{"id": 3}); res.IsError {
		t.Fatalf("call after in-flight kill: %s", textOf(res))
	}
}

// An adapter run by hand with --debug (as under a debugger) is attached to
// by a gateway started with the line it prints, and outlives the gateway.
func TestDebugAdapterAttached(t *testing.T) {
	t.Parallel()
	adapter := exec.Command(crankBin, "crank-adapter", "--debug", "rest")
	stdout, err := adapter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := adapter.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- adapter.Wait() }()
	t.Cleanup(func() { _ = adapter.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, sdk.ReattachEnv+"='") {
		t.Fatalf("the adapter printed %q (%v)", line, err)
	}
	env := sdk.ReattachEnv + "=" + strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, sdk.ReattachEnv+"=")), "'")

	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "10s", ""), Env: []string{env}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "User 7") {
		t.Fatalf("call: %v %v", err, res)
	}
	if a := g.adapter("rest"); a.PID != adapter.Process.Pid || a.Starts != 1 {
		t.Errorf("the gateway runs %+v, want the debug process %d", a, adapter.Process.Pid)
	}
	_ = cs.Close()
	g.stop()
	select {
	case err := <-exited:
		t.Fatalf("the debug adapter stopped with the gateway: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := adapter.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the debug adapter's exit on an interrupt: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the debug adapter did not stop on an interrupt")
	}
}

func TestReloadKeepsAdaptersAndSessions(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	ops := opsFile(t, up, "5s", "")
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	// No keep-alive: a reload closes the old server's idle connections, and
	// a POST racing that close would fail for reasons unrelated to Crank.
	httpc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL, HTTPClient: httpc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}}); err != nil || res.IsError {
		t.Fatalf("before reload: %v %v", err, res)
	}
	before := g.adapter("rest")

	extra := `  - name: get_user_again
    description: The same call under a new name.
    adapter: rest
    config: {method: GET, url: "` + up.URL + `/users/{id}"}
`
	g.reload(gatewayOptions{Operations: ops + extra})

	// The same session keeps working and sees the new tool.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Error("no tools/list_changed notification after the reload")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user_again", Arguments: map[string]any{"id": 5}})
	if err != nil || res.IsError {
		t.Fatalf("after reload: %v %+v", err, res)
	}
	after := g.adapter("rest")
	if after.PID != before.PID || after.Starts != before.Starts {
		t.Fatalf("reload restarted the adapter: before %+v after %+v", before, after)
	}
}

// TestBadOperationsFile: a bad operations file fails the load with the
// file, the line, the operation and the field. `crank validate` reports what the
// file itself shows; what only its adapter can check fails `crank run`.
func TestBadOperationsFile(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, command, ops, want string }{
		{"schema", "validate", `operations: [{name: a, description: d, adapter: rest, input_schema: {type: array}, config: {method: GET, url: "http://127.0.0.1:1/x"}}]`,
			`ops.yaml:1: operation "a": /input_schema: must have "type": "object"`},
		{"adapter config", "run", `operations: [{name: a, description: d, adapter: rest, config: {method: FETCH, url: "http://127.0.0.1:1/x"}}]`,
			`ops.yaml:1: operation "a": /config/method:`},
		{"unknown adapter", "validate", `operations: [{name: a, description: d, adapter: carrier_pigeon, config: {}}]`,
			`ops.yaml:1: operation "a": /adapter: no adapter named "carrier_pigeon"`},
		{"misspelled field", "validate", "operations:\n  - name: a\n    descripton: d\n    adapter: rest\n    config: {method: GET, url: \"http://127.0.0.1:1/x\"}\n",
			`ops.yaml:3: operation "a": /descripton: unknown field (did you mean "description"?)`},
		{"syntax", "validate", "operations: [", `ops.yaml: not valid YAML or JSON`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ops.yaml"), c.ops)
			out := loadFailure(t, dir, c.command)
			// Caddy logs the error as JSON, so quotes come escaped.
			if !strings.Contains(out, strings.ReplaceAll(c.want, `"`, `\"`)) {
				t.Fatalf("want %q in:\n%s", c.want, out)
			}
		})
	}
}

// loadFailure runs `crank <command>` (validate or run) on a Caddyfile
// serving dir/ops.yaml with an embedded etcd, expects the config to fail,
// and returns the output.
func loadFailure(t testing.TB, dir, command string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, "Caddyfile"), fmt.Sprintf(`{
	admin off
	crank {
		embedded_etcd {
			data_dir %s
			client_url http://127.0.0.1:%d
			peer_url http://127.0.0.1:%d
		}
	}
}
http://127.0.0.1:%d {
	crank /mcp ops.yaml
}
`, filepath.Join(dir, "etcd"), freePort(t), freePort(t), freePort(t)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, crankBin, command, "--config", "Caddyfile", "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("crank %s accepted the config:\n%s", command, out)
	}
	return string(out)
}
