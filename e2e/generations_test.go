package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
)

// generationsOps has window tools (windowOperations: an OpenAI chat
// stream among them) over the stream upstream, a unary tool, session
// families and a job family (familiesOps) over the feed upstream.
func generationsOps(stream, feed string) string {
	return windowOperations(stream) + strings.TrimPrefix(familiesOps(feed), "\noperations:\n") + fmt.Sprintf(`
  - name: quick
    description: A quick request.
    adapter: rest
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%s/job", query: [ms]}
`, feed)
}

// generationTools is the number of tools of generationsOps: three
// windows, two session families of three tools, a job family of four, one
// unary tool.
const generationTools = 3 + 2*3 + 4 + 1

// generation is one protocol generation's client setup.
type generation struct {
	name    string
	version string                    // what the go-sdk client negotiates
	opts    *mcp.ClientSessionOptions // nil: the client's own choice
}

var generations = []generation{
	{"sessionless", "2026-07-28", nil},
	{"sessions", "2025-11-25", sessionProtocol},
}

// One endpoint in its default mode, with SSE and with JSON answers, serves
// both generations at once: a go-sdk client of each (the go-sdk 1.8 client
// negotiates 2026-07-28 by itself) and the TypeScript SDK client (a
// session) list and call every kind of tool — a window streaming progress
// with string and integer tokens, a unary tool, a session family, a job
// family — within the agent's quotas; the job is also a task (core tasks in
// a session, the tasks extension sessionlessly); each is audited under its
// agent; a sessionless caller without an agent cannot start agent-scoped
// work; Mcp-Method and Mcp-Name must match the body; a disallowed Origin
// gets 403 in either generation.
func TestBothGenerations(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	for _, mode := range []struct{ name, handler string }{{"sse", ""}, {"json", "json_response"}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			stream, feed := streamUpstream(t), newFeedUpstream(t)
			g := startGateway(t, gatewayOptions{Operations: generationsOps(stream.URL, feed.URL),
				Handler: "agent_header X-Agent-Id\n\t\tallowed_origins https://app.example.com\n\t\tquotas {\n\t\t\tmax_sessions_per_agent 1\n\t\t}\n\t\t" + mode.handler})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			// The TypeScript client runs beside the go-sdk clients.
			var ts struct {
				out []byte
				err error
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				ts.out, ts.err = tsClient(ctx, g.MCPURL, `[
					{"op":"listTools"},
					{"op":"callTool","name":"chat","arguments":{"messages":[{"role":"user","content":"hi"}]},"progress":true},
					{"op":"callTool","name":"quick","arguments":{"ms":1}},
					{"op":"callTool","name":"follow_start"},
					{"op":"callTool","name":"follow_poll","arguments":{"session_id":"{{3.session_id}}","max_items":2},"until":{"field":"has_more","equals":true}},
					{"op":"callTool","name":"follow_stop","arguments":{"session_id":"{{3.session_id}}"}},
					{"op":"callTool","name":"export_start","arguments":{"ms":50}},
					{"op":"callTool","name":"export_status","arguments":{"job_id":"{{6.job_id}}"},"until":{"field":"status","equals":"succeeded"}}
				]`)
			})

			for _, gen := range generations {
				t.Run(gen.name, func(t *testing.T) {
					agent := "agent-" + gen.name
					var progress progressLog
					cs := connectGeneration(ctx, t, g, gen, agent, &progress)
					tools, err := cs.ListTools(ctx, nil)
					if err != nil || len(tools.Tools) != generationTools {
						t.Fatalf("tools/list: %v %v", tools, err)
					}
					callChat(ctx, t, cs, &progress, "tok-"+gen.name)
					callChat(ctx, t, cs, &progress, 42)
					if out := callOK(t, cs, "quick", map[string]any{"ms": 1}); out["rows"] != 1.0 {
						t.Errorf("quick: %v", out)
					}
					started := callOK(t, cs, "follow_start", nil)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "follow_start"})
					if err != nil || !res.IsError || !strings.Contains(textOf(res), "max_sessions_per_agent") {
						t.Errorf("a second follow_start over the agent's quota: %v %+v", err, res)
					}
					waitFor(t, "feed items", func() bool {
						return len(callOK(t, cs, "follow_poll", map[string]any{"session_id": started["session_id"]})["items"].([]any)) > 0
					})
					callOK(t, cs, "follow_stop", map[string]any{"session_id": started["session_id"]})
					job := callOK(t, cs, "export_start", map[string]any{"ms": 50})
					waitFor(t, "the export", func() bool {
						return callOK(t, cs, "export_status", map[string]any{"job_id": job["job_id"]})["status"] == "succeeded"
					})
					if out := callOK(t, cs, "export_result", map[string]any{"job_id": job["job_id"]}); fmt.Sprint(out["result"]) != "map[rows:50]" {
						t.Errorf("export_result: %v", out)
					}
					// The job as a task, as each generation has it.
					taskOf(t, g.MCPURL, gen.version, agent)
					if !strings.Contains(g.log.String(), `"agent":"header:`+agent+`"`) {
						t.Errorf("no audit record of agent %s", agent)
					}
				})
			}

			// Without an agent, a sessionless caller cannot start
			// agent-scoped work; a session runs as itself.
			anon := rawGeneration(t, g.MCPURL, "2026-07-28", "")
			anon.Header.Set("Mcp-Name", "follow_start")
			var res mcptest.CallResult
			anon.OK("tools/call", newGenParams("2026-07-28", false, "name", "follow_start"), &res)
			if !res.IsError || !strings.Contains(res.Text(), "names no agent") {
				t.Errorf("anonymous sessionless follow_start: %+v", res)
			}
			// Through Caddy too, the headers must match the body (-32020),
			// and a 2026-07-28 request cannot name a session (-32600).
			anon.Header.Set("Mcp-Name", "quick")
			anon.Fails("tools/call", newGenParams("2026-07-28", false, "name", "follow_start"), -32020, "Mcp-Name")
			anon.Header.Set("Mcp-Name", "follow_start")
			anon.Header.Set("Mcp-Method", "tools/list")
			anon.Fails("tools/call", newGenParams("2026-07-28", false, "name", "follow_start"), -32020, "Mcp-Method")
			sess := rawGeneration(t, g.MCPURL, "2025-11-25", "")
			anon.Header.Set("Mcp-Method", "tools/call")
			anon.Header.Set("Mcp-Session-Id", sess.Session)
			anon.Fails("tools/call", newGenParams("2026-07-28", false, "name", "follow_start"), -32600, "no Mcp-Session-Id")
			var own mcptest.CallResult
			sess.OK("tools/call", map[string]any{"name": "follow_start"}, &own)
			if own.IsError {
				t.Errorf("anonymous session's follow_start: %+v", own)
			}

			// Origin: 403 in either generation.
			for _, gen := range generations {
				c := rawGeneration(t, g.MCPURL, gen.version, "agent-origin")
				c.Header.Set("Origin", "https://evil.example.com")
				c.Header.Set("Mcp-Method", "tools/list")
				if r := c.Call("tools/list", newGenParams(gen.version, false)); r.HTTPStatus != http.StatusForbidden {
					t.Errorf("%s from a disallowed origin: %d %s", gen.name, r.HTTPStatus, r.Body)
				}
			}

			wg.Wait()
			checkTSGeneration(t, ts.out, ts.err)
		})
	}
}

