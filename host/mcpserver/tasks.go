package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// MCP Tasks (protocol 2025-11-25) for async_job operations.
//
// A task-augmented tools/call of an async_job's start tool creates its job
// and answers a CreateTaskResult; tasks/get, tasks/result, tasks/list and
// tasks/cancel read and drive the job. The host does the work
// (host.StartTask, GetTask, WaitTask, ListTasks, CancelTask) and the jobs
// live in the shared store, so any replica serves any task. This package
// only translates: the methods are here, the Task object and the methods'
// params and results in taskwire.go.
//
// go-sdk v1.8.0 knows nothing of tasks, so the translation hooks in at the
// points the SDK leaves open, and nowhere else:
//
//   - tasks/* are registered as custom methods (mcp.AddReceivingCustomMethod):
//     the SDK then accepts them, with all its session checks (Mcp-Session-Id,
//     400/404, replica restore), SSE streams, keep-alives and resumption.
//   - A receiving middleware, outside the session middleware, adds the
//     tasks capability to the initialize result and execution.taskSupport
//     to the task tools in the tools/list result (neither
//     mcp.ServerCapabilities nor mcp.Tool has a field for them: the
//     results are wrapped with a MarshalJSON that adds the field:
//     results.go), and answers task-augmented tools/call requests. The
//     task methods find their host and caller in the request's plan
//     (plan.go).
//   - The SDK drops params.task when it parses tools/call params, so
//     markTasks, run by ServeHTTP before the SDK reads the body, copies
//     params.task into an internal request header; the middleware finds it
//     in RequestExtra.Header (taskheader.go).
//   - A session another replica created and this one serves from its store
//     record (sessions.go) runs on a transport built outside the SDK's HTTP
//     handler, and such a transport checks incoming methods against the
//     standard ones only (the server's custom methods are not linked to
//     it), refusing tasks/* with 400. For those sessions markTasks sends a
//     tasks/* request to the SDK as a ping with the same id, the task
//     request riding in the internal header; the middleware answers the
//     ping with the task method's result.
//
// The sessionless protocol (2026-07-28, stateless endpoints) has tasks as
// the io.modelcontextprotocol/tasks extension instead: server/discover
// advertises it; a tools/call of a task tool whose request declares the
// extension answers a CreateTaskResult (resultType "task"); tasks/get
// inlines the final result; tasks/update and tasks/cancel acknowledge;
// tasks/result and tasks/list do not exist there (-32601), and params.task
// is ignored. The same middleware serves both generations (taskext.go).

// Task method names and _meta keys (MCP 2025-11-25).
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
	methodTasksCancel = "tasks/cancel"

	methodTasksUpdate = "tasks/update" // the 2026-07-28 extension's

	metaRelatedTask       = "io.modelcontextprotocol/related-task"
	metaImmediateResponse = "io.modelcontextprotocol/model-immediate-response"
	// metaTaskProgress carries a job's last progress report on tasks/get.
	metaTaskProgress = "io.crank/progress"
)

// Protocol versions that change what tasks are.
const (
	tasksProtocolVersion       = "2025-11-25" // first with the tasks capability
	sessionlessProtocolVersion = "2026-07-28" // tasks become an extension
)

// taskListPage is the number of tasks per tasks/list page.
const taskListPage = 50

// taskCancelWait bounds how long tasks/cancel waits for a running job's
// runner to stop it, so that the answer can say "cancelled" (or the status
// it reached first); a job still stopping after that is "working".
const taskCancelWait = 5 * time.Second

// tasksCapability is the server's tasks capability: tasks/list,
// tasks/cancel and task-augmented tools/call.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskMethod serves one tasks/* method from its raw params.
type taskMethod func(ctx context.Context, ss *mcp.ServerSession, params json.RawMessage) (mcp.Result, error)

