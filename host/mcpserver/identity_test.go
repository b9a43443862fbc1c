package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// twoTaskReplicas are two replicas serving tasksOps on one store against
// one Reports upstream, and the first one's audit records.
func twoTaskReplicas(t *testing.T) (*store.Etcd, *mcptest.Reports, string, string, *observer.ObservedLogs) {
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	a, audit := newTaskReplica(t, st, up.URL)
	b, _ := newTaskReplica(t, st, up.URL)
	return st, up, a, b, audit
}

// callTool calls a tool through the raw client and returns its result.
func callTool(c *mcptest.Client, name string, args map[string]any) mcptest.CallResult {
	c.T.Helper()
	var res mcptest.CallResult
	c.OK("tools/call", map[string]any{"name": name, "arguments": args}, &res)
	return res
}

// refusedEverything checks that thief can reach none of the task and job:
// tasks/get, tasks/result and tasks/cancel say not found, tasks/list lists
// nothing, and the job tools say not found.
func refusedEverything(t *testing.T, thief *mcptest.Client, taskID, jobID string) {
	t.Helper()
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		thief.Fails(m, map[string]any{"taskId": taskID}, -32602, "not found")
	}
	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	thief.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("the other client lists %+v", list.Tasks)
	}
	for _, tool := range []string{"report_status", "report_result", "report_cancel"} {
		if res := callTool(thief, tool, map[string]any{"job_id": jobID}); !res.IsError || !strings.Contains(res.Text(), "not found") {
			t.Errorf("%s of another client's job = %+v, want not found", tool, res)
		}
	}
}

// Without an authenticated user or agent header, what a session starts is
// that session's: a second client initializing with the same clientInfo
// name — or sending an agent header that spells another identity — lists,
// reads and cancels none of it, on any replica. The session that started
// it keeps it, also when it moves to another replica.
func TestIdentityNotForgeable(t *testing.T) {
	t.Parallel()
	st, up, a, b, audit := twoTaskReplicas(t)

	owner := &mcptest.Client{T: t, URL: a}
	owner.Initialize(tasksProtocolVersion)
	task := owner.StartTask("report_start", map[string]any{"n": 11})
	job, _ := callTool(owner, "report_start", map[string]any{"n": 12}).StructuredContent["job_id"].(string)
	if job == "" {
		t.Fatal("report_start gave no job_id")
	}
	up.Await(t, "arrived", "11")
	up.Await(t, "arrived", "12")
	mcptest.WaitUntil(t, "the owner's session record", func() bool {
		rec, err := st.GetMCPSession(context.Background(), owner.Session)
		return err == nil && rec.Initialized
	})

	for _, tc := range []struct {
		name, url string
		header    http.Header
	}{
		{"same clientInfo.name", a, nil},
		{"same clientInfo.name on another replica", b, nil},
		{"agent header spelling the client's name", a, http.Header{"X-Agent": {"client:mcptest"}}},
		{"agent header spelling the session", b, http.Header{"X-Agent": {"session:" + owner.Session}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			thief := &mcptest.Client{T: t, URL: tc.url, Header: tc.header}
			thief.Initialize(tasksProtocolVersion) // clientInfo {"name":"mcptest"}, as the owner's
			refusedEverything(t, thief, task.TaskID, job)
		})
	}

	// The audit names the owner by a digest of its session, not by the
	// session ID, which is the session's credential.
	for _, e := range audit.All() {
		if m := e.ContextMap(); m["id"] == task.TaskID && m["outcome"] == "ok" {
			agent, _ := m["agent"].(string)
			if digest, ok := strings.CutPrefix(agent, "session:"); !ok || len(digest) != 32 || strings.Contains(agent, owner.Session) {
				t.Errorf("the owner's audit record names agent %q", agent)
			}
		}
	}

	// The owner's session, moved to B, still reaches both.
	onB := &mcptest.Client{T: t, URL: b, Session: owner.Session, Version: owner.Version}
	onB.SkipIDs(1000)
	if got := onB.GetTask(task.TaskID); got.Status != "working" {
		t.Errorf("tasks/get on B = %+v", got)
	}
	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	onB.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 2 {
		t.Errorf("tasks/list on B = %+v, want the task and the job", list.Tasks)
	}
	if res := callTool(onB, "report_cancel", map[string]any{"job_id": job}); res.IsError {
		t.Errorf("report_cancel on B = %+v", res)
	}
	up.Await(t, "cancelled", "12")
	up.Release("11")
	var res mcptest.CallResult
	owner.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if res.IsError || res.StructuredContent["rows"] != 3.0 {
		t.Errorf("tasks/result = %+v", res)
	}
}

