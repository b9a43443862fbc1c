package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// tasksOps has an async_job operation (report, one slow request) and a
// plain one (get_user), against the taskUpstream at %s.
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

// taskUpstream serves /report?n=N: n 500 fails, n >= 1000 answers at once,
// any other n answers when released, or notes that the request was
// cancelled.
type taskUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	chans map[string]chan struct{}
}

func newTaskUpstream(t testing.TB) *taskUpstream {
	u := &taskUpstream{chans: map[string]chan struct{}{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/users/") {
			_, _ = fmt.Fprintf(w, `{"name":"Ada"}`)
			return
		}
		n := r.URL.Query().Get("n")
		v, _ := strconv.Atoi(n)
		switch {
		case v == 500:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"report engine down"}`)
			return
		case v < 1000:
			close(u.ch("arrived", n))
			select {
			case <-u.ch("release", n):
			case <-r.Context().Done():
				close(u.ch("cancelled", n))
				return
			}
		}
		_, _ = fmt.Fprintf(w, `{"n":%s,"rows":3}`, n)
	}))
	t.Cleanup(u.Close)
	return u
}

// ch returns the channel of an event for report n.
func (u *taskUpstream) ch(event, n string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.chans[event+n]
	if !ok {
		c = make(chan struct{})
		u.chans[event+n] = c
	}
	return c
}

// wait waits for an event of report n.
func (u *taskUpstream) wait(t testing.TB, event, n string) {
	t.Helper()
	select {
	case <-u.ch(event, n):
	case <-time.After(30 * time.Second):
		t.Fatalf("upstream: report %s never %s", n, event)
	}
}

// newTaskReplica is a gateway replica serving tasksOps through the
// handler's ServeHTTP, with its jobs and sessions in st.
func newTaskReplica(t testing.TB, st store.Store, upURL string) string {
	t.Helper()
	ops := filepath.Join(t.TempDir(), "ops.yaml")
	if err := os.WriteFile(ops, []byte(fmt.Sprintf(tasksOps, upURL)), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := host.LoadFile(ops, host.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := builtinSpec("rest")
	sup := host.NewSupervisor(spec, host.SupervisorOptions{Logger: zap.NewNop(), HostVersion: Version})
	t.Cleanup(func() { _ = sup.Close() })
	hst, err := host.New(context.Background(), host.Options{Catalog: cat, Store: st,
		Adapter: func(string) (*host.Supervisor, error) { return sup, nil }})
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Workspace: "default", AgentHeader: "X-Agent", SessionTimeout: caddy.Duration(time.Hour), logger: zap.NewNop()}
	h.ep = newEndpoint(h)
	h.ep.attach(hst, st)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = h.ServeHTTP(w, r, nil) }))
	t.Cleanup(func() { srv.Close(); _ = h.ep.Destruct() })
	return srv.URL + "/mcp"
}

// rpcClient speaks raw JSON-RPC over Streamable HTTP, as a task-aware
// client without an SDK would.
type rpcClient struct {
	t       testing.TB
	url     string
	session string
	agent   string
	next    atomic.Int64
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// rpc is one JSON-RPC response, or the HTTP failure that replaced it.
type rpc struct {
	HTTPStatus int
	Result     json.RawMessage
	Error      *rpcError
}

// call sends one request and returns its response.
func (c *rpcClient) call(method string, params any) rpc {
	c.t.Helper()
	id := c.next.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	resp := c.post(body)
	defer resp.Body.Close()
	out := rpc{HTTPStatus: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &struct{ Error **rpcError }{&out.Error})
		c.t.Logf("%s: HTTP %d: %s", method, resp.StatusCode, b)
		return out
	}
	var msgs []string
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				msgs = append(msgs, d)
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		msgs = append(msgs, string(b))
	}
	for _, m := range msgs {
		var msg struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if json.Unmarshal([]byte(m), &msg) == nil && msg.ID == id {
			out.Result, out.Error = msg.Result, msg.Error
			return out
		}
	}
	c.t.Fatalf("%s: no response with id %d in %q", method, id, msgs)
	return out
}

func (c *rpcClient) post(body []byte) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set(sessionIDHeader, c.session)
		req.Header.Set("MCP-Protocol-Version", tasksProtocolVersion)
	}
	if c.agent != "" {
		req.Header.Set("X-Agent", c.agent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// ok sends a request that must succeed and decodes its result into v.
func (c *rpcClient) ok(method string, params, v any) {
	c.t.Helper()
	r := c.call(method, params)
	if r.HTTPStatus != http.StatusOK || r.Error != nil {
		c.t.Fatalf("%s %v: HTTP %d, error %+v", method, params, r.HTTPStatus, r.Error)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		c.t.Fatalf("%s: %v: %s", method, err, r.Result)
	}
}

// fails sends a request that must fail with a JSON-RPC error of code whose
// message contains want.
func (c *rpcClient) fails(method string, params any, code int, want string) {
	c.t.Helper()
	r := c.call(method, params)
	if r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, want) {
		c.t.Fatalf("%s %v: HTTP %d, result %s, error %+v; want error %d containing %q", method, params, r.HTTPStatus, r.Result, r.Error, code, want)
	}
}

// initialize opens a session at the given protocol version and returns
// the initialize result.
func (c *rpcClient) initialize(version string) map[string]any {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "tasks-test", "version": "1"}}})
	resp := c.post(body)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get(sessionIDHeader)
	if resp.StatusCode != http.StatusOK || c.session == "" {
		c.t.Fatalf("initialize: %s %s", resp.Status, b)
	}
	var res map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" {
			var msg struct{ Result map[string]any }
			if json.Unmarshal([]byte(d), &msg) == nil && msg.Result != nil {
				res = msg.Result
			}
		}
	}
	resp = c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: %s", resp.Status)
	}
	return res
}

type taskWire struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	Task              *taskWire      `json:"task"`
}

// startTask starts report n as a task and returns the task.
func (c *rpcClient) startTask(n int) taskWire {
	c.t.Helper()
	var res callResult
	c.ok("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": n}, "task": map[string]any{"ttl": 60000}}, &res)
	if res.Task == nil || res.Task.TaskID == "" {
		c.t.Fatalf("task-augmented call: no task in %+v", res)
	}
	return *res.Task
}

func relatedTask(m map[string]any) string {
	rt, _ := m[metaRelatedTask].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
}

// A job driven as an MCP task over raw JSON-RPC, across two replicas: the
// capability and tool-level negotiation, creation, get, list, result,
// cancel, failure, and the errors the spec prescribes.
func TestTasks(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := newTaskUpstream(t)
	a, b := newTaskReplica(t, st, up.URL), newTaskReplica(t, st, up.URL)

	c := &rpcClient{t: t, url: a, agent: "agent-1"}
	init := c.initialize(tasksProtocolVersion)
	caps, _ := init["capabilities"].(map[string]any)
	var wantCap any
	_ = json.Unmarshal(tasksCapability, &wantCap)
	if !reflect.DeepEqual(caps["tasks"], wantCap) {
		t.Errorf("initialize: capabilities.tasks = %v, want %s", caps["tasks"], tasksCapability)
	}
	if caps["tools"] == nil {
		t.Errorf("initialize: capabilities lost their tools: %v", caps)
	}
	old := &rpcClient{t: t, url: a, agent: "agent-1"}
	if caps, _ := old.initialize("2025-06-18")["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("a 2025-06-18 session is offered tasks: %v", caps)
	}

	var tools struct {
		Tools []struct {
			Name         string         `json:"name"`
			Execution    map[string]any `json:"execution"`
			OutputSchema map[string]any `json:"outputSchema"`
		} `json:"tools"`
	}
	c.ok("tools/list", map[string]any{}, &tools)
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
	var created callResult
	c.ok("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 60000}}, &created)
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
	up.wait(t, "arrived", "1")

	// Read it on B, which restores the MCP session from the store.
	waitUntil(t, "the session record", func() bool {
		rec, err := st.GetMCPSession(context.Background(), c.session)
		return err == nil && rec.Initialized
	})
	onB := &rpcClient{t: t, url: b, agent: "agent-1", session: c.session}
	onB.next.Store(1000)
	var got taskWire
	onB.ok("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
	if got.TaskID != task.TaskID || got.Status != "working" || got.CreatedAt != task.CreatedAt {
		t.Errorf("tasks/get on B = %+v, want the working task %s", got, task.TaskID)
	}
	var list struct {
		Tasks      []taskWire `json:"tasks"`
		NextCursor string     `json:"nextCursor"`
	}
	onB.ok("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID || list.NextCursor != "" {
		t.Errorf("tasks/list on B = %+v", list)
	}

	// tasks/result blocks until the job is done.
	results := make(chan callResult, 1)
	go func() {
		var res callResult
		onB.ok("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		results <- res
	}()
	close(up.ch("release", "1"))
	res := <-results
	if res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, `"rows"`) || res.StructuredContent["rows"] != 3.0 {
		t.Errorf("tasks/result = %+v, want the report", res)
	}
	if relatedTask(res.Meta) != task.TaskID {
		t.Errorf("tasks/result _meta = %v, want the related task", res.Meta)
	}
	c.ok("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
	if got.Status != "completed" {
		t.Errorf("tasks/get after the result = %+v, want completed", got)
	}
	c.fails("tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "terminal status 'completed'")
	// The job tools see the same job.
	var status callResult
	c.ok("tools/call", map[string]any{"name": "report_status", "arguments": map[string]any{"job_id": task.TaskID}}, &status)
	if status.IsError || status.StructuredContent["status"] != "succeeded" {
		t.Errorf("report_status of the task's job = %+v", status)
	}

	t.Run("cancel reaches the upstream", func(t *testing.T) {
		task := c.startTask(2)
		up.wait(t, "arrived", "2")
		var got taskWire
		onB.ok("tasks/cancel", map[string]any{"taskId": task.TaskID}, &got)
		if got.TaskID != task.TaskID || (got.Status != "cancelled" && got.Status != "working") {
			t.Fatalf("tasks/cancel = %+v", got)
		}
		up.wait(t, "cancelled", "2")
		var res callResult
		c.ok("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if !res.IsError || !strings.Contains(res.Content[0].Text, "cancelled") || relatedTask(res.Meta) != task.TaskID {
			t.Errorf("tasks/result of a cancelled task = %+v", res)
		}
		c.ok("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
		if got.Status != "cancelled" {
			t.Errorf("tasks/get after cancel = %+v", got)
		}
		c.fails("tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "terminal status 'cancelled'")
	})

	t.Run("a failed job is a failed task", func(t *testing.T) {
		task := c.startTask(500)
		var res callResult
		c.ok("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if !res.IsError || relatedTask(res.Meta) != task.TaskID {
			t.Errorf("tasks/result of a failed task = %+v", res)
		}
		var got taskWire
		c.ok("tasks/get", map[string]any{"taskId": task.TaskID}, &got)
		if got.Status != "failed" || !strings.Contains(got.StatusMessage, "failed") {
			t.Errorf("tasks/get of a failed task = %+v", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			c.fails(m, map[string]any{"taskId": "aj_nope"}, -32602, "not found")
			c.fails(m, map[string]any{}, -32602, "params.taskId")
		}
		c.fails("tasks/list", map[string]any{"cursor": "garbage"}, -32602, "params.cursor")
		c.fails("tools/call", map[string]any{"name": "get_user", "arguments": map[string]any{"id": 1}, "task": map[string]any{}},
			-32601, `"get_user"`)
		c.fails("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": "soon"},
			-32602, "params.task")
		// Arguments the tool refuses: no task, the tool's own error result.
		var res callResult
		c.ok("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{}, "task": map[string]any{}}, &res)
		if res.Task != nil || !res.IsError || !strings.Contains(res.Content[0].Text, "invalid arguments") {
			t.Errorf("task-augmented call with bad arguments = %+v", res)
		}
		// A plain call of the start tool still starts a job with no task.
		var plain callResult
		c.ok("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1000}}, &plain)
		if plain.Task != nil || plain.IsError || plain.StructuredContent["job_id"] == nil {
			t.Errorf("plain call of the start tool = %+v", plain)
		}
	})

	t.Run("another agent sees none of them", func(t *testing.T) {
		other := &rpcClient{t: t, url: b, agent: "agent-2"}
		other.initialize(tasksProtocolVersion)
		other.fails("tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "not found")
		other.fails("tasks/result", map[string]any{"taskId": task.TaskID}, -32602, "not found")
		var list struct {
			Tasks []taskWire `json:"tasks"`
		}
		other.ok("tasks/list", nil, &list)
		if len(list.Tasks) != 0 {
			t.Errorf("agent-2 lists %+v", list.Tasks)
		}
	})

	t.Run("session rules", func(t *testing.T) {
		none := &rpcClient{t: t, url: a, agent: "agent-1"}
		if r := none.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != http.StatusBadRequest {
			t.Errorf("tasks/get without a session: HTTP %d, want 400", r.HTTPStatus)
		}
		unknown := &rpcClient{t: t, url: b, agent: "agent-1", session: "no-such-session"}
		if r := unknown.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != http.StatusNotFound {
			t.Errorf("tasks/get with an unknown session: HTTP %d, want 404", r.HTTPStatus)
		}
		// The session belongs to agent-1.
		thief := &rpcClient{t: t, url: a, agent: "agent-2", session: c.session}
		if r := thief.call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != http.StatusNotFound {
			t.Errorf("tasks/get in another agent's session: HTTP %d, want 404", r.HTTPStatus)
		}
	})
}

// tasks/list hands out pages of taskListPage, newest first, with a cursor
// that leads to the rest.
func TestTasksListPages(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := newTaskUpstream(t)
	c := &rpcClient{t: t, url: newTaskReplica(t, st, up.URL), agent: "lister"}
	c.initialize(tasksProtocolVersion)
	want := map[string]bool{}
	for i := range taskListPage + 1 {
		want[c.startTask(1000+i).TaskID] = true
	}
	var page struct {
		Tasks      []taskWire `json:"tasks"`
		NextCursor string     `json:"nextCursor"`
	}
	c.ok("tasks/list", map[string]any{}, &page)
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
	page.NextCursor = ""
	c.ok("tasks/list", map[string]any{"cursor": cursor}, &page)
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
