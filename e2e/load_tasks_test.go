package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
)

// kindTask is one job run as an MCP Task: a task-augmented call of the
// job's start tool, tasks/get until it is terminal, then tasks/result —
// in the client's MCP session, sent through the balancer like its other
// requests.
const kindTask = "task"

func (c *loadClient) task() outcome {
	raw := &mcptest.Client{URL: c.url, Session: c.cs.ID(), Version: sessionProtocol.ProtocolVersion}
	// Ids of their own: the go-sdk client numbers its requests in the same
	// session from 1.
	raw.SkipIDs(int64(c.id+1)<<40 | c.calls.Add(1)<<20)
	call := func(method string, params, v any) *outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := raw.Try(ctx, method, params)
		if err == nil && (r.HTTPStatus != http.StatusOK || r.Error != nil) {
			err = fmt.Errorf("%s: HTTP %d %s %+v", method, r.HTTPStatus, strings.TrimSpace(r.Body), r.Error)
		}
		if err == nil {
			err = json.Unmarshal(r.Result, v)
		}
		if err != nil {
			o := classify(fmt.Errorf("task: %w", err))
			return &o
		}
		return nil
	}
	var created mcptest.CallResult
	if o := call("tools/call", map[string]any{"name": "export_start", "arguments": map[string]any{"ms": 100},
		"task": map[string]any{"ttl": 60000}}, &created); o != nil {
		return *o
	}
	if created.IsError {
		return classify(fmt.Errorf("task-augmented export_start: tool error: %s", created.Text()))
	}
	if created.Task == nil || created.Task.TaskID == "" {
		return fail("task-augmented export_start: no task in %+v", created)
	}
	id := created.Task.TaskID
	deadline := time.Now().Add(30 * time.Second)
	var task mcptest.Task
	for {
		if o := call("tasks/get", map[string]any{"taskId": id}, &task); o != nil {
			return *o
		}
		if task.Status != "working" && task.Status != "input_required" {
			break
		}
		if time.Now().After(deadline) {
			return fail("task %s not terminal after 30s: %+v", id, task)
		}
		time.Sleep(50 * time.Millisecond)
	}
	switch {
	case task.Status == "failed" && strings.Contains(task.StatusMessage, "owner_lost"):
		return outcome{err: fmt.Errorf("task %s: owner_lost", id), ownerLost: true}
	case task.Status == "failed":
		return classify(fmt.Errorf("task %s ended %+v", id, task))
	case task.Status != "completed":
		return fail("task %s ended %+v, want completed", id, task)
	}
	var res mcptest.CallResult
	if o := call("tasks/result", map[string]any{"taskId": id}, &res); o != nil {
		return *o
	}
	if res.IsError || fmt.Sprint(res.StructuredContent) != "map[rows:100]" {
		return fail("task %s result: %+v", id, res)
	}
	return outcome{}
}
