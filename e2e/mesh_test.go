package e2e

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/crankmcp/crank/internal/meshtest"
	"github.com/crankmcp/crank/store/storetest"
)

// meshAgents is `meshctl list --json`: the healthy agents and their tool
// names.
func meshAgents(t *testing.T, reg *meshtest.Registry) map[string][]string {
	t.Helper()
	out, err := reg.Meshctl("list", "--json")
	if err != nil {
		return nil
	}
	var list struct {
		Agents []struct {
			ID    string `json:"id"`
			Tools []struct {
				Name string   `json:"name"`
				Tags []string `json:"tags"`
			} `json:"tools"`
		} `json:"agents"`
	}
	if json.Unmarshal([]byte(out), &list) != nil {
		return nil
	}
	agents := map[string][]string{}
	for _, a := range list.Agents {
		names := []string{}
		for _, tl := range a.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		agents[a.ID] = names
	}
	return agents
}

// meshCall is `meshctl call tool args` through the registry's proxy, or
// straight to agentURL when it is set; it returns the result's text.
func meshCall(t *testing.T, reg *meshtest.Registry, agentURL, tool string, args any) string {
	t.Helper()
	a, _ := json.Marshal(args)
	cmdArgs := []string{"call", tool, string(a), "--raw"}
	if agentURL != "" {
		cmdArgs = append(cmdArgs, "--agent-url", agentURL)
	}
	out, err := reg.Meshctl(cmdArgs...)
	if err != nil {
		t.Fatalf("meshctl %s: %v\n%s", strings.Join(cmdArgs, " "), err, out)
	}
	return out
}

// meshOps: a unary tool, a window over the feed, a session family and a
// job family (workspace-scoped: mesh callers name no agent).
func meshOps(base, extra string) string {
	return fmt.Sprintf(`
operations:
  - name: get_user
    description: Fetch a user by id.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: recent
    description: The feed's next three events.
    adapter: rest
    mode: window
    transport_behavior: server_stream
    limits: {window_duration_ms: 20000, max_items: 3}
    config: {method: GET, url: "%[1]s/feed"}
  - name: follow
    description: Follow the feed.
    adapter: rest
    mode: session
    scope: workspace
    limits: {max_items: 50, idle_timeout_ms: 60000}
    config: {method: GET, url: "%[1]s/feed"}
  - name: export
    description: A slow export.
    adapter: rest
    mode: async_job
    scope: workspace
    timeout: 2m
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%[1]s/job", query: [ms]}
%[2]s`, base, extra)
}

// Crank in an mcp-mesh (issue 37), with the real mcp-mesh binaries: Crank
// registers its endpoint with mcp-mesh-registry; meshctl list shows the
// agent and its capabilities; meshctl call, through the registry's proxy
// and with --agent-url, calls a unary tool, a window tool (its result), a
// session family and a job family; a tool added by a reload appears in
// the registry; a registry killed and started again has the agent again;
// of two replicas one sends the registration, and when it is killed the
// other takes over; a clean stop deregisters. One registry serves it all.
func TestMesh(t *testing.T) {
	t.Parallel()
	reg := meshtest.StartRegistry(t, 0)
	feed := newFeedUpstream(t)
	users := newUpstream(t)
	ops := meshOps(users.URL, "")
	ops = strings.Replace(ops, users.URL+"/feed", feed.URL+"/feed", 2)
	ops = strings.Replace(ops, users.URL+"/job", feed.URL+"/job", 1)

	// The fleet's public URL: a balancer in front of the replicas.
	lb := &balancer{}
	front := httptest.NewServer(&httputil.ReverseProxy{Transport: lb, Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "replica"
	}, FlushInterval: -1})
	t.Cleanup(front.Close)
	etcd := storetest.NewServer(t)
	opts := func(name, ops string) gatewayOptions {
		return gatewayOptions{Operations: ops, Crank: fmt.Sprintf(`etcd {
			%s
			op_timeout 2s
			owner_ttl 2s
			replica_name %s
		}`, etcd.Caddyfile(), name), Handler: fmt.Sprintf(`mesh {
			registry %s
			agent_id crank-e2e
			url %s/mcp
			tags crank e2e
			heartbeat_interval 1s
		}`, reg.URL(), front.URL)}
	}
	a := startGateway(t, opts("a", ops))
	lb.to(a)
	want := []string{"export_cancel", "export_result", "export_start", "export_status", "follow_poll", "follow_start", "follow_stop", "get_user", "recent"}
	waitFor(t, "meshctl list shows Crank's agent and its tools", func() bool {
		return slices.Equal(meshAgents(t, reg)["crank-e2e"], want)
	})

	// Calls through the registry's proxy and straight to the agent.
	for _, agentURL := range []string{"", front.URL} {
		if out := meshCall(t, reg, agentURL, "get_user", map[string]any{"id": 2}); !strings.Contains(out, "User 2") {
			t.Fatalf("get_user (agent url %q): %s", agentURL, out)
		}
		if out := meshCall(t, reg, agentURL, "recent", map[string]any{}); !strings.Contains(out, "event ") || !strings.Contains(out, "max_items") {
			t.Fatalf("recent (agent url %q): %s", agentURL, out)
		}
	}
	var started struct {
		SessionID string `json:"session_id"`
		JobID     string `json:"job_id"`
	}
	structured := func(out string) {
		t.Helper()
		var res struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if json.Unmarshal([]byte(out), &res) != nil || json.Unmarshal(res.StructuredContent, &started) != nil {
			t.Fatalf("no structured result: %s", out)
		}
	}
	structured(meshCall(t, reg, "", "follow_start", map[string]any{}))
	waitFor(t, "the session's items through meshctl", func() bool {
		return strings.Contains(meshCall(t, reg, "", "follow_poll", map[string]any{"session_id": started.SessionID}), "event 1")
	})
	if out := meshCall(t, reg, front.URL, "follow_stop", map[string]any{"session_id": started.SessionID}); !strings.Contains(out, `"session_id"`) || !strings.Contains(out, "stop") {
		t.Fatalf("follow_stop: %s", out)
	}
	structured(meshCall(t, reg, "", "export_start", map[string]any{"ms": 10}))
	waitFor(t, "the job's result through meshctl", func() bool {
		return strings.Contains(meshCall(t, reg, "", "export_result", map[string]any{"job_id": started.JobID}), `rows`)
	})

	// A reload adds a tool: the registry has it.
	added := ops + `  - name: added_user
    description: The same users, added by a reload.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "` + users.URL + `/users/{id}"}
`
	a.reload(opts("a", added))
	waitFor(t, "the reload's tool in the registry", func() bool {
		return slices.Contains(meshAgents(t, reg)["crank-e2e"], "added_user")
	})

	// The registry is killed and started again: Crank registers again.
	reg.Kill()
	reg = meshtest.StartRegistry(t, reg.Port)
	waitFor(t, "registered again after the registry's restart", func() bool {
		return slices.Contains(meshAgents(t, reg)["crank-e2e"], "added_user")
	})

	// A second replica: one registration, sent by A; A killed, B takes
	// over and the mesh reaches B through the balancer.
	b := startGateway(t, opts("b", added))
	const sends = "this replica sends the mesh registration"
	if !strings.Contains(a.log.String(), sends) {
		t.Fatalf("A does not send the registration:\n%s", a.log.String())
	}
	if out := meshCall(t, reg, "", "get_user", map[string]any{"id": 2}); !strings.Contains(out, "User 2") || strings.Contains(b.log.String(), sends) {
		t.Fatalf("B sends the registration while A holds it, or the call fails: %s", out)
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	lb.to(b)
	waitFor(t, "B takes the registration over", func() bool { return strings.Contains(b.log.String(), sends) })
	if out := meshCall(t, reg, "", "get_user", map[string]any{"id": 3}); !strings.Contains(out, "User 3") {
		t.Fatalf("get_user through B: %s", out)
	}

	// A clean stop deregisters.
	b.stop()
	if _, ok := meshAgents(t, reg)["crank-e2e"]; ok {
		t.Fatal("the agent is still listed after the last replica stopped cleanly")
	}
}

