package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newHarness serves a new adapter in the test process; its upstream
// sessions end with the test, before the test's upstreams close.
func newHarness(t *testing.T) *adaptertest.Harness {
	a := newAdapter()
	t.Cleanup(a.pool.closeAll)
	return adaptertest.New(t, a)
}

func toolNames(tools []sdk.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

func findTool(t *testing.T, tools []sdk.Tool, name string) sdk.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q in %v", name, toolNames(tools))
	return sdk.Tool{}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "prefix": "up_",
		"exclude": []string{"cr*", "env"}, "rename": map[string]string{"rpc_error": "protocol_error"}}})
	if err != nil || len(diags) > 0 {
		t.Fatalf("expand: %v %v", diags, err)
	}
	want := []string{"up_big", "up_caps", "up_echo", "up_elicit", "up_fail", "up_grow", "up_image", "up_logs", "up_protocol_error", "up_slow", "up_ticks"}
	if got := toolNames(tools); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	echo := findTool(t, tools, "up_echo")
	if echo.Title != "Echo" || echo.Description != "Echoes text." ||
		echo.Annotations.ReadOnly == nil || !*echo.Annotations.ReadOnly || echo.Annotations.Idempotent == nil {
		t.Errorf("echo tool: %+v", echo)
	}
	if string(echo.Meta) != `{"ui":{"resourceUri":"ui://echo/view.html","visibility":["model","app"]},"ui/resourceUri":"ui://echo/view.html"}` {
		t.Errorf("echo _meta: %s", echo.Meta)
	}
	var in, out map[string]any
	if json.Unmarshal(echo.InputSchema, &in) != nil || in["properties"].(map[string]any)["text"] == nil {
		t.Errorf("echo input schema: %s", echo.InputSchema)
	}
	if json.Unmarshal(echo.OutputSchema, &out) != nil || out["properties"].(map[string]any)["echo"] == nil {
		t.Errorf("echo output schema: %s", echo.OutputSchema)
	}
	var cfg map[string]any
	if json.Unmarshal(findTool(t, tools, "up_protocol_error").Config, &cfg) != nil || cfg["tool"] != "rpc_error" ||
		cfg["url"] != up.srv.URL || cfg["prefix"] != nil || cfg["rename"] != nil {
		t.Errorf("derived config: %v", cfg)
	}

	// include, and one tool as the entry itself.
	tools, diags, err = h.Expand(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "include": []string{"ech?", "image"}}})
	if err != nil || len(diags) > 0 || !slices.Equal(toolNames(tools), []string{"echo", "image"}) {
		t.Fatalf("include: %v %v %v", toolNames(tools), diags, err)
	}
	tools, diags, err = h.Expand(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "tool": "echo"}})
	if err != nil || len(diags) > 0 || len(tools) != 1 || tools[0].Name != "" || tools[0].Description != "Echoes text." {
		t.Fatalf("tool: %+v %v %v", tools, diags, err)
	}
}

func TestExpandErrors(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html>not MCP</html>"))
	}))
	t.Cleanup(garbage.Close)
	h := newHarness(t)
	for _, c := range []struct {
		name   string
		config map[string]any
		field  string
		has    []string
	}{
		{"collision", map[string]any{"url": up.srv.URL, "rename": map[string]string{"fail": "echo"}},
			"rename", []string{`"echo"`, `"fail"`, "both served as"}},
		{"no such tool", map[string]any{"url": up.srv.URL, "tool": "nope"}, "tool", []string{`has no tool "nope"`}},
		{"nothing selected", map[string]any{"url": up.srv.URL, "include": []string{"zz*"}}, "include", []string{"selects none of the 13 tools"}},
		{"garbage", map[string]any{"url": garbage.URL}, "url", []string{"listing the tools of mcp " + garbage.Listener.Addr().String() + " failed: cannot open an MCP session"}},
		{"garbage over stdio", map[string]any{"command": "sh", "args": []string{"-c", "echo '<html>not MCP</html>'; exec sleep 30"}},
			"command", []string{"listing the tools of mcp stdio sh failed: cannot open an MCP session", "invalid character '<'"}},
		{"no such command", map[string]any{"command": "/nonexistent/mcp-server"}, "command", []string{"listing the tools of mcp stdio mcp-server failed: cannot open an MCP session", "no such file"}},
		{"down", map[string]any{"url": "http://127.0.0.1:1/mcp?key=s3cret"}, "url", []string{"listing the tools of mcp 127.0.0.1:1 failed: cannot open an MCP session", "connection refused"}},
	} {
		_, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: c.config, Timeout: 5 * time.Second})
		if err != nil || len(diags) != 1 || diags[0].Field != c.field {
			t.Errorf("%s: %+v %v", c.name, diags, err)
			continue
		}
		for _, s := range c.has {
			if !strings.Contains(diags[0].Message, s) {
				t.Errorf("%s: %q lacks %q", c.name, diags[0].Message, s)
			}
		}
		if strings.Contains(diags[0].Message, "s3cret") {
			t.Errorf("%s: the message quotes the URL's query: %q", c.name, diags[0].Message)
		}
		t.Logf("%s: %s", c.name, diags[0].Message)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		config string
		field  string
	}{
		{`{}`, "url"},
		{`{"url": "ftp://x"}`, "url"},
		{`{"url": "http://x", "command": "srv"}`, "command"},
		{`{"url": "http://x", "args": ["-v"]}`, "args"},
		{`{"url": "http://x", "headers": {"Host": "y"}}`, "headers.Host"},
		{`{"url": "http://x", "headers": {"Mcp-Session-Id": "y"}}`, "headers.Mcp-Session-Id"},
		{`{"command": "srv", "headers": {"A": "b"}}`, "headers"},
		{`{"url": "http://x", "include": ["[a"]}`, "include[0]"},
		{`{"url": "http://x", "tool": "a", "prefix": "p_"}`, "tool"},
		{`{"url": "http://x", "urls": "y"}`, "urls"},
	} {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: c.config})
		if err != nil || len(diags) == 0 || diags[0].Field != c.field {
			t.Errorf("%s: %+v %v, want an error on %s", c.config, diags, err, c.field)
		}
	}
	if diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: `{"command": "./srv", "args": ["-v"], "env": {"A": "1"}, "prefix": "x_"}`}); err != nil || len(diags) > 0 {
		t.Errorf("valid command config: %+v %v", diags, err)
	}
}