// connectGeneration connects a go-sdk client of gen as agent, its progress
// notifications going to progress.
func connectGeneration(ctx context.Context, t *testing.T, g *gateway, gen generation, agent string, progress *progressLog) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "generations", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.handler})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
		HTTPClient: &http.Client{Transport: headerTransport{"X-Agent-Id": agent}}}, gen.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != gen.version {
		t.Fatalf("negotiated %s, want %s", got, gen.version)
	}
	if (cs.ID() == "") != (gen.version >= "2026-07-28") {
		t.Fatalf("session id %q at %s", cs.ID(), gen.version)
	}
	return cs
}

// rawGeneration is a raw JSON-RPC client of the protocol version (a
// session for 2025-11-25), as agent ("" for none).
func rawGeneration(t *testing.T, url, version, agent string) *mcptest.Client {
	c := &mcptest.Client{T: t, URL: url, Header: http.Header{}}
	if agent != "" {
		c.Header.Set("X-Agent-Id", agent)
	}
	if version >= "2026-07-28" {
		c.Header.Set("MCP-Protocol-Version", version)
		c.Header.Set("Mcp-Method", "tools/call")
		return c
	}
	c.Initialize(version)
	return c
}

// newGenParams are params of the sessionless protocol (for an older
// version: plain params), declaring the tasks extension or not.
func newGenParams(version string, tasks bool, kv ...any) map[string]any {
	p := map[string]any{}
	if version >= "2026-07-28" {
		caps := map[string]any{}
		if tasks {
			caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
		}
		p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": version,
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"}}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// taskOf runs export as a task of the generation: core tasks in a
// 2025-11-25 session (params.task, tasks/get, tasks/result), the tasks
// extension sessionlessly (declared per request, tasks/get inlining the
// result).
func taskOf(t *testing.T, url, version, agent string) {
	t.Helper()
	c := rawGeneration(t, url, version, agent)
	if version < "2026-07-28" {
		task := c.StartTask("export_start", map[string]any{"ms": 30})
		waitFor(t, "the task", func() bool { return c.GetTask(task.TaskID).Status == "completed" })
		var res mcptest.CallResult
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if res.IsError || res.StructuredContent["rows"] != 30.0 {
			t.Errorf("tasks/result: %+v", res)
		}
		return
	}
	var created struct {
		ResultType, TaskID, Status string
	}
	c.Header.Set("Mcp-Method", "tools/call")
	c.Header.Set("Mcp-Name", "export_start")
	c.OK("tools/call", newGenParams(version, true, "name", "export_start", "arguments", map[string]any{"ms": 30}), &created)
	if created.ResultType != "task" || created.TaskID == "" {
		t.Fatalf("CreateTaskResult: %+v", created)
	}
	c.Header.Set("Mcp-Method", "tasks/get")
	c.Header.Del("Mcp-Name")
	var got struct {
		Status string
		Result *mcptest.CallResult
	}
	waitFor(t, "the extension task", func() bool {
		c.OK("tasks/get", newGenParams(version, true, "taskId", created.TaskID), &got)
		return got.Status == "completed"
	})
	if got.Result == nil || got.Result.IsError || got.Result.StructuredContent["rows"] != 30.0 {
		t.Errorf("tasks/get of the completed task: %+v", got)
	}
}

// tsClient runs e2e/ts/client.mjs (for a goroutine: it reports instead of
// failing the test), with env (NAME=value) added to its environment.
func tsClient(ctx context.Context, url, script string, env ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "client.mjs"), url, script)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("client.mjs: %v\n%s", err, stderr.String())
	}
	return out, nil
}