// The demo registers with the registry CRANK_MESH_REGISTRY names (the
// demo test sets it in the Caddyfile's place of the variable): meshctl
// lists crank-demo with its LLM stream tagged as mesh's stream, mesh's
// Java consumer reads that stream through a session-less call, and the
// issue's own meshctl call works against the default endpoint.
func TestMeshDemo(t *testing.T) {
	t.Parallel()
	reg := meshtest.StartRegistry(t, 0)
	d := startDemo(t, func(s string) string {
		if !strings.Contains(s, "{env.CRANK_MESH_REGISTRY}") {
			t.Fatal("the demo Caddyfile's mesh registry moved; update this test")
		}
		return strings.Replace(s, "{env.CRANK_MESH_REGISTRY}", reg.URL(), 1)
	})
	waitFor(t, "meshctl list shows the demo", func() bool {
		return slices.Contains(meshAgents(t, reg)["crank-demo"], "ask_demo_llm")
	})
	out, err := reg.Meshctl("list", "--tools=ask_demo_llm")
	if err != nil || !strings.Contains(out, "ai.mcpmesh.stream") {
		t.Errorf("ask_demo_llm's tags: %v\n%s", err, out)
	}
	// The LLM stream, called as mesh's Java consumer calls a streaming
	// tool: its chunks as progress, then the whole text as the result.
	resp, err := meshtest.Post(d.mcpURL(), `{"jsonrpc":"2.0","id":1764660000123,"method":"tools/call","params":{"name":"ask_demo_llm",`+
		`"arguments":{"messages":[{"role":"user","content":"hello mesh"}]},"_meta":{"progressToken":"6f1c2a9e-6d0b-4c44-9a51-2f0c1f6c9d11"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	s := meshtest.ReadStream(resp, json.RawMessage(`"6f1c2a9e-6d0b-4c44-9a51-2f0c1f6c9d11"`), json.RawMessage(`1764660000123`), false)
	resp.Body.Close()
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if len(s.Chunks) < 2 || s.Final == nil || s.After != 0 || json.Unmarshal(s.Final["result"], &res) != nil || res.IsError ||
		len(res.Content) == 0 || res.Content[0].Text != strings.Join(s.Chunks, "") {
		t.Errorf("ask_demo_llm as mesh's Java consumer reads it (%s): chunks %q, final %s", s.ContentType, s.Chunks, s.Final["result"])
	}

	base := strings.TrimSuffix(d.mcpURL(), "/mcp")
	if out := meshCall(t, reg, base, "get_user", map[string]any{"id": 2}); !strings.Contains(out, `"id\":2`) && !strings.Contains(out, `\"id\": 2`) {
		t.Errorf("meshctl call get_user --agent-url %s: %s", base, out)
	}
}