// call invokes the upstream tool name through the adapter.
func call(t *testing.T, h *adaptertest.Harness, base map[string]any, name, args string, timeout time.Duration) (*sdk.Result, *sdk.UpstreamError) {
	t.Helper()
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: withTool(base, name), Args: args, Timeout: timeout})
	if err != nil {
		t.Fatalf("%s: adapter error %v", name, err)
	}
	return res, ue
}

func TestInvoke(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{false, true} {
		up := newHTTPUpstream(t, stateless)
		h := newHarness(t)
		base := map[string]any{"url": up.srv.URL}

		res, ue := call(t, h, base, "echo", `{"text": "hi"}`, 5*time.Second)
		if ue != nil || string(res.Structured) != `{"echo":"hi"}` || res.Text != `{"echo":"hi"}` {
			t.Errorf("stateless %v: echo: %+v %+v", stateless, res, ue)
		}
		res, ue = call(t, h, base, "image", `{}`, 5*time.Second)
		if ue != nil || res.Text != "a tiny image" || res.Structured != nil ||
			string(res.Content) != `[{"type":"image","mimeType":"image/png","data":"UE5H"},{"type":"text","text":"a tiny image"}]` {
			t.Errorf("image: %s %s %+v", res.Content, res.Structured, ue)
		}
		_, ue = call(t, h, base, "fail", `{}`, 5*time.Second)
		if ue == nil || ue.Kind != sdk.KindUpstreamStatus || ue.Message != "no such account" || ue.Upstream != "mcp "+up.srv.Listener.Addr().String() {
			t.Errorf("fail: %+v", ue)
		}
		_, ue = call(t, h, base, "rpc_error", `{}`, 5*time.Second)
		if ue == nil || ue.Kind != sdk.KindUpstreamStatus || ue.Status != "-32602" || ue.Message != "bad things" || !ue.Rejected {
			t.Errorf("rpc_error: %+v", ue)
		}
		_, ue = call(t, h, base, "slow", `{}`, 200*time.Millisecond)
		if ue == nil || ue.Kind != sdk.KindTimeout {
			t.Errorf("slow: %+v", ue)
		}
		_, ue = call(t, h, base, "missing", `{}`, 5*time.Second)
		if ue == nil || ue.Kind != sdk.KindUpstreamStatus || !strings.Contains(ue.Message, "missing") {
			t.Errorf("missing tool: %+v", ue)
		}
	}
}

// An entry held to egress rules (a catalog's) opens its upstream session
// only where they allow, checked on the address dialled: rules naming the
// upstream's address reach it; under * the loopback upstream is refused,
// naming the address, and is never connected to.
func TestEgress(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	base := map[string]any{"url": up.srv.URL}
	c := adaptertest.Call{Config: withTool(base, "echo"), Args: `{"text": "hi"}`, Timeout: 5 * time.Second, Egress: []string{up.srv.URL + "/"}}
	if _, ue, err := h.Invoke(ctxT(t), c); err != nil || ue != nil {
		t.Fatalf("named: %v %+v", err, ue)
	}
	c.Egress = []string{"*"}
	_, ue, err := h.Invoke(ctxT(t), c)
	if err != nil || ue == nil || !strings.Contains(ue.Message, "egress refused") || !strings.Contains(ue.Message, "is a loopback address") {
		t.Fatalf("under *: %v %+v", err, ue)
	}
}

