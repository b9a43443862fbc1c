package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// reportOps has an async_job operation, report: one slow request to u.
func reportOps(u *mcptest.Reports) string {
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

// An async_job driven as an MCP task over raw JSON-RPC (the go-sdk client
// has no tasks API), on two gateway replicas sharing one etcd: created on
// A, followed, listed, fetched and cancelled on B; a dropped tasks/result
// stream leaves the job running.
func TestTasksAcrossReplicas(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	api := mcptest.NewReports(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: reportOps(api), Crank: fmt.Sprintf(`etcd {
			%s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))

	onA := &mcptest.Client{T: t, URL: a.MCPURL}
	if caps, _ := onA.Initialize("2025-11-25")["capabilities"].(map[string]any); caps["tasks"] == nil {
		t.Fatalf("initialize: no tasks capability in %v", caps)
	}
	var tools struct {
		Tools []struct {
			Name      string            `json:"name"`
			Execution map[string]string `json:"execution"`
		} `json:"tools"`
	}
	onA.OK("tools/list", map[string]any{}, &tools)
	for _, tool := range tools.Tools {
		if want := map[bool]string{true: "optional"}[tool.Name == "report_start"]; tool.Execution["taskSupport"] != want {
			t.Errorf("tool %s: taskSupport %q, want %q", tool.Name, tool.Execution["taskSupport"], want)
		}
	}

	// Created on A, followed on B (the same MCP session, restored there).
	task := onA.StartTask("report_start", map[string]any{"n": 1})
	api.Await(t, "arrived", "1")
	onB := &mcptest.Client{T: t, URL: b.MCPURL, Session: onA.Session, Version: onA.Version}
	onB.SkipIDs(1000)
	waitFor(t, "B to serve the session", func() bool { return onB.Call("ping", nil).HTTPStatus == http.StatusOK })
	if got := onB.GetTask(task.TaskID); got.Status != "working" || got.CreatedAt != task.CreatedAt {
		t.Errorf("tasks/get on B = %+v", got)
	}
	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	onB.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != task.TaskID {
		t.Errorf("tasks/list on B = %+v", list.Tasks)
	}

	// A client that drops its tasks/result stream does not cancel the job.
	// (On A, which holds the session: a stream a replica serves for a
	// session restored from the store starts with its first message, here
	// the result, as the SDK sends no priming event there.)
	ctx, drop := context.WithCancel(context.Background())
	resp, _, err := onA.Request(ctx, "tasks/result", map[string]any{"taskId": task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	drop()
	resp.Body.Close()
	if got := onA.GetTask(task.TaskID); got.Status != "working" {
		t.Errorf("after a dropped tasks/result: %+v, want working", got)
	}

	// tasks/result on B blocks until A's job finishes.
	done := make(chan mcptest.CallResult, 1)
	go func() {
		var res mcptest.CallResult
		onB.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		done <- res
	}()
	api.Release("1")
	res := <-done
	if res.IsError || res.StructuredContent["rows"] != 3.0 || res.RelatedTask() != task.TaskID {
		t.Errorf("tasks/result = %+v", res)
	}
	if got := onA.GetTask(task.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get on A after the result = %+v", got)
	}

	// Cancelled on B mid-run: A's runner stops and the upstream sees it.
	task = onA.StartTask("report_start", map[string]any{"n": 2})
	api.Await(t, "arrived", "2")
	var cancelled mcptest.Task
	onB.OK("tasks/cancel", map[string]any{"taskId": task.TaskID}, &cancelled)
	if cancelled.TaskID != task.TaskID {
		t.Errorf("tasks/cancel = %+v", cancelled)
	}
	api.Await(t, "cancelled", "2")
	waitFor(t, "the task to be cancelled", func() bool { return onA.GetTask(task.TaskID).Status == "cancelled" })
	onB.Fails("tasks/cancel", map[string]any{"taskId": task.TaskID}, -32602, "terminal status")
	onA.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if !res.IsError || !strings.Contains(res.Text(), "cancelled") {
		t.Errorf("tasks/result of a cancelled task = %+v", res)
	}

	// A failing job is a failed task with the upstream's error.
	task = onA.StartTask("report_start", map[string]any{"n": 500})
	waitFor(t, "the task to fail", func() bool { return onB.GetTask(task.TaskID).Status == "failed" })
	if got := onB.GetTask(task.TaskID); !strings.Contains(got.StatusMessage, "failed") {
		t.Errorf("failed task = %+v", got)
	}
}

// The official TypeScript SDK drives the same job as a task through its
// experimental tasks API (callToolStream, listTasks, cancelTask).
func TestTasksTypeScriptClient(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	api := mcptest.NewReports(t)
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
		Type   string             `json:"type"`
		Task   mcptest.Task       `json:"task"`
		Result mcptest.CallResult `json:"result"`
		Error  map[string]any     `json:"error"`
	}
	var run struct {
		Capabilities map[string]any `json:"capabilities"`
		TaskSupport  string         `json:"taskSupport"`
		Finished     []message      `json:"finished"`
		Tasks        []mcptest.Task `json:"tasks"`
		Cancelled    []message      `json:"cancelled"`
		CancelAnswer mcptest.Task   `json:"cancelAnswer"`
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
	api.Await(t, "cancelled", "7")
	c := run.Cancelled
	if len(c) < 2 || c[0].Type != "taskCreated" || c[len(c)-1].Type != "error" ||
		!strings.Contains(fmt.Sprint(c[len(c)-1].Error["message"]), "cancelled") {
		t.Errorf("cancelled task stream = %+v", c)
	}
	if run.CancelAnswer.TaskID != c[0].Task.TaskID {
		t.Errorf("cancelTask answer = %+v", run.CancelAnswer)
	}
}