// addTasks makes the endpoint's MCP server serve tasks' methods, and
// reports whether it does: then tasksMiddleware is one of the endpoint's
// middlewares (endpoint.go middlewares).
func (ep *Endpoint) addTasks() bool {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(ep.server, methodTasksGet, ep.getTask),
		mcp.AddReceivingCustomMethod(ep.server, methodTasksResult, ep.taskResult),
		mcp.AddReceivingCustomMethod(ep.server, methodTasksList, ep.listTasks),
		mcp.AddReceivingCustomMethod(ep.server, methodTasksCancel, ep.cancelTask),
		// Served by the middleware (serveExtTask) under the sessionless
		// protocol; registered so that the SDK accepts it.
		mcp.AddReceivingCustomMethod(ep.server, methodTasksUpdate, updateTask),
	} {
		if err != nil {
			ep.logger.Error("MCP tasks not served", zap.Error(err))
			return false
		}
	}
	return true
}

// taskMethod returns the tasks/* method of that name, nil for another
// name.
func (ep *Endpoint) taskMethod(name string) taskMethod {
	switch name {
	case methodTasksGet:
		return rawTaskMethod(ep.getTask)
	case methodTasksResult:
		return rawTaskMethod(ep.taskResult)
	case methodTasksList:
		return rawTaskMethod(ep.listTasks)
	case methodTasksCancel:
		return rawTaskMethod(ep.cancelTask)
	case methodTasksUpdate:
		return rawTaskMethod(updateTask)
	}
	return nil
}

// rawTaskMethod makes a taskMethod of a typed one, for tunnelled requests.
func rawTaskMethod[P any, R mcp.Result](f func(context.Context, *mcp.ServerSession, *P) (R, error)) taskMethod {
	return func(ctx context.Context, ss *mcp.ServerSession, raw json.RawMessage) (mcp.Result, error) {
		p := new(P)
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, p); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + err.Error()}
			}
		}
		res, err := f(ctx, ss, p)
		if err != nil {
			return nil, err
		}
		return res, nil
	}
}

// tasksMiddleware is the receiving middleware of the tasks feature.
func (ep *Endpoint) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil && ir.ProtocolVersion >= tasksProtocolVersion &&
				ir.ProtocolVersion < sessionlessProtocolVersion {
				return &initializeResult{ir}, nil
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				if h := planOf(ctx).h; h != nil && slices.ContainsFunc(lr.Tools, func(t *mcp.Tool) bool { return h.Tool(t.Name).AcceptsTasks() }) {
					return &listToolsResult{ListToolsResult: lr, outputs: taskOutputSchemas(h)}, nil
				}
			}
			return res, err
		case "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil && dr.Capabilities != nil {
				dr.Capabilities.AddExtension(tasksExtension, nil) // a copy of the server's
			}
			return res, err
		case "tools/call":
			cr, ok := req.(*mcp.CallToolRequest)
			if !ok || cr.Params == nil {
				break
			}
			if sessionless(req.GetExtra()) {
				if declaresTasks(cr.Params.Meta) {
					if res, err := ep.startExtTask(ctx, cr); res != nil || err != nil {
						return res, err
					}
				}
				break
			}
			env, marked := envelope(req.GetExtra())
			if !marked || len(env.Task) == 0 {
				break
			}
			if res, err := ep.startTask(ctx, cr, env.Task); res != nil || err != nil {
				return res, err
			}
		case "ping":
			env, marked := envelope(req.GetExtra())
			f := ep.taskMethod(env.Method)
			if !marked || f == nil {
				break
			}
			ss, _ := req.GetSession().(*mcp.ServerSession)
			return f(ep.withPost(ctx, req.GetExtra()), ss, env.Params)
		case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
			extra := req.GetExtra()
			ctx = ep.withPost(ctx, extra)
			if sessionless(extra) {
				return ep.serveExtTask(ctx, method, req.GetParams())
			}
		}
		return next(ctx, method, req)
	}
}

