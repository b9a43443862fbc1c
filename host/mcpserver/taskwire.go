package mcpserver

import (
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// The MCP Task object and the params and results of the tasks methods
// (MCP 2025-11-25), which go-sdk does not have.

// wireTask is the MCP Task object.
type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is milliseconds from creation; null for unlimited.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// MCP task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// taskStatus maps a job status to a task status. A job being cancelled is
// still working: its runner may yet finish it as succeeded or failed, and a
// cancelled task must stay cancelled. MCP's input_required never applies: a
// job asks the client nothing.
func taskStatus(s store.JobStatus) string {
	switch s {
	case store.JobSucceeded:
		return taskCompleted
	case store.JobFailed:
		return taskFailed
	case store.JobCanceled:
		return taskCancelled
	}
	return taskWorking
}

func wireTaskOf(t *host.Task) wireTask {
	w := wireTask{
		TaskID: t.ID, Status: taskStatus(t.Status),
		CreatedAt:     t.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(time.RFC3339Nano),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
	if t.TTL > 0 {
		ttl := t.TTL.Milliseconds()
		w.TTL = &ttl
	}
	switch t.Status {
	case store.JobQueued:
		w.StatusMessage = "The job is queued."
	case store.JobRunning:
		w.StatusMessage = "The job is running."
		var p struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(t.Progress, &p) == nil && p.Message != "" {
			// What the upstream last said of it, e.g. an upstream
			// task's status message.
			w.StatusMessage = "The job is running: " + p.Message
		}
	case store.JobCanceling:
		w.StatusMessage = "Cancellation was requested; the job is stopping."
	case store.JobSucceeded:
		w.StatusMessage = "The job completed."
	case store.JobCanceled:
		w.StatusMessage = "The job was cancelled."
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(t.Error, &e) == nil && e.Message != "" {
			// Not by the client: e.g. a reload removed its endpoint.
			w.StatusMessage = "The job was cancelled (" + e.Code + "): " + e.Message
		}
	case store.JobFailed:
		var e struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Retryable bool   `json:"retryable"`
		}
		switch {
		case json.Unmarshal(t.Error, &e) != nil || e.Message == "":
			w.StatusMessage = "The job failed."
		case e.Code != "" && e.Retryable:
			// A client sees why, and that starting it again is the answer.
			w.StatusMessage = "The job failed (" + e.Code + ", retryable): " + e.Message
		case e.Code != "":
			w.StatusMessage = "The job failed (" + e.Code + "): " + e.Message
		default:
			w.StatusMessage = "The job failed: " + e.Message
		}
	}
	return w
}

// createTaskResult answers a task-augmented request.
type createTaskResult struct {
	mcp.ResultBase
	Task wireTask `json:"task"`
}

// taskObjectResult is the result of tasks/get and tasks/cancel: the task
// itself.
type taskObjectResult struct {
	mcp.ResultBase
	wireTask
}

// listTasksResult is the result of tasks/list.
type listTasksResult struct {
	mcp.ResultBase
	Tasks      []wireTask `json:"tasks"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// taskIDParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// listTasksParams are the params of tasks/list.
type listTasksParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// id is the task id of p; "" when the request had no params.
func (p *taskIDParams) id() string {
	if p == nil {
		return ""
	}
	return p.TaskID
}

// cursor is the cursor of p; "" when the request had no params.
func (p *listTasksParams) cursor() string {
	if p == nil {
		return ""
	}
	return p.Cursor
}

// Interface guards.
var (
	_ mcp.Result = (*createTaskResult)(nil)
	_ mcp.Result = (*taskObjectResult)(nil)
	_ mcp.Result = (*listTasksResult)(nil)
	_ mcp.Params = (*taskIDParams)(nil)
	_ mcp.Params = (*listTasksParams)(nil)
)