// checkTSGeneration checks the TypeScript client's run of
// TestBothGenerations: a 2025-11-25 session, every step ok, the window's
// chunks as progress.
func checkTSGeneration(t *testing.T, out []byte, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		ProtocolVersion string
		SessionID       string
		Steps           []struct {
			OK     bool
			Result struct {
				Tools    []any
				Progress []struct{ Message string }
				IsError  bool
			}
			Error struct{ Message string }
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 8 {
		t.Fatalf("TypeScript client output: %v\n%s", err, out)
	}
	if run.ProtocolVersion != "2025-11-25" || run.SessionID == "" {
		t.Errorf("TypeScript client: version %q session %q, want a 2025-11-25 session", run.ProtocolVersion, run.SessionID)
	}
	for i, s := range run.Steps {
		if !s.OK || s.Result.IsError {
			t.Errorf("TypeScript step %d failed: %s\n%s", i, s.Error.Message, out)
		}
	}
	var chunks []string
	for _, p := range run.Steps[1].Result.Progress {
		chunks = append(chunks, p.Message)
	}
	if len(run.Steps[0].Result.Tools) != generationTools || strings.Join(chunks, "|") != strings.Join(chatChunks, "|") {
		t.Errorf("TypeScript client: %d tools, progress %q", len(run.Steps[0].Result.Tools), chunks)
	}
}
