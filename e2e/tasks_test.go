package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/store/storetest"
)

// reportAPI is an upstream with a slow report: /report?n=N answers at once
// for n >= 1000, fails for n 500, and otherwise answers when the test
// releases it, noting when the gateway cancels the request instead.
type reportAPI struct {
	*httptest.Server
	mu     sync.Mutex
	events map[string]chan struct{}
}

func newReportAPI(t testing.TB) *reportAPI {
	u := &reportAPI{events: map[string]chan struct{}{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n := r.URL.Query().Get("n")
		v, _ := strconv.Atoi(n)
		switch {
		case v == 500:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"report engine down"}`)
			return
		case v < 1000:
			close(u.event("arrived", n))
			select {
			case <-u.event("release", n):
			case <-r.Context().Done():
				close(u.event("cancelled", n))
				return
			}
		}
		_, _ = fmt.Fprintf(w, `{"n":%s,"rows":3}`, n)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *reportAPI) event(name, n string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.events[name+n]
	if !ok {
		c = make(chan struct{})
		u.events[name+n] = c
	}
	return c
}

func (u *reportAPI) await(t testing.TB, name, n string) {
	t.Helper()
	select {
	case <-u.event(name, n):
	case <-time.After(30 * time.Second):
		t.Fatalf("upstream: report %s never %s", n, name)
	}
}

func reportOps(u *reportAPI) string {
	return fmt.Sprintf(`version: 1
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
    config: {method: GET, url: "%s/report", query: [n]}
`, u.URL)
}

// jsonrpcSession is a raw JSON-RPC client over Streamable HTTP: the go-sdk
// client has no tasks API.
type jsonrpcSession struct {
	t       testing.TB
	url     string
	session string
	next    atomic.Int64
}

type jsonrpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s *jsonrpcSession) request(ctx context.Context, method string, params any) (*http.Response, int64, error) {
	id := s.next.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.session != "" {
		req.Header.Set("Mcp-Session-Id", s.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	return resp, id, err
}

// call sends a request and returns the reply with its id.
func (s *jsonrpcSession) call(method string, params any) jsonrpcReply {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, id, err := s.request(ctx, method, params)
	if err != nil {
		s.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("%s: %s: %s", method, resp.Status, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var msg struct {
			ID *int64 `json:"id"`
			jsonrpcReply
		}
		if json.Unmarshal([]byte(line), &msg) == nil && msg.ID != nil && *msg.ID == id {
			if s.session == "" {
				s.session = resp.Header.Get("Mcp-Session-Id")
			}
			return msg.jsonrpcReply
		}
	}
	s.t.Fatalf("%s: no reply with id %d", method, id)
	return jsonrpcReply{}
}

// ok sends a request that must succeed and decodes its result into v.
func (s *jsonrpcSession) ok(method string, params, v any) {
	s.t.Helper()
	r := s.call(method, params)
	if r.Error != nil {
		s.t.Fatalf("%s: error %d %s", method, r.Error.Code, r.Error.Message)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		s.t.Fatalf("%s: %v: %s", method, err, r.Result)
	}
}

func (s *jsonrpcSession) initialize() map[string]any {
	s.t.Helper()
	var res map[string]any
	s.ok("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "tasks-e2e", "version": "1"}}, &res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("notifications/initialized: %v %v", resp, err)
	}
	resp.Body.Close()
	return res
}

type e2eTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

type e2eCallResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	Task              *e2eTask       `json:"task"`
}

func (s *jsonrpcSession) startTask(n int) e2eTask {
	s.t.Helper()
	var res e2eCallResult
	s.ok("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": n}, "task": map[string]any{"ttl": 60000}}, &res)
	if res.Task == nil || res.Task.Status != "working" {
		s.t.Fatalf("task-augmented report_start: %+v", res)
	}
	return *res.Task
}

func (s *jsonrpcSession) task(id string) e2eTask {
	s.t.Helper()
	var t e2eTask
	s.ok("tasks/get", map[string]any{"taskId": id}, &t)
	return t
}

// An async_job driven as an MCP task over raw JSON-RPC, on two gateway
// replicas sharing one etcd: created on A, followed, listed, fetched and
// cancelled on B; a dropped tasks/result stream leaves the job running.
func TestTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	api := newReportAPI(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: reportOps(api), Crank: fmt.Sprintf(`etcd {
			endpoints %s
			replica_name %s
		}`, etcd.Endpoints()[0], name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))

	onA := &jsonrpcSession{t: t, url: a.MCPURL}
	init := onA.initialize()
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] == nil {
		t.Fatalf("initialize: no tasks capability in %v", init)
	}
	var tools struct {
		Tools []struct {
			Name      string            `json:"name"`
			Execution map[string]string `json:"execution"`
		} `json:"tools"`
	}
	onA.ok("tools/list", map[string]any{}, &tools)
	for _, tool := range tools.Tools {
		if want := map[bool]string{true: "optional"}[tool.Name == "report_start"]; tool.Execution["taskSupport"] != want {
			t.Errorf("tool %s: taskSupport %q, want %q", tool.Name, tool.Execution["taskSupport"], want)
		}
	}

	// Created on A, followed on B (the same MCP session, restored there).
	task := onA.startTask(1)
	api.await(t, "arrived", "1")
	onB := &jsonrpcSession{t: t, url: b.MCPURL, session: onA.session}
	onB.next.Store(1000)
	waitFor(t, "B to serve the session", func() bool {
		resp, _, err := onB.request(context.Background(), "ping", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if got := onB.task(task.TaskID); got.Status != "working" || got.CreatedAt != task.CreatedAt {
		t.Errorf("tasks/get on B = %+v", got)
	}
	var list struct {
		Tasks []e2eTask `json:"tasks"`
	}
	onB.ok("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID {
		t.Errorf("tasks/list on B = %+v", list.Tasks)
	}

	// A client that drops its tasks/result stream does not cancel the job.
	// (On A, which holds the session: the stream a replica serves for a
	// session restored from the store starts with the first message, here
	// the result, as the SDK sends no priming event there.)
	ctx, drop := context.WithCancel(context.Background())
	resp, _, err := onA.request(ctx, "tasks/result", map[string]any{"taskId": task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	drop()
	resp.Body.Close()
	if got := onA.task(task.TaskID); got.Status != "working" {
		t.Errorf("after a dropped tasks/result: %+v, want working", got)
	}

	// tasks/result on B blocks until A's job finishes.
	done := make(chan e2eCallResult, 1)
	go func() {
		var res e2eCallResult
		onB.ok("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		done <- res
	}()
	close(api.event("release", "1"))
	res := <-done
	related, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if res.IsError || res.StructuredContent["rows"] != 3.0 || related["taskId"] != task.TaskID {
		t.Errorf("tasks/result = %+v", res)
	}
	if got := onA.task(task.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get on A after the result = %+v", got)
	}

	// Cancelled on B mid-run: A's runner stops and the upstream sees it.
	task = onA.startTask(2)
	api.await(t, "arrived", "2")
	var cancelled e2eTask
	onB.ok("tasks/cancel", map[string]any{"taskId": task.TaskID}, &cancelled)
	if cancelled.TaskID != task.TaskID {
		t.Errorf("tasks/cancel = %+v", cancelled)
	}
	api.await(t, "cancelled", "2")
	waitFor(t, "the task to be cancelled", func() bool { return onA.task(task.TaskID).Status == "cancelled" })
	if r := onB.call("tasks/cancel", map[string]any{"taskId": task.TaskID}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("second tasks/cancel: %+v, want -32602", r)
	}
	onA.ok("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "cancelled") {
		t.Errorf("tasks/result of a cancelled task = %+v", res)
	}

	// A failing job is a failed task with the upstream's error.
	task = onA.startTask(500)
	waitFor(t, "the task to fail", func() bool { return onB.task(task.TaskID).Status == "failed" })
	if got := onB.task(task.TaskID); !strings.Contains(got.StatusMessage, "failed") {
		t.Errorf("failed task = %+v", got)
	}
}

// The official TypeScript SDK drives the same job as a task through its
// experimental tasks API (callToolStream, listTasks, cancelTask).
func TestTasksTypeScriptClient(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	api := newReportAPI(t)
	g := startGateway(t, gatewayOptions{Operations: reportOps(api)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "tasks.mjs"), g.MCPURL,
		`{"tool":"report_start","arguments":{"n":1000},"cancelArguments":{"n":7}}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tasks.mjs: %v\n%s", err, stderr.String())
	}
	type message struct {
		Type   string         `json:"type"`
		Task   e2eTask        `json:"task"`
		Result e2eCallResult  `json:"result"`
		Error  map[string]any `json:"error"`
	}
	var run struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		TaskSupport     string         `json:"taskSupport"`
		Finished        []message      `json:"finished"`
		Tasks           []e2eTask      `json:"tasks"`
		Cancelled       []message      `json:"cancelled"`
		CancelAnswer    e2eTask        `json:"cancelAnswer"`
	}
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("tasks.mjs output: %v\n%s", err, out)
	}
	if run.Capabilities["tasks"] == nil || run.TaskSupport != "optional" {
		t.Errorf("TS client sees capabilities %v, taskSupport %q", run.Capabilities, run.TaskSupport)
	}
	f := run.Finished
	if len(f) < 3 || f[0].Type != "taskCreated" || f[len(f)-1].Type != "result" || f[len(f)-2].Task.Status != "completed" {
		t.Fatalf("finished task stream = %+v", f)
	}
	id := f[0].Task.TaskID
	if r := f[len(f)-1].Result; r.IsError || r.StructuredContent["rows"] != 3.0 {
		t.Errorf("task result = %+v", r)
	}
	if len(run.Tasks) != 1 || run.Tasks[0].TaskID != id || run.Tasks[0].Status != "completed" {
		t.Errorf("listTasks = %+v", run.Tasks)
	}
	api.await(t, "cancelled", "7")
	c := run.Cancelled
	if len(c) < 2 || c[0].Type != "taskCreated" || c[len(c)-1].Type != "error" ||
		!strings.Contains(fmt.Sprint(c[len(c)-1].Error["message"]), "cancelled") {
		t.Errorf("cancelled task stream = %+v", c)
	}
	if run.CancelAnswer.TaskID != c[0].Task.TaskID {
		t.Errorf("cancelTask answer = %+v", run.CancelAnswer)
	}
}