// startTask answers a task-augmented tools/call: a CreateTaskResult when
// the job was created. A call the host refuses at once (bad arguments, a
// quota, the store unavailable) gets the error CallToolResult the call
// without params.task would have got, as no task exists to carry it. It
// returns nil, nil for a tool the host does not know: the SDK answers that.
func (ep *Endpoint) startTask(ctx context.Context, req *mcp.CallToolRequest, task json.RawMessage) (mcp.Result, error) {
	p := planOf(ctx)
	if p.h == nil {
		return nil, nil
	}
	var meta struct {
		TTL *float64 `json:"ttl"`
	}
	if err := json.Unmarshal(task, &meta); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `params.task: must be an object such as {"ttl": 60000} (TaskMetadata)`}
	}
	if meta.TTL != nil && *meta.TTL < 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.task.ttl: must be a non-negative number of milliseconds"}
	}
	// The requested ttl is advisory (the spec lets the receiver override
	// it): a job lives for its operation's timeout plus its retention.
	cr := p.callRequest(req.Params.Arguments)
	if res := needsAgent(cr.Tool, cr.AgentID); res != nil {
		return res, nil
	}
	t, res, err := p.h.StartTask(ctx, cr)
	switch {
	case errors.Is(err, host.ErrUnknownTool):
		return nil, nil
	case errors.Is(err, host.ErrNotTaskTool):
		return nil, methodNotFound(fmt.Sprintf(
			"tool %q does not support task-augmented calls (its execution.taskSupport is forbidden): call it without params.task",
			req.Params.Name))
	case err != nil:
		return nil, err
	case res != nil:
		return toolResult(res), nil
	}
	out := &createTaskResult{Task: wireTaskOf(t)}
	out.Meta = mcp.Meta{metaImmediateResponse: fmt.Sprintf(
		"Started task %s for tool %s; its result will be available through tasks/result.", t.ID, t.Tool)}
	return out, nil
}

// methodNotFound is a -32601 error that keeps its message. The SDK replaces
// the message of any error that errors.Is jsonrpc2's ErrMethodNotFound (any
// -32601 *jsonrpc.Error) with the bare method name; this one is not, and
// becomes its -32601 wire error through errors.As.
type methodNotFound string

func (e methodNotFound) Error() string { return string(e) }

func (e methodNotFound) As(target any) bool {
	w, ok := target.(**jsonrpc.Error)
	if ok {
		*w = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: string(e)}
	}
	return ok
}

// taskError is the JSON-RPC error of a failed task operation.
func taskError(err error, id string) error {
	switch {
	case host.EvictionNotice(err) != "":
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: " + host.EvictionNotice(err)}
	case errors.Is(err, store.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"Failed to retrieve task: task %q not found (unknown, expired, or another agent's or workspace's)", id)}
	case errors.Is(err, store.ErrUnavailable):
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task store (etcd) is unavailable; retry shortly",
			Data: json.RawMessage(`{"retryable":true}`)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %q: %v", id, err)}
}

// serveTask runs a task method on the host and for the caller of the
// request's plan, after checking its task id, and writes the request's
// audit record (one per request, whatever host calls it made).
func serveTask[R any](ctx context.Context, method, id string, needID bool,
	f func(h *host.Host, scope host.Scope) (*host.Task, R, error)) (R, error) {
	var zero R
	p := planOf(ctx)
	switch {
	case p.h == nil:
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks are not available on this endpoint"}
	case needID && id == "":
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId: required (the taskId of the CreateTaskResult)"}
	}
	start := time.Now()
	t, res, err := f(p.h, p.scope)
	p.h.AuditTask(method, p.scope, id, t, err, time.Since(start))
	if err != nil {
		return zero, err
	}
	return res, nil
}

// getTask serves tasks/get.
func (ep *Endpoint) getTask(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskObjectResult, error) {
	id := p.id()
	return serveTask(ctx, methodTasksGet, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *taskObjectResult, error) {
		t, err := h.GetTask(ctx, scope, id)
		if err != nil {
			return nil, nil, taskError(err, id)
		}
		out := &taskObjectResult{wireTask: wireTaskOf(t)}
		if len(t.Progress) > 0 && json.Valid(t.Progress) {
			out.Meta = mcp.Meta{metaTaskProgress: json.RawMessage(t.Progress)}
		}
		return t, out, nil
	})
}

