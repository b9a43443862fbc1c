package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpUpstreamEnv, set in a child's environment, makes this test binary a
// go-sdk MCP server over stdio (TestMain calls serveMCPUpstream first):
// the upstream the gateway's mcp adapter starts as a command.
const mcpUpstreamEnv = "CRANK_E2E_MCP_UPSTREAM"

// mcpLingerEnv makes that server stay when its stdin closes.
const mcpLingerEnv = "CRANK_E2E_MCP_LINGER"

// serveMCPUpstream serves mcpUpstreamServer over stdio and exits, when
// this process was started as an upstream.
func serveMCPUpstream() {
	if os.Getenv(mcpUpstreamEnv) != "stdio" {
		return
	}
	err := mcpUpstreamServer().Run(context.Background(), &mcp.StdioTransport{})
	if os.Getenv(mcpLingerEnv) != "" {
		select {} // a server that outlives its input: only a signal ends it
	}
	if err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

type upEchoIn struct {
	Text string `json:"text"`
}

type upEchoOut struct {
	Echo string `json:"echo"`
	PID  int    `json:"pid"`
}

type upTicksIn struct {
	N int `json:"n"`
}

// mcpUpstreamServer is a go-sdk MCP server with the tools the gateway
// tests federate: a structured echo, every kind of content block, a tool
// that reports progress, and one that ends its process mid-call.
func mcpUpstreamServer() *mcp.Server { return mcpUpstreamServerWith(nil) }

// mcpUpstreamServerWith is mcpUpstreamServer with the server's options.
func mcpUpstreamServerWith(opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-upstream", Version: "1"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text, with the server's process id."},
		func(_ context.Context, _ *mcp.CallToolRequest, in upEchoIn) (*mcp.CallToolResult, upEchoOut, error) {
			return nil, upEchoOut{Echo: in.Text, PID: os.Getpid()}, nil
		})
	raw := func(name, desc string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}}, h)
	}
	raw("blocks", "Answers a text, an image, an embedded resource and a resource link.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "four blocks"},
			&mcp.ImageContent{Data: []byte("PNG-bytes"), MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "embedded text"}},
			&mcp.ResourceLink{URI: "file:///report.pdf", Name: "report", MIMEType: "application/pdf"},
		}}, nil
	})
	raw("fail", "Fails as a tool.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such account"}}}, nil
	})
	raw("crash", "Ends the server process in the middle of the call.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ticks", Description: "Reports n progress notifications, then answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in upTicksIn) (*mcp.CallToolResult, upEchoOut, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= in.N; i++ {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf(`{"tick":%d}`, i)})
				}
			}
			return nil, upEchoOut{Echo: fmt.Sprintf("%d ticks", in.N), PID: os.Getpid()}, nil
		})
	addLogsTool(s) // mcp_upstream_logs_test.go
	addAskTool(s)  // mcp_upstream_ask_test.go
	return s
}

