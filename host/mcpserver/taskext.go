package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// The io.modelcontextprotocol/tasks extension of the sessionless
// 2026-07-28 protocol, served by the tasks middleware (tasks.go).

// tasksExtension is the identifier of the 2026-07-28 tasks extension.
const tasksExtension = "io.modelcontextprotocol/tasks"

// codeMissingCapability is the JSON-RPC error of a request that needs a
// client capability (here: the tasks extension) the request did not
// declare.
const codeMissingCapability = -32021

// updateTask answers tasks/update outside the sessionless protocol, which
// has no such method.
func updateTask(context.Context, *mcp.ServerSession, *taskIDParams) (*extAck, error) {
	return nil, methodNotFound(fmt.Sprintf("%s is part of the %s tasks extension (protocol %s), not of protocol %s tasks",
		methodTasksUpdate, tasksExtension, sessionlessProtocolVersion, tasksProtocolVersion))
}

// sessionless reports whether a request is of the sessionless 2026-07-28
// protocol (the SDK has checked that the header matches its _meta).
func sessionless(extra *mcp.RequestExtra) bool {
	return extra != nil && extra.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion
}

// declaresTasks reports whether request _meta declares the tasks extension
// in its per-request client capabilities.
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension]
	return ok
}

// extTask is a Task of the 2026-07-28 extension: a CreateTaskResult
// (resultType "task") or a tasks/get result (resultType "complete", with
// the final result inlined once completed).
type extTask struct {
	mcp.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

// extAck is the empty acknowledgement of tasks/update and tasks/cancel.
type extAck struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// extTaskOf is the extension's view of t. A failed job is a completed
// task whose result has isError: the extension keeps "failed" for
// JSON-RPC errors, and a job's failure is its tool's error.
func extTaskOf(t *host.Task, resultType string, res *host.Result) *extTask {
	w := wireTaskOf(t)
	out := &extTask{ResultType: resultType, TaskID: w.TaskID, Status: w.Status, StatusMessage: w.StatusMessage,
		CreatedAt: w.CreatedAt, LastUpdatedAt: w.LastUpdatedAt, TTLMs: w.TTL, PollIntervalMs: w.PollInterval}
	if out.Status == taskFailed {
		out.Status = taskCompleted
	}
	if out.Status == taskCompleted && res != nil {
		out.Result = toolResult(res)
	}
	return out
}

// startExtTask answers a tools/call of the sessionless protocol whose
// client declared the tasks extension: a CreateTaskResult for a task tool,
// the tool's error result when the host refuses at once, nil, nil (a plain
// call) for any other tool.
func (ep *Endpoint) startExtTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	p := planOf(ctx)
	if p.h == nil || !p.tool.AcceptsTasks() {
		return nil, nil
	}
	cr := p.callRequest(req.Params.Arguments)
	if res := needsAgent(cr.Tool, cr.AgentID); res != nil {
		return res, nil
	}
	t, res, err := p.h.StartTask(ctx, cr)
	switch {
	case err != nil:
		return nil, err
	case res != nil:
		return toolResult(res), nil
	}
	return extTaskOf(t, "task", nil), nil
}

// missingTasksCapability is the error of an extension request whose client
// did not declare the extension.
func missingTasksCapability(method string) error {
	return &jsonrpc.Error{Code: codeMissingCapability,
		Message: fmt.Sprintf("Missing required client capability: %s needs the %s extension in the request's client capabilities", method, tasksExtension),
		Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)}
}

// serveExtTask serves a tasks/* request of the sessionless protocol.
func (ep *Endpoint) serveExtTask(ctx context.Context, method string, params mcp.Params) (mcp.Result, error) {
	var id string
	var meta map[string]any
	if p, ok := params.(*taskIDParams); ok && p != nil {
		id, meta = p.TaskID, p.Meta
	}
	switch method {
	case methodTasksResult, methodTasksList:
		return nil, methodNotFound(fmt.Sprintf("%s is not part of the %s tasks extension (protocol %s): poll tasks/get",
			method, tasksExtension, sessionlessProtocolVersion))
	}
	if !declaresTasks(meta) {
		return nil, missingTasksCapability(method)
	}
	var res mcp.Result
	var err error
	switch method {
	case methodTasksGet:
		res, err = serveTask(ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extTask, error) {
			t, err := h.GetTask(ctx, scope, id)
			if err != nil {
				return nil, nil, taskError(err, id)
			}
			var final *host.Result
			if t.Status == store.JobSucceeded || t.Status == store.JobFailed {
				if t, final, err = h.WaitTask(ctx, scope, id); err != nil { // final: returns at once
					return nil, nil, taskError(err, id)
				}
			}
			return t, extTaskOf(t, "complete", final), nil
		})
	case methodTasksUpdate:
		// A job never asks the client for input: there is nothing to
		// update, but the task must exist.
		res, err = serveTask(ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extAck, error) {
			t, err := h.GetTask(ctx, scope, id)
			if err != nil {
				return nil, nil, taskError(err, id)
			}
			return t, &extAck{ResultType: "complete"}, nil
		})
	case methodTasksCancel:
		// Cooperative and eventually consistent: the runner stops the job
		// on whichever replica runs it; a task that finished first stays
		// finished.
		res, err = serveTask(ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extAck, error) {
			t, err := h.CancelTask(ctx, scope, id)
			if err != nil && !errors.Is(err, store.ErrIllegalTransition) {
				return nil, nil, taskError(err, id)
			}
			return t, &extAck{ResultType: "complete"}, nil
		})
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Interface guards.
var (
	_ mcp.Result = (*extTask)(nil)
	_ mcp.Result = (*extAck)(nil)
)