// taskResult serves tasks/result: it waits until the task is final (the
// response is an SSE stream kept alive meanwhile, unless the endpoint
// answers JSON) and returns the CallToolResult its tools/call would have
// returned, tied to the task by the related-task _meta. A wait is bounded
// per session and ends when its client has gone (taskwait.go).
func (ep *Endpoint) taskResult(ctx context.Context, ss *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	id := p.id()
	return serveTask(ctx, methodTasksResult, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *mcp.CallToolResult, error) {
		wctx, release, err := ep.resultWait(ctx, ss)
		if err != nil {
			return nil, nil, err
		}
		defer release()
		t, res, err := h.WaitTask(wctx, scope, id)
		if err != nil && errors.Is(context.Cause(wctx), errClientGone) && ctx.Err() == nil {
			return nil, nil, ep.clientGoneError(id)
		}
		if err != nil {
			return nil, nil, taskError(err, id)
		}
		out := toolResult(res)
		out.Meta = mcp.Meta{metaRelatedTask: map[string]any{"taskId": t.ID}}
		return t, out, nil
	})
}

// listTasks serves tasks/list: the caller's tasks (all its jobs, whether
// started as tasks or with a start tool), newest first, taskListPage at a
// time.
func (ep *Endpoint) listTasks(ctx context.Context, _ *mcp.ServerSession, p *listTasksParams) (*listTasksResult, error) {
	return serveTask(ctx, methodTasksList, "", false, func(h *host.Host, scope host.Scope) (*host.Task, *listTasksResult, error) {
		out, err := listPage(ctx, h, scope, p.cursor(), ep.keepTask(planOf(ctx)))
		return nil, out, err
	})
}

// listPage is the page of the caller's tasks after cursor. The store pages
// and makes the cursor (the creation time and id of the page's last task);
// one it did not hand out is refused. keep, when set, leaves out the tasks
// it is false for (the policy's, policy.go).
func listPage(ctx context.Context, h *host.Host, scope host.Scope, cursor string, keep func(*host.Task) bool) (*listTasksResult, error) {
	tasks, next, err := h.ListTasks(ctx, scope, cursor, taskListPage)
	if errors.Is(err, store.ErrInvalid) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.cursor: not a cursor this server handed out (pass nextCursor unchanged)"}
	}
	if err != nil {
		return nil, taskError(err, "")
	}
	out := &listTasksResult{Tasks: make([]wireTask, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		if keep == nil || keep(t) {
			out.Tasks = append(out.Tasks, wireTaskOf(t))
		}
	}
	return out, nil
}

// cancelTask serves tasks/cancel. A final task cannot be cancelled
// (-32602). A running job's runner, on whichever replica, stops it; the
// answer waits for that (up to taskCancelWait) so that it carries the
// final status.
func (ep *Endpoint) cancelTask(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskObjectResult, error) {
	id := p.id()
	return serveTask(ctx, methodTasksCancel, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *taskObjectResult, error) {
		t, err := h.GetTask(ctx, scope, id)
		if err == nil && t.Status.Terminal() {
			err = store.ErrIllegalTransition
		}
		if err == nil {
			t, err = h.CancelTask(ctx, scope, id)
		}
		if errors.Is(err, store.ErrIllegalTransition) {
			status := "final"
			if t != nil {
				status = taskStatus(t.Status)
			}
			return t, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
				"Cannot cancel task %q: already in terminal status '%s'", id, status)}
		}
		if err != nil {
			return nil, nil, taskError(err, id)
		}
		if !t.Status.Terminal() {
			wctx, cancel := context.WithTimeout(ctx, taskCancelWait)
			if final, _, err := h.WaitTask(wctx, scope, id); err == nil {
				t = final
			}
			cancel()
		}
		return t, &taskObjectResult{wireTask: wireTaskOf(t)}, nil
	})
}