// serverEverything returns node and the entry point of server-everything
// (from e2e/ts), skipping the test where the TypeScript client cannot run.
func serverEverything(t *testing.T) (node, js string) {
	t.Helper()
	requireTSClient(t)
	js = filepath.Join(repoRoot, "e2e", "ts", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(js); err != nil {
		t.Fatalf("server-everything is missing: run `make ts-deps`: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	return node, js
}

// mcpUpstreamOps federates server-everything (over stdio, from e2e/ts)
// and this binary's go-sdk server (over stdio) with extra entries.
func mcpUpstreamOps(t *testing.T, extra string) string {
	t.Helper()
	node, js := serverEverything(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
operations:
  - name: everything
    description: server-everything over stdio.
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      args: [%q, stdio]
      prefix: ev_
      include: [echo, get-sum, get-tiny-image, get-resource-reference, get-structured-content, trigger-long-running-operation]
  - name: gosdk
    description: A go-sdk server over stdio.
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      env: {%s: stdio}
      prefix: go_
%s`, node, js, self, mcpUpstreamEnv, extra)
}

// TestMCPUpstreamGoSDKClient federates two real MCP servers through the
// built gateway and drives them with the go-sdk client: their tools are
// listed with their schemas, calls pass through, and an upstream that
// dies mid-call is a clear tool error after which the next call works.
func TestMCPUpstreamGoSDKClient(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gatewayOptions{Operations: mcpUpstreamOps(t, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var progress progressLog
	cs := g.connectProgress(ctx, &progress)

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tools := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		tools[tool.Name] = tool
	}
	for _, want := range []string{"ev_echo", "ev_get-sum", "ev_get-structured-content", "ev_trigger-long-running-operation",
		"go_echo", "go_blocks", "go_crash", "go_fail", "go_ticks"} {
		if !slices.Contains(names, want) {
			t.Fatalf("no tool %s in %v", want, names)
		}
	}
	if sc := tools["ev_get-structured-content"]; sc.OutputSchema == nil || sc.Annotations == nil || !sc.Annotations.ReadOnlyHint {
		t.Errorf("ev_get-structured-content: %+v", sc)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, g.log.String())
		}
		return res
	}
	if res := call("ev_echo", map[string]any{"message": "hello"}); res.IsError || !strings.Contains(textOf(res), "hello") {
		t.Errorf("ev_echo: %+v", res)
	}
	if res := call("ev_get-sum", map[string]any{"a": 2, "b": 3}); res.IsError || !strings.Contains(textOf(res), "5") {
		t.Errorf("ev_get-sum: %+v", res)
	}
	res := call("go_echo", map[string]any{"text": "hi"})
	var echo upEchoOut
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || json.Unmarshal(b, &echo) != nil || echo.Echo != "hi" || echo.PID == 0 {
		t.Fatalf("go_echo: %s %+v", b, res)
	}
	// Content blocks of every kind reach the client as the upstream sent them.
	res = call("go_blocks", nil)
	if len(res.Content) != 4 || res.IsError || res.StructuredContent != nil {
		t.Fatalf("go_blocks: %+v", res)
	}
	if c, ok := res.Content[0].(*mcp.TextContent); !ok || c.Text != "four blocks" {
		t.Errorf("go_blocks[0]: %#v", res.Content[0])
	}
	if c, ok := res.Content[1].(*mcp.ImageContent); !ok || string(c.Data) != "PNG-bytes" || c.MIMEType != "image/png" {
		t.Errorf("go_blocks[1]: %#v", res.Content[1])
	}
	if c, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || c.Resource.URI != "file:///notes.txt" || c.Resource.Text != "embedded text" {
		t.Errorf("go_blocks[2]: %#v", res.Content[2])
	}
	if c, ok := res.Content[3].(*mcp.ResourceLink); !ok || c.URI != "file:///report.pdf" || c.Name != "report" {
		t.Errorf("go_blocks[3]: %#v", res.Content[3])
	}
	res = call("ev_get-tiny-image", nil)
	if !slices.ContainsFunc(res.Content, func(c mcp.Content) bool {
		im, ok := c.(*mcp.ImageContent)
		return ok && im.MIMEType == "image/png" && len(im.Data) > 0
	}) {
		t.Errorf("ev_get-tiny-image: %+v", res)
	}
	res = call("ev_get-resource-reference", map[string]any{"resourceType": "Blob", "resourceId": 2})
	if !slices.ContainsFunc(res.Content, func(c mcp.Content) bool {
		r, ok := c.(*mcp.EmbeddedResource)
		return ok && r.Resource != nil && len(r.Resource.Blob) > 0
	}) {
		t.Errorf("ev_get-resource-reference: %+v", res)
	}
	// The upstream's progress of a unary call reaches the client with the
	// client's own token, before the result.
	params := &mcp.CallToolParams{Name: "go_ticks", Arguments: map[string]any{"n": 3}}
	params.SetProgressToken("tok-unary")
	if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("go_ticks: %v %+v", err, res)
	}
	got := progress.take(3)
	if len(got) != 3 {
		t.Fatalf("%d progress notifications, want 3", len(got))
	}
	for i, p := range got {
		if p.ProgressToken != "tok-unary" || p.Progress != float64(i+1) || p.Total != 3 || p.Message != fmt.Sprintf(`{"tick":%d}`, i+1) {
			t.Errorf("progress %d: %+v", i, p)
		}
	}
	if res := call("go_fail", nil); !res.IsError || !strings.Contains(textOf(res), "no such account") {
		t.Errorf("go_fail: %+v", res)
	}

	// The upstream process dies in the middle of a call: a clear error,
	// and the next call is served by a new process.
	res = call("go_crash", nil)
	if !res.IsError || !strings.Contains(textOf(res), "mcp stdio") {
		t.Fatalf("go_crash: want a tool error naming the upstream, got %+v", res)
	}
	t.Logf("go_crash: %s", textOf(res))
	res = call("go_echo", map[string]any{"text": "again"})
	var again upEchoOut
	b, _ = json.Marshal(res.StructuredContent)
	if res.IsError || json.Unmarshal(b, &again) != nil || again.Echo != "again" || again.PID == echo.PID {
		t.Fatalf("go_echo after the crash: %s %+v (first pid %d)", b, res, echo.PID)
	}
}

// TestMCPUpstreamTypeScriptClient drives the federated servers with the
// official TypeScript SDK client.
func TestMCPUpstreamTypeScriptClient(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gatewayOptions{Operations: mcpUpstreamOps(t, "")})
	out := runTSClient(t, g.MCPURL, `[
		{"op":"listTools"},
		{"op":"callTool","name":"ev_echo","arguments":{"message":"from ts"}},
		{"op":"callTool","name":"go_echo","arguments":{"text":"from ts"}},
		{"op":"callTool","name":"ev_get-structured-content","arguments":{"location":"Chicago"}},
		{"op":"callTool","name":"go_blocks","arguments":{}},
		{"op":"callTool","name":"ev_trigger-long-running-operation","arguments":{"duration":0.3,"steps":3},"progress":true}
	]`)
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				Tools   []struct{ Name string }
				Content []struct {
					Type, Text, Data, MimeType string
					Resource                   struct{ URI, Text string }
				}
				StructuredContent map[string]any
				IsError           bool
				Progress          []struct{ Progress, Total float64 }
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 6 {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	st := run.Steps
	var names []string
	for _, tool := range st[0].Result.Tools {
		names = append(names, tool.Name)
	}
	if !st[0].OK || !slices.Contains(names, "ev_echo") || !slices.Contains(names, "go_ticks") {
		t.Errorf("listTools: %v", names)
	}
	if r := st[1].Result; !st[1].OK || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, "from ts") {
		t.Errorf("ev_echo: %+v", st[1])
	}
	if r := st[2].Result; !st[2].OK || r.IsError || r.StructuredContent["echo"] != "from ts" {
		t.Errorf("go_echo: %+v", st[2])
	}
	if r := st[3].Result; !st[3].OK || r.IsError || r.StructuredContent["temperature"] == nil {
		t.Errorf("ev_get-structured-content: %+v", st[3])
	}
	var kinds []string
	for _, c := range st[4].Result.Content {
		kinds = append(kinds, c.Type)
	}
	if c := st[4].Result.Content; !st[4].OK || strings.Join(kinds, ",") != "text,image,resource,resource_link" ||
		c[1].MimeType != "image/png" || c[1].Data == "" || c[2].Resource.Text != "embedded text" {
		t.Errorf("go_blocks: %+v", st[4])
	}
	if r := st[5].Result; !st[5].OK || r.IsError || len(r.Progress) != 3 || r.Progress[2].Progress != 3 || r.Progress[2].Total != 3 {
		t.Errorf("ev_trigger-long-running-operation: %s", out)
	}
}

// mcpWindowOps adds windows over the progress of upstream tools.
const mcpWindowOps = `
  - name: ticks_window
    description: A window over the progress of the go-sdk server's ticks tool.
    adapter: mcp
    mode: window
    limits: {window_duration_ms: 30000, max_items: 50}
    config:
      command: %[1]q
      env: {%[2]s: stdio}
      tool: ticks
  - name: ticks_job
    description: The go-sdk server's ticks tool as a job Crank runs in the background.
    adapter: mcp
    mode: async_job
    scope: workspace
    config:
      command: %[1]q
      env: {%[2]s: stdio}
      tool: ticks
  - name: long_window
    description: A window over server-everything's long running operation.
    adapter: mcp
    mode: window
    limits: {window_duration_ms: 30000}
    config:
      command: %[3]q
      args: [%[4]q, stdio]
      tool: trigger-long-running-operation
`

// TestMCPUpstreamWindow reads windows over upstream progress streams: each
// upstream progress notification is an item, sent to the client as
// progress with its own token (a string from the go-sdk client, an
// integer from the TypeScript SDK), then the window's result.
func TestMCPUpstreamWindow(t *testing.T) {
	t.Parallel()
	node, _ := exec.LookPath("node")
	self, _ := os.Executable()
	js := filepath.Join(repoRoot, "e2e", "ts", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	g := startGateway(t, gatewayOptions{Operations: mcpUpstreamOps(t, fmt.Sprintf(mcpWindowOps, self, mcpUpstreamEnv, node, js))})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var progress progressLog
	cs := g.connectProgress(ctx, &progress)

	params := &mcp.CallToolParams{Name: "ticks_window", Arguments: map[string]any{"n": 4}}
	params.SetProgressToken("tok-ticks")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Items          []map[string]any
		WindowComplete bool   `json:"window_complete"`
		EndReason      string `json:"end_reason"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || json.Unmarshal(sc, &w) != nil || len(w.Items) != 4 || w.Items[3]["tick"] != float64(4) || !w.WindowComplete {
		t.Fatalf("ticks_window: %s %+v", sc, res)
	}
	got := progress.take(4)
	if len(got) != 4 {
		t.Fatalf("%d progress notifications, want 4", len(got))
	}
	for i, p := range got {
		if p.ProgressToken != "tok-ticks" || p.Progress != float64(i) || !strings.Contains(p.Message, fmt.Sprintf(`"tick":%d`, i+1)) {
			t.Errorf("progress %d: %+v", i, p)
		}
	}

	// An async job over a plain upstream call.
	job := callOK(t, cs, "ticks_job_start", map[string]any{"n": 2})["job_id"]
	waitFor(t, "the ticks job to succeed", func() bool {
		return callOK(t, cs, "ticks_job_status", map[string]any{"job_id": job})["status"] == "succeeded"
	})
	if r := callOK(t, cs, "ticks_job_result", map[string]any{"job_id": job}); r["ready"] != true || !strings.Contains(fmt.Sprint(r["result"]), "2 ticks") {
		t.Errorf("ticks_job_result: %v", r)
	}

	out := runTSClient(t, g.MCPURL, `[
		{"op":"callTool","name":"long_window","arguments":{"duration":0.3,"steps":3},"progress":true},
		{"op":"callTool","name":"ticks_window","arguments":{"n":2},"progress":true}
	]`)
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				StructuredContent struct {
					Items          []map[string]any
					WindowComplete bool `json:"window_complete"`
				}
				IsError  bool
				Progress []struct {
					Progress float64
					Message  string
				}
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 2 {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	long := run.Steps[0].Result
	if !run.Steps[0].OK || long.IsError || len(long.StructuredContent.Items) != 3 || long.StructuredContent.Items[2]["progress"] != float64(3) ||
		len(long.Progress) != 3 || !strings.Contains(long.Progress[2].Message, `"total":3`) {
		t.Errorf("long_window: %s", out)
	}
	ticks := run.Steps[1].Result
	if !run.Steps[1].OK || ticks.IsError || len(ticks.Progress) != 2 || ticks.Progress[1].Progress != 1 ||
		!strings.Contains(ticks.Progress[1].Message, `"tick":2`) {
		t.Errorf("ticks_window: %s", out)
	}
}

// demoMCPWindow reads the demo's window over its MCP server's countdown
// (demo/mcp.yaml): one item per upstream progress step; and one of its
// tools, its resources and its prompt.
func demoMCPWindow(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "countdown_window", Arguments: map[string]any{"from": 3, "step_ms": 10}})
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Items          []struct{ Remaining int }
		WindowComplete bool `json:"window_complete"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || json.Unmarshal(sc, &w) != nil || len(w.Items) != 3 || w.Items[0].Remaining != 3 || w.Items[2].Remaining != 1 || !w.WindowComplete {
		t.Fatalf("countdown_window: %s %+v", sc, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp_word_stats", Arguments: map[string]any{"text": "federated through crank"}})
	if err != nil || res.IsError {
		t.Fatalf("mcp_word_stats: %v %+v", err, res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"words":3`) {
		t.Fatalf("mcp_word_stats: %s", sc)
	}
	// Its resource, template and prompt, published by demo_mcp.
	for uri, want := range map[string]string{"demo://mcp/readme": "The demo MCP server", "demo://mcp/countdown/2": "2\n1\nliftoff"} {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(r.Contents) != 1 || !strings.Contains(r.Contents[0].Text, want) {
			t.Fatalf("resources/read %s: %v %+v", uri, err, r)
		}
	}
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "mcp_haiku", Arguments: map[string]string{"topic": "gateways"}})
	if err != nil || len(p.Messages) != 1 || !strings.Contains(p.Messages[0].Content.(*mcp.TextContent).Text, "haiku about gateways") {
		t.Fatalf("mcp_haiku: %v %+v", err, p)
	}
}