func TestHeadersAndNoClientToken(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	base := map[string]any{"url": up.srv.URL, "headers": map[string]string{"Authorization": "Bearer upstream-token"}}
	if _, ue := call(t, h, base, "echo", `{"text": "x"}`, 5*time.Second); ue != nil {
		t.Fatal(ue)
	}
	var seen []string
	up.auth.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if !slices.Equal(seen, []string{"Bearer upstream-token"}) {
		t.Errorf("the upstream saw Authorization %v, want only the configured one", seen)
	}
}

func TestSessionSharedAndReopened(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	base := map[string]any{"url": up.srv.URL}
	for i := 0; i < 3; i++ {
		if _, ue := call(t, h, base, "echo", `{"text": "x"}`, 5*time.Second); ue != nil {
			t.Fatal(ue)
		}
	}
	if n := up.inits.Load(); n != 1 {
		t.Fatalf("%d sessions opened for three calls, want 1", n)
	}
	// A restarted upstream no longer knows the session (404): the call is
	// sent again on a new session, transparently.
	up.restart()
	if res, ue := call(t, h, base, "echo", `{"text": "again"}`, 5*time.Second); ue != nil || string(res.Structured) != `{"echo":"again"}` {
		t.Fatalf("after restart: %+v %+v", res, ue)
	}
	if n := up.inits.Load(); n != 2 {
		t.Errorf("%d sessions opened, want 2", n)
	}
}

func stdioConfig(t *testing.T) map[string]any {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"command": exe, "env": map[string]string{serverEnv: "stdio"}}
}

func TestStdio(t *testing.T) {
	t.Setenv("CRANK_TEST_SECRET", "gateway-secret") // must not reach the child
	h := newHarness(t)
	base := stdioConfig(t)
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: base, Timeout: 10 * time.Second})
	if err != nil || len(diags) > 0 || len(tools) != 13 {
		t.Fatalf("expand: %v %v %v", toolNames(tools), diags, err)
	}
	res, ue := call(t, h, base, "echo", `{"text": "hi"}`, 10*time.Second)
	if ue != nil || string(res.Structured) != `{"echo":"hi"}` {
		t.Fatalf("echo: %+v %+v", res, ue)
	}
	res, ue = call(t, h, base, "env", `{}`, 10*time.Second)
	if ue != nil {
		t.Fatal(ue)
	}
	for _, name := range strings.Split(res.Text, ",") {
		if !slices.Contains(append(keptEnv, serverEnv), name) && !strings.HasPrefix(name, "LC_") {
			t.Errorf("the child got %s from the environment", name)
		}
	}
	// The server exits mid-call: a clear error, and the next call starts
	// it again.
	_, ue = call(t, h, base, "crash", `{}`, 10*time.Second)
	if ue == nil || ue.Kind != sdk.KindTransport || !ue.Retryable || ue.Upstream != "mcp stdio "+lastElem(base["command"].(string)) {
		t.Fatalf("crash: %+v", ue)
	}
	if res, ue = call(t, h, base, "echo", `{"text": "back"}`, 10*time.Second); ue != nil || string(res.Structured) != `{"echo":"back"}` {
		t.Fatalf("after crash: %+v %+v", res, ue)
	}
}

func lastElem(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// TestExecutable launches the adapter's executable as the gateway does.
func TestExecutable(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := adaptertest.Build(t, "./cmd/crank-adapter-mcp").Start(t)
	if d, err := h.Describe(ctxT(t)); err != nil || d.Name != Name {
		t.Fatalf("describe: %+v %v", d, err)
	}
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "include": []string{"echo"}}})
	if err != nil || len(diags) > 0 || len(tools) != 1 {
		t.Fatalf("expand: %+v %v %v", tools, diags, err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: tools[0].Config, Args: `{"text": "hi"}`, Timeout: 5 * time.Second})
	if err != nil || ue != nil || string(res.Structured) != `{"echo":"hi"}` {
		t.Fatalf("invoke: %+v %+v %v", res, ue, err)
	}
}

// TestCancel: the client's cancellation reaches the upstream as
// notifications/cancelled, which ends the upstream's handler.
func TestCancel(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	ctx, cancel := context.WithCancel(ctxT(t))
	// Cancel once the upstream has the call: a timer could fire before
	// the call left a loaded machine.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			time.AfterFunc(100*time.Millisecond, cancel)
		}
		up.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close) // after the adapter's, which holds a stream open
	h := newHarness(t)
	_, ue, err := h.Invoke(ctx, adaptertest.Call{Config: map[string]any{"url": front.URL, "tool": "slow"}, Args: `{}`, Timeout: 10 * time.Second})
	if err == nil && ue == nil {
		t.Fatal("a cancelled call succeeded")
	}
	select {
	case <-up.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream did not see the call cancelled")
	}
}
