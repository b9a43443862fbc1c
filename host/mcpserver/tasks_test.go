package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// tasksOps has an async_job operation (report, one slow request) and a
// plain one (get_user), against the mcptest.Reports upstream at %s.
const tasksOps = `version: 1
operations:
  - name: report
    description: Build a report (one slow request).
    adapter: rest
    mode: async_job
    timeout: 1m
    input_schema:
      type: object
      properties:
        n: {type: integer, minimum: 1}
      required: [n]
    config: {method: GET, url: "%[1]s/report", query: [n]}
  - name: get_user
    description: Fetch one user.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
`

// newTaskReplica is a gateway replica serving tasksOps through the
// endpoint's ServeHTTP, with its jobs and sessions in st. It returns its
// URL and its audit records.
func newTaskReplica(t testing.TB, st *store.Etcd, upURL string, options ...func(*Options)) (string, *observer.ObservedLogs) {
	t.Helper()
	_, url, audit := newTaskEndpoint(t, st, upURL, options...)
	return url, audit
}

// newTaskEndpoint is newTaskReplica that also returns the endpoint.
func newTaskEndpoint(t testing.TB, st *store.Etcd, upURL string, options ...func(*Options)) (*Endpoint, string, *observer.ObservedLogs) {
	t.Helper()
	core, audit := observer.New(zap.InfoLevel)
	hst := newTestHost(t, fmt.Sprintf(tasksOps, upURL), st, zap.New(core))
	opts := testOptions("default")
	for _, o := range options {
		o(&opts)
	}
	ep, url := serveEndpoint(t, hst, st, opts)
	return ep, url, audit
}

// newTaskClient is a raw JSON-RPC client of agent on url.
func newTaskClient(t testing.TB, url, agent, session string) *mcptest.Client {
	return &mcptest.Client{T: t, URL: url, Session: session, Header: http.Header{"X-Agent": {agent}}}
}