// Two go-sdk clients with the same Implementation name: the second cannot
// reach the first one's job; the first, its connection moved to another
// replica as a load balancer without affinity would, still can.
func TestIdentityGoSDKClients(t *testing.T) {
	t.Parallel()
	st, up, a, b, _ := twoTaskReplicas(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connect := func(rt *router) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "same-name", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: "http://router/mcp", HTTPClient: &http.Client{Transport: rt}}, sessionProtocol)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*mcp.TextContent).Text
		}
		return out, text, res.IsError
	}

	rt1, rt2 := &router{}, &router{}
	rt1.to(&replica{URL: a})
	rt2.to(&replica{URL: a})
	first, second := connect(rt1), connect(rt2)
	out, _, _ := call(first, "report_start", map[string]any{"n": 21})
	job, _ := out["job_id"].(string)
	up.Await(t, "arrived", "21")
	for _, tool := range []string{"report_status", "report_cancel"} {
		if _, text, isErr := call(second, tool, map[string]any{"job_id": job}); !isErr || !strings.Contains(text, "not found") {
			t.Errorf("%s by the second client: %q, want not found", tool, text)
		}
	}
	mcptest.WaitUntil(t, "the first session's record", func() bool {
		rec, err := st.GetMCPSession(ctx, first.ID())
		return err == nil && rec.Initialized
	})
	rt1.to(&replica{URL: b})
	if out, text, isErr := call(first, "report_status", map[string]any{"job_id": job}); isErr || out["status"] != "running" {
		t.Errorf("report_status by the first client on B: %v %q", out, text)
	}
	up.Release("21")
}

// An agent header cannot name an authenticated user: the header's value
// is an identity of its own.
func TestIdentityHeaderIsNotAUser(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, audit := newTaskReplica(t, st, up.URL, func(o *Options) {
		o.AuthenticatedUser = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
	})
	alice := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Test-User": {"alice"}}}
	alice.Initialize(tasksProtocolVersion)
	task := alice.StartTask("report_start", map[string]any{"n": 1001})
	job, _ := callTool(alice, "report_start", map[string]any{"n": 1002}).StructuredContent["job_id"].(string)
	for _, spelled := range []string{"alice", "user:alice"} {
		mallory := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Agent": {spelled}}}
		mallory.Initialize(tasksProtocolVersion)
		refusedEverything(t, mallory, task.TaskID, job)
	}
	if got := alice.GetTask(task.TaskID); got.TaskID != task.TaskID {
		t.Errorf("alice's tasks/get = %+v", got)
	}
	// The audit names each caller as the endpoint saw it.
	agents := map[any]bool{}
	for _, e := range audit.All() {
		if m := e.ContextMap(); m["id"] == task.TaskID {
			agents[m["agent"]] = true
		}
	}
	if len(agents) != 3 || !agents["user:alice"] || !agents["header:alice"] || !agents["header:user:alice"] {
		t.Errorf("agents in the audit records of alice's task: %v", agents)
	}
}

// A stateless request naming no agent cannot start an agent-scoped job
// (nothing could own it), and says how to give callers an identity.
func TestIdentityStatelessWithoutAgent(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL, func(o *Options) { o.Stateless = true })
	anon := &mcptest.Client{T: t, URL: url}
	for _, params := range []map[string]any{
		{"name": "report_start", "arguments": map[string]any{"n": 1001}},
		{"name": "report_start", "arguments": map[string]any{"n": 1001}, "task": map[string]any{}},
	} {
		var res mcptest.CallResult
		anon.OK("tools/call", params, &res)
		if !res.IsError || res.Task != nil || !strings.Contains(res.Text(), "names no agent") || !strings.Contains(res.Text(), "agent_header") {
			t.Errorf("anonymous stateless start %v = %+v", params, res)
		}
	}
	// The 2026-07-28 protocol's clientInfo is no identity either.
	ext := &mcptest.Client{T: t, URL: url, Header: http.Header{"Mcp-Protocol-Version": {sessionlessProtocolVersion},
		"Mcp-Method": {"tools/call"}, "Mcp-Name": {"report_start"}}}
	var res mcptest.CallResult
	ext.OK("tools/call", extParams(true, "name", "report_start", "arguments", map[string]any{"n": 1001}), &res)
	if !res.IsError || !strings.Contains(res.Text(), "names no agent") {
		t.Errorf("anonymous 2026-07-28 start = %+v", res)
	}
	// Other tools need no agent.
	if res := callTool(anon, "get_user", map[string]any{"id": 1}); res.IsError {
		t.Errorf("get_user = %+v", res)
	}
}