// A job driven as an MCP task over raw JSON-RPC, across two replicas: the
// capability and tool-level negotiation, creation, get, list, result,
// cancel, failure, and the errors the spec prescribes.
func TestTasks(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	a, _ := newTaskReplica(t, st, up.URL)
	b, auditB := newTaskReplica(t, st, up.URL)

	c := newTaskClient(t, a, "agent-1", "")
	init := c.Initialize(tasksProtocolVersion)
	caps, _ := init["capabilities"].(map[string]any)
	var wantCap any
	_ = json.Unmarshal(tasksCapability, &wantCap)
	if !reflect.DeepEqual(caps["tasks"], wantCap) {
		t.Errorf("initialize: capabilities.tasks = %v, want %s", caps["tasks"], tasksCapability)
	}
	if caps["tools"] == nil {
		t.Errorf("initialize: capabilities lost their tools: %v", caps)
	}
	old := newTaskClient(t, a, "agent-1", "")
	if caps, _ := old.Initialize("2025-06-18")["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("a 2025-06-18 session is offered tasks: %v", caps)
	}

	var tools struct {
		Tools []struct {
			Name         string         `json:"name"`
			Execution    map[string]any `json:"execution"`
			OutputSchema map[string]any `json:"outputSchema"`
		} `json:"tools"`
	}
	c.OK("tools/list", map[string]any{}, &tools)
	support := map[string]any{}
	for _, tool := range tools.Tools {
		support[tool.Name] = tool.Execution["taskSupport"]
		// A task's result is the report, not the job handle: the start
		// tool's output schema admits both.
		alts, _ := tool.OutputSchema["anyOf"].([]any)
		if (tool.Name == "report_start") != (len(alts) == 2) || tool.Name == "report_start" && tool.OutputSchema["type"] != "object" {
			t.Errorf("tool %s: output schema %v", tool.Name, tool.OutputSchema)
		}
	}
	if support["report_start"] != "optional" || support["report_status"] != nil || support["get_user"] != nil || len(support) != 5 {
		t.Errorf("tools/list taskSupport = %v, want optional on report_start only", support)
	}

	// Create on A.
	var created mcptest.CallResult
	c.OK("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 60000}}, &created)
	task := created.Task
	if task == nil || task.TaskID == "" || task.Status != "working" || task.TTL == nil || *task.TTL <= 0 ||
		task.PollInterval != 1000 || task.StatusMessage == "" {
		t.Fatalf("CreateTaskResult = %+v", created)
	}
	for _, ts := range []string{task.CreatedAt, task.LastUpdatedAt} {
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("timestamp %q: %v", ts, err)
		}
	}
	if msg, _ := created.Meta[metaImmediateResponse].(string); !strings.Contains(msg, task.TaskID) {
		t.Errorf("CreateTaskResult _meta = %v, want an immediate response naming the task", created.Meta)
	}
	up.Await(t, "arrived", "1")

	// Read it on B, which restores the MCP session from the store.
	mcptest.WaitUntil(t, "the session record", func() bool {
		rec, err := st.GetMCPSession(context.Background(), c.Session)
		return err == nil && rec.Initialized
	})
	onB := newTaskClient(t, b, "agent-1", c.Session)
	onB.Version = c.Version
	onB.SkipIDs(1000)
	if got := onB.GetTask(task.TaskID); got.TaskID != task.TaskID || got.Status != "working" || got.CreatedAt != task.CreatedAt {
		t.Errorf("tasks/get on B = %+v, want the working task %s", got, task.TaskID)
	}
	var list struct {
		Tasks      []mcptest.Task `json:"tasks"`
		NextCursor string         `json:"nextCursor"`
	}
	onB.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID || list.NextCursor != "" {
		t.Errorf("tasks/list on B = %+v", list)
	}

	// tasks/result blocks until the job is done.
	results := make(chan mcptest.CallResult, 1)
	go func() {
		var res mcptest.CallResult
		onB.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		results <- res
	}()
	up.Release("1")
	res := <-results
	if res.IsError || !strings.Contains(res.Text(), `"rows"`) || res.StructuredContent["rows"] != 3.0 {
		t.Errorf("tasks/result = %+v, want the report", res)
	}
	if res.RelatedTask() != task.TaskID {
		t.Errorf("tasks/result _meta = %v, want the related task", res.Meta)
	}
	if got := c.GetTask(task.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get after the result = %+v, want completed", got)
	}
	c.Fails("tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "terminal status 'completed'")
	// The job tools see the same job.
	var status mcptest.CallResult
	c.OK("tools/call", map[string]any{"name": "report_status", "arguments": map[string]any{"job_id": task.TaskID}}, &status)
	if status.IsError || status.StructuredContent["status"] != "succeeded" {
		t.Errorf("report_status of the task's job = %+v", status)
	}

	t.Run("cancel reaches the upstream", func(t *testing.T) {
		task := c.StartTask("report_start", map[string]any{"n": 2})
		up.Await(t, "arrived", "2")
		var got mcptest.Task
		onB.OK("tasks/cancel", map[string]any{"taskId": task.TaskID}, &got)
		if got.TaskID != task.TaskID || (got.Status != "cancelled" && got.Status != "working") {
			t.Fatalf("tasks/cancel = %+v", got)
		}
		up.Await(t, "cancelled", "2")
		var res mcptest.CallResult
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if !res.IsError || !strings.Contains(res.Text(), "cancelled") || res.RelatedTask() != task.TaskID {
			t.Errorf("tasks/result of a cancelled task = %+v", res)
		}
		if got := c.GetTask(task.TaskID); got.Status != "cancelled" {
			t.Errorf("tasks/get after cancel = %+v", got)
		}
		c.Fails("tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "terminal status 'cancelled'")
		// B wrote one audit record for the cancel, naming who and what.
		var cancels []observer.LoggedEntry
		for _, e := range auditB.All() {
			if e.ContextMap()["via"] == "tasks/cancel" {
				cancels = append(cancels, e)
			}
		}
		if len(cancels) != 1 {
			t.Fatalf("B's tasks/cancel audit records: %+v", cancels)
		}
		if m := cancels[0].ContextMap(); m["event"] != "job.cancel" || m["agent"] != "header:agent-1" || m["workspace"] != "default" ||
			m["id"] != task.TaskID || m["tool"] != "report_start" || m["outcome"] != "ok" {
			t.Errorf("tasks/cancel audit record = %v", m)
		}
	})

	t.Run("a failed job is a failed task", func(t *testing.T) {
		task := c.StartTask("report_start", map[string]any{"n": 500})
		var res mcptest.CallResult
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if !res.IsError || res.RelatedTask() != task.TaskID {
			t.Errorf("tasks/result of a failed task = %+v", res)
		}
		if got := c.GetTask(task.TaskID); got.Status != "failed" || !strings.Contains(got.StatusMessage, "failed") {
			t.Errorf("tasks/get of a failed task = %+v", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			c.Fails(m, map[string]any{"taskId": "aj_nope"}, -32602, "not found")
			c.Fails(m, map[string]any{}, -32602, "params.taskId")
		}
		c.Fails("tasks/list", map[string]any{"cursor": "garbage"}, -32602, "params.cursor")
		c.Fails("tasks/update", map[string]any{"taskId": task.TaskID}, -32601, "2026-07-28")
		onB.Fails("tasks/update", map[string]any{"taskId": task.TaskID}, -32601, "2026-07-28")
		c.Fails("tools/call", map[string]any{"name": "get_user", "arguments": map[string]any{"id": 1}, "task": map[string]any{}},
			-32601, `"get_user"`)
		c.Fails("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": "soon"},
			-32602, "params.task")
		// Arguments the tool refuses: no task, the tool's own error result.
		var res mcptest.CallResult
		c.OK("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{}, "task": map[string]any{}}, &res)
		if res.Task != nil || !res.IsError || !strings.Contains(res.Text(), "invalid arguments") {
			t.Errorf("task-augmented call with bad arguments = %+v", res)
		}
		// A plain call of the start tool still starts a job with no task.
		var plain mcptest.CallResult
		c.OK("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1000}}, &plain)
		if plain.Task != nil || plain.IsError || plain.StructuredContent["job_id"] == nil {
			t.Errorf("plain call of the start tool = %+v", plain)
		}
	})

	t.Run("another agent sees none of them", func(t *testing.T) {
		other := newTaskClient(t, b, "agent-2", "")
		other.Initialize(tasksProtocolVersion)
		other.Fails("tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "not found")
		other.Fails("tasks/result", map[string]any{"taskId": task.TaskID}, -32602, "not found")
		var list struct {
			Tasks []mcptest.Task `json:"tasks"`
		}
		other.OK("tasks/list", nil, &list)
		if len(list.Tasks) != 0 {
			t.Errorf("agent-2 lists %+v", list.Tasks)
		}
	})

	t.Run("session rules", func(t *testing.T) {
		// Without a session the request is a session-less legacy call
		// (legacy.go), run as its agent header says: agent-1 reads its
		// task, agent-2 is told there is none.
		if r := newTaskClient(t, a, "agent-1", "").Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != http.StatusOK ||
			r.Error != nil || !strings.Contains(string(r.Result), task.TaskID) {
			t.Errorf("tasks/get without a session as agent-1: HTTP %d %s %+v", r.HTTPStatus, r.Result, r.Error)
		}
		if r := newTaskClient(t, a, "agent-2", "").Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.Error == nil {
			t.Errorf("tasks/get without a session as agent-2: HTTP %d %s", r.HTTPStatus, r.Result)
		}
		for _, tc := range []struct {
			what   string
			client *mcptest.Client
			want   int
		}{
			{"with an unknown session", newTaskClient(t, b, "agent-1", "no-such-session"), http.StatusNotFound},
			{"in another agent's session", newTaskClient(t, a, "agent-2", c.Session), http.StatusNotFound},
		} {
			if r := tc.client.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != tc.want {
				t.Errorf("tasks/get %s: HTTP %d %s, want %d", tc.what, r.HTTPStatus, r.Body, tc.want)
			}
		}
	})
}

// tasks/list hands out pages of taskListPage, newest first, with a cursor
// that leads to the rest.
func TestTasksListPages(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL)
	c := newTaskClient(t, url, "lister", "")
	c.Initialize(tasksProtocolVersion)
	want := map[string]bool{}
	for i := range taskListPage + 1 {
		want[c.StartTask("report_start", map[string]any{"n": 1000 + i}).TaskID] = true
	}
	var page struct {
		Tasks      []mcptest.Task `json:"tasks"`
		NextCursor string         `json:"nextCursor"`
	}
	c.OK("tasks/list", map[string]any{}, &page)
	if len(page.Tasks) != taskListPage || page.NextCursor == "" {
		t.Fatalf("first page: %d tasks, cursor %q", len(page.Tasks), page.NextCursor)
	}
	seen := map[string]bool{}
	for i, tk := range page.Tasks {
		seen[tk.TaskID] = true
		if i > 0 && tk.CreatedAt > page.Tasks[i-1].CreatedAt {
			t.Errorf("page not newest first at %d: %s after %s", i, tk.CreatedAt, page.Tasks[i-1].CreatedAt)
		}
	}
	cursor := page.NextCursor
	// Only a cursor the server handed out to this caller is taken back: a
	// position in the store's own format, an edited cursor and another
	// agent's cursor are refused.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"c":1,"i":"job_AAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	c.Fails("tasks/list", map[string]any{"cursor": forged}, -32602, "params.cursor")
	edited := cursor[:len(cursor)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(cursor, "A")]
	c.Fails("tasks/list", map[string]any{"cursor": edited}, -32602, "params.cursor")
	other := newTaskClient(t, url, "another-lister", "")
	other.Initialize(tasksProtocolVersion)
	other.Fails("tasks/list", map[string]any{"cursor": cursor}, -32602, "params.cursor")
	page.NextCursor = ""
	c.OK("tasks/list", map[string]any{"cursor": cursor}, &page)
	if len(page.Tasks) != 1 || page.NextCursor != "" || seen[page.Tasks[0].TaskID] {
		t.Fatalf("second page: %+v", page)
	}
	seen[page.Tasks[0].TaskID] = true
	for id := range want {
		if !seen[id] {
			t.Errorf("task %s listed on no page", id)
		}
	}
}

// A stateless endpoint answering JSON serves tasks without sessions: the
// task is the agent's, tasks/result waits in a plain JSON response. A
// request of the sessionless 2026-07-28 protocol that does not declare the
// tasks extension gets no tasks.
func TestTasksStatelessJSON(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL, func(o *Options) { o.Stateless, o.JSONResponse = true, true })
	c := newTaskClient(t, url, "agent-1", "")
	task := c.StartTask("report_start", map[string]any{"n": 3})
	if c.Session != "" {
		t.Fatalf("a stateless endpoint opened session %q", c.Session)
	}
	up.Await(t, "arrived", "3")
	if got := c.GetTask(task.TaskID); got.Status != "working" {
		t.Errorf("tasks/get = %+v", got)
	}
	results := make(chan mcptest.CallResult, 1)
	go func() {
		var res mcptest.CallResult
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		results <- res
	}()
	up.Release("3")
	if res := <-results; res.IsError || res.StructuredContent["rows"] != 3.0 || res.RelatedTask() != task.TaskID {
		t.Errorf("tasks/result = %+v", res)
	}
	newTaskClient(t, url, "agent-2", "").Fails("tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "not found")

	// A 2026-07-28 request that does not declare the tasks extension gets
	// no task and cannot use the task methods.
	next := newExtClient(t, url)
	next.Header.Set("Mcp-Method", "tasks/get")
	next.Fails("tasks/get", extParams(false, "taskId", task.TaskID), -32021, tasksExtension)
	next.Header.Set("Mcp-Method", "tools/call")
	next.Header.Set("Mcp-Name", "report_start")
	var plain mcptest.CallResult
	next.OK("tools/call", extParams(false, "name", "report_start", "arguments", map[string]any{"n": 1001}, "task", map[string]any{}), &plain)
	if plain.Task != nil || plain.StructuredContent["job_id"] == nil {
		t.Errorf("2026-07-28 tools/call with params.task = %+v, want a plain call's job handle", plain)
	}
}

// newExtClient is a client of the sessionless 2026-07-28 protocol.
func newExtClient(t testing.TB, url string) *mcptest.Client {
	c := newTaskClient(t, url, "agent-1", "")
	c.Header.Set("MCP-Protocol-Version", sessionlessProtocolVersion)
	return c
}

// extParams are request params of the sessionless protocol (its _meta
// triple), declaring the tasks extension or not, with the key-value pairs
// kv.
func extParams(tasks bool, kv ...any) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{tasksExtension: map[string]any{}}
	}
	p := map[string]any{"_meta": map[string]any{mcp.MetaKeyProtocolVersion: sessionlessProtocolVersion,
		mcp.MetaKeyClientCapabilities: caps, mcp.MetaKeyClientInfo: map[string]any{"name": "ext-test", "version": "1"}}}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	return p
}

// The 2026-07-28 tasks extension on a stateless endpoint and beside the
// sessions of a stateful one: discovery, a server-directed task for a
// client that declares the extension, polling with the result inlined,
// update and cancel acknowledgements, and the methods the extension
// dropped.
func TestTasksExtension(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		t.Run(map[bool]string{true: "stateless", false: "stateful"}[stateless], func(t *testing.T) {
			t.Parallel()
			testTasksExtension(t, stateless)
		})
	}
}

func testTasksExtension(t *testing.T, stateless bool) {
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL, func(o *Options) { o.Stateless = stateless })
	c := newExtClient(t, url)
	call := func(method, name string) {
		c.Header.Set("Mcp-Method", method)
		c.Header.Set("Mcp-Name", name)
	}

	var disc struct {
		Capabilities struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	call("server/discover", "")
	c.OK("server/discover", extParams(true), &disc)
	if disc.Capabilities.Extensions[tasksExtension] == nil {
		t.Errorf("server/discover: extensions %v, want %s", disc.Capabilities.Extensions, tasksExtension)
	}

	type task struct {
		ResultType     string              `json:"resultType"`
		TaskID         string              `json:"taskId"`
		Status         string              `json:"status"`
		CreatedAt      string              `json:"createdAt"`
		TTLMs          *int64              `json:"ttlMs"`
		PollIntervalMs int64               `json:"pollIntervalMs"`
		Result         *mcptest.CallResult `json:"result"`
	}
	start := func(n int) task {
		t.Helper()
		var created task
		call("tools/call", "report_start")
		c.OK("tools/call", extParams(true, "name", "report_start", "arguments", map[string]any{"n": n}), &created)
		if created.ResultType != "task" || created.TaskID == "" || created.Status != "working" || created.TTLMs == nil || created.PollIntervalMs != 1000 {
			t.Fatalf("CreateTaskResult = %+v", created)
		}
		return created
	}
	get := func(id string) task {
		t.Helper()
		var got task
		call("tasks/get", id)
		c.OK("tasks/get", extParams(true, "taskId", id), &got)
		if got.ResultType != "complete" || got.TaskID != id {
			t.Fatalf("tasks/get = %+v", got)
		}
		return got
	}

	created := start(4)
	up.Await(t, "arrived", "4")
	if got := get(created.TaskID); got.Status != "working" || got.Result != nil {
		t.Errorf("tasks/get while running = %+v", got)
	}
	var ack map[string]any
	call("tasks/update", created.TaskID)
	c.OK("tasks/update", extParams(true, "taskId", created.TaskID, "inputResponses", map[string]any{}), &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/update = %v", ack)
	}
	up.Release("4")
	var done task
	mcptest.WaitUntil(t, "the task to complete", func() bool { done = get(created.TaskID); return done.Status == "completed" })
	if done.Result == nil || done.Result.IsError || done.Result.StructuredContent["rows"] != 3.0 {
		t.Errorf("completed task = %+v, want the report inlined", done)
	}

	// A failed job is a completed task with an error result.
	failed := start(500)
	mcptest.WaitUntil(t, "the failing task to end", func() bool { done = get(failed.TaskID); return done.Status != "working" })
	if done.Status != "completed" || done.Result == nil || !done.Result.IsError {
		t.Errorf("failed job's task = %+v, want completed with an error result", done)
	}

	cancelled := start(5)
	up.Await(t, "arrived", "5")
	call("tasks/cancel", cancelled.TaskID)
	c.OK("tasks/cancel", extParams(true, "taskId", cancelled.TaskID), &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel = %v", ack)
	}
	up.Await(t, "cancelled", "5")
	mcptest.WaitUntil(t, "the task to be cancelled", func() bool { return get(cancelled.TaskID).Status == "cancelled" })

	for _, m := range []string{"tasks/result", "tasks/list"} {
		call(m, created.TaskID)
		c.Fails(m, extParams(true, "taskId", created.TaskID), -32601, "not part of the "+tasksExtension)
	}
	call("tasks/get", "job_nope")
	c.Fails("tasks/get", extParams(true, "taskId", "job_nope"), -32602, "not found")
	// Another agent cannot see it.
	other := newExtClient(t, url)
	other.Header.Set("X-Agent", "agent-2")
	other.Header.Set("Mcp-Method", "tasks/get")
	other.Header.Set("Mcp-Name", created.TaskID)
	other.Fails("tasks/get", extParams(true, "taskId", created.TaskID), -32602, "not found")
}

// A stateless json_response endpoint serves a request that carries a
// progress token with SSE: that path, too, drops the internal headers a
// client sends (here one that would turn a ping into tasks/list) and
// passes params.task on (the call becomes a task).
func TestTasksStatelessJSONProgress(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	url, _ := newTaskReplica(t, st, up.URL, func(o *Options) { o.Stateless, o.JSONResponse = true, true })
	c := newTaskClient(t, url, "agent-1", "")
	c.StartTask("report_start", map[string]any{"n": 1001})

	forged := newTaskClient(t, url, "agent-1", "")
	forged.Header.Set("X-Crank-Internal-Task", `{"method":"tasks/list"}`)
	var pong map[string]any
	forged.OK("ping", map[string]any{"_meta": map[string]any{"progressToken": "p1"}}, &pong)
	if len(pong) != 0 {
		t.Errorf("ping with a forged internal header = %v, want an empty result", pong)
	}

	var created mcptest.CallResult
	c.OK("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1002}, "task": map[string]any{},
		"_meta": map[string]any{"progressToken": "p2"}}, &created)
	if created.Task == nil || created.Task.TaskID == "" {
		t.Errorf("task-augmented call with a progress token = %+v, want a CreateTaskResult", created)
	}
}
