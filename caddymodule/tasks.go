package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
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
// live in the shared store, so any replica serves any task. This file only
// translates.
//
// go-sdk v1.8.0 knows nothing of tasks, so the translation hooks in at the
// points the SDK leaves open, and nowhere else:
//
//   - tasks/* are registered as custom methods (mcp.AddReceivingCustomMethod):
//     the SDK then accepts them, with all its session checks (Mcp-Session-Id,
//     400/404, replica restore), SSE streams, keep-alives and resumption.
//   - A receiving middleware, outside the session middleware, passes the
//     caller's scope to those methods, adds the tasks capability to the
//     initialize result and execution.taskSupport to the task tools in the
//     tools/list result (neither mcp.ServerCapabilities nor mcp.Tool has a
//     field for them: the results are wrapped with a MarshalJSON that adds
//     the field), and answers task-augmented tools/call requests.
//   - The SDK drops params.task when it parses tools/call params, so
//     markTasks, run by ServeHTTP before the SDK reads the body, copies
//     params.task into an internal request header; the middleware finds it
//     in RequestExtra.Header.
//   - A session another replica created and this one serves from its store
//     record (replica.go) runs on a transport built outside the SDK's HTTP
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
// is ignored. The same middleware serves both generations.

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

// tasksExtension is the identifier of the 2026-07-28 tasks extension.
const tasksExtension = "io.modelcontextprotocol/tasks"

// codeMissingCapability is the JSON-RPC error of a request that needs a
// client capability (here: the tasks extension) the request did not
// declare.
const codeMissingCapability = -32021

// taskHeader is the internal request header through which markTasks hands
// a taskEnvelope to the middleware. A client's own header of that name is
// removed.
const taskHeader = "X-Crank-Internal-Task"

// taskEnvelope is what taskHeader carries: params.task of a tools/call, or
// a tunnelled tasks/* request.
type taskEnvelope struct {
	Task   json.RawMessage `json:"task,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// envelope returns the taskEnvelope of a request, if it has one.
func envelope(extra *mcp.RequestExtra) (taskEnvelope, bool) {
	var env taskEnvelope
	if extra == nil || extra.Header == nil {
		return env, false
	}
	raw := extra.Header.Get(taskHeader)
	return env, raw != "" && json.Unmarshal([]byte(raw), &env) == nil
}

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

// addTasks makes the endpoint's MCP server serve tasks. It must run after
// the session middleware is added, so that it wraps it: the session
// middleware reads the initialize result before it is wrapped here.
func (ep *endpoint) addTasks() {
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
			return
		}
	}
	ep.server.AddReceivingMiddleware(ep.tasksMiddleware)
}

// taskMethod returns the tasks/* method of that name, nil for another
// name.
func (ep *endpoint) taskMethod(name string) taskMethod {
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

// updateTask answers tasks/update outside the sessionless protocol, which
// has no such method.
func updateTask(context.Context, *mcp.ServerSession, *taskIDParams) (*extAck, error) {
	return nil, methodNotFound(fmt.Sprintf("%s is part of the %s tasks extension (protocol %s), not of protocol %s tasks",
		methodTasksUpdate, tasksExtension, sessionlessProtocolVersion, tasksProtocolVersion))
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

// markTasks prepares a POST for the middleware, before the SDK reads it:
// params.task of a tools/call goes into taskHeader; a tasks/* request for a
// session the SDK's handler does not hold becomes a ping with the request
// in taskHeader. The body is read up to the SDK's limit and handed on,
// unchanged but for that.
func (ep *endpoint) markTasks(r *http.Request) {
	r.Header.Del(taskHeader)
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPeekBytes+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil || len(body) > maxPeekBytes || !bytes.Contains(body, []byte(`"task`)) {
		return
	}
	// Exact key matches, as the SDK's decoder does (encoding/json would
	// also take "Task").
	var msg, params map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return // a batch or malformed JSON: the SDK decides
	}
	var env taskEnvelope
	switch method, _ := strconv.Unquote(string(msg["method"])); method {
	case "tools/call":
		if json.Unmarshal(msg["params"], &params) != nil {
			return
		}
		env.Task = params["task"]
		if len(env.Task) == 0 || string(env.Task) == "null" {
			return
		}
	case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
		id := r.Header.Get(sessionIDHeader)
		if !ep.transport.stateful || id == "" || len(msg["id"]) == 0 || ep.sdkHolds(id) {
			return
		}
		env.Method, env.Params = method, msg["params"]
		ping, _ := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": msg["id"], "method": json.RawMessage(`"ping"`)})
		r.Body = struct {
			io.Reader
			io.Closer
		}{bytes.NewReader(ping), rest}
		r.ContentLength = int64(len(ping))
	default:
		return
	}
	raw, _ := json.Marshal(env)
	r.Header.Set(taskHeader, string(raw))
}

// sdkHolds reports whether the SDK's handler holds session id (it created
// the session here and it is open).
func (ep *endpoint) sdkHolds(id string) bool {
	ls := ep.replicas.get(id)
	return ls != nil && ls.transport == nil && !ls.closed.Load()
}

// callerKey is the context key of the caller's scope, which the middleware
// hands to the task methods (their handlers do not see RequestExtra).
type callerKey struct{}

// tasksMiddleware is the receiving middleware of the tasks feature.
func (ep *endpoint) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
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
				if h := ep.active.Load(); h != nil && slices.ContainsFunc(lr.Tools, func(t *mcp.Tool) bool { return h.TaskTool(t.Name) }) {
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
			return f(context.WithValue(ctx, callerKey{}, ep.callerScope(req.GetExtra(), ss)), ss, env.Params)
		case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
			extra := req.GetExtra()
			ss, _ := req.GetSession().(*mcp.ServerSession)
			ctx = context.WithValue(ctx, callerKey{}, ep.callerScope(extra, ss))
			if sessionless(extra) {
				return ep.serveExtTask(ctx, method, req.GetParams())
			}
		}
		return next(ctx, method, req)
	}
}

// callerScope is the workspace and agent a request runs as: the same as
// its tool calls (callerAgent).
func (ep *endpoint) callerScope(extra *mcp.RequestExtra, ss *mcp.ServerSession) host.Scope {
	return host.Scope{WorkspaceID: ep.workspace, AgentID: ep.callerAgent(extra, ss)}
}

// hostCall is the host call of a tools/call: the tool and its arguments in
// the caller's scope, with the caller's trace context.
func (ep *endpoint) hostCall(req *mcp.CallToolRequest) host.CallRequest {
	extra := req.Extra
	s := ep.callerScope(extra, req.Session)
	cr := host.CallRequest{Tool: req.Params.Name, Arguments: req.Params.Arguments, WorkspaceID: s.WorkspaceID, AgentID: s.AgentID}
	if extra != nil && extra.Header != nil {
		cr.TraceParent = extra.Header.Get("Traceparent")
		cr.TraceState = extra.Header.Get("Tracestate")
	}
	return cr
}

// toolResult is the CallToolResult of a host result.
func toolResult(res *host.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
	if res.Structured != nil {
		out.StructuredContent = res.Structured
	}
	return out
}

// startTask answers a task-augmented tools/call: a CreateTaskResult when
// the job was created. A call the host refuses at once (bad arguments, a
// quota, the store unavailable) gets the error CallToolResult the call
// without params.task would have got, as no task exists to carry it. It
// returns nil, nil for a tool the host does not know: the SDK answers that.
func (ep *endpoint) startTask(ctx context.Context, req *mcp.CallToolRequest, task json.RawMessage) (mcp.Result, error) {
	h := ep.active.Load()
	if h == nil {
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
	t, res, err := h.StartTask(ctx, ep.hostCall(req))
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
	case store.JobCanceling:
		w.StatusMessage = "Cancellation was requested; the job is stopping."
	case store.JobSucceeded:
		w.StatusMessage = "The job completed."
	case store.JobCanceled:
		w.StatusMessage = "The job was cancelled."
	case store.JobFailed:
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(t.Error, &e) == nil && e.Message != "" {
			w.StatusMessage = "The job failed: " + e.Message
		} else {
			w.StatusMessage = "The job failed."
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

// taskCaller returns the serving host and the caller's scope for a task
// method, and checks its task id.
func (ep *endpoint) taskCaller(ctx context.Context, id string, needID bool) (*host.Host, host.Scope, error) {
	scope, ok := ctx.Value(callerKey{}).(host.Scope)
	h := ep.active.Load()
	if !ok || h == nil {
		return nil, scope, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "tasks are not available on this endpoint"}
	}
	if needID && id == "" {
		return nil, scope, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.taskId: required (the taskId of the CreateTaskResult)"}
	}
	return h, scope, nil
}

// taskError is the JSON-RPC error of a failed task operation.
func taskError(err error, id string) error {
	switch {
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

// serveTask runs a task method for the caller in ctx and writes the
// request's audit record (one per request, whatever host calls it made).
func serveTask[R any](ep *endpoint, ctx context.Context, method, id string, needID bool,
	f func(h *host.Host, scope host.Scope) (*host.Task, R, error)) (R, error) {
	var zero R
	h, scope, err := ep.taskCaller(ctx, id, needID)
	if err != nil {
		return zero, err
	}
	start := time.Now()
	t, res, err := f(h, scope)
	h.AuditTask(method, scope, id, t, err, time.Since(start))
	if err != nil {
		return zero, err
	}
	return res, nil
}

// getTask serves tasks/get.
func (ep *endpoint) getTask(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskObjectResult, error) {
	id := p.id()
	return serveTask(ep, ctx, methodTasksGet, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *taskObjectResult, error) {
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
// returned, tied to the task by the related-task _meta.
func (ep *endpoint) taskResult(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	id := p.id()
	return serveTask(ep, ctx, methodTasksResult, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *mcp.CallToolResult, error) {
		t, res, err := h.WaitTask(ctx, scope, id)
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
func (ep *endpoint) listTasks(ctx context.Context, _ *mcp.ServerSession, p *listTasksParams) (*listTasksResult, error) {
	return serveTask(ep, ctx, methodTasksList, "", false, func(h *host.Host, scope host.Scope) (*host.Task, *listTasksResult, error) {
		out, err := listPage(ctx, h, scope, p.cursor())
		return nil, out, err
	})
}

// listPage is the page of the caller's tasks after cursor. The store pages
// and makes the cursor (the creation time and id of the page's last task);
// one it did not hand out is refused.
func listPage(ctx context.Context, h *host.Host, scope host.Scope, cursor string) (*listTasksResult, error) {
	tasks, next, err := h.ListTasks(ctx, scope, cursor, taskListPage)
	if errors.Is(err, store.ErrInvalid) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.cursor: not a cursor this server handed out (pass nextCursor unchanged)"}
	}
	if err != nil {
		return nil, taskError(err, "")
	}
	out := &listTasksResult{Tasks: make([]wireTask, len(tasks)), NextCursor: next}
	for i, t := range tasks {
		out.Tasks[i] = wireTaskOf(t)
	}
	return out, nil
}

// cancelTask serves tasks/cancel. A final task cannot be cancelled
// (-32602). A running job's runner, on whichever replica, stops it; the
// answer waits for that (up to taskCancelWait) so that it carries the
// final status.
func (ep *endpoint) cancelTask(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskObjectResult, error) {
	id := p.id()
	return serveTask(ep, ctx, methodTasksCancel, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *taskObjectResult, error) {
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
func (ep *endpoint) startExtTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	h := ep.active.Load()
	if h == nil || !h.TaskTool(req.Params.Name) {
		return nil, nil
	}
	t, res, err := h.StartTask(ctx, ep.hostCall(req))
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
func (ep *endpoint) serveExtTask(ctx context.Context, method string, params mcp.Params) (mcp.Result, error) {
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
		res, err = serveTask(ep, ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extTask, error) {
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
		res, err = serveTask(ep, ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extAck, error) {
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
		res, err = serveTask(ep, ctx, method, id, true, func(h *host.Host, scope host.Scope) (*host.Task, *extAck, error) {
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

// initializeResult is an initialize result with the tasks capability,
// which mcp.ServerCapabilities has no field for.
type initializeResult struct{ *mcp.InitializeResult }

func (r *initializeResult) MarshalJSON() ([]byte, error) {
	type capabilities struct {
		*mcp.ServerCapabilities
		Tasks json.RawMessage `json:"tasks"`
	}
	// The outer capabilities field shadows the embedded one.
	return json.Marshal(struct {
		*mcp.InitializeResult
		Capabilities capabilities `json:"capabilities"`
	}{r.InitializeResult, capabilities{r.Capabilities, tasksCapability}})
}

// listToolsResult is a tools/list result whose task tools say
// execution.taskSupport "optional", which mcp.Tool has no field for, and
// have the output schema taskOutputSchemas gives them.
type listToolsResult struct {
	*mcp.ListToolsResult
	// outputs are the output schemas of the task tools, by name.
	outputs map[string]json.RawMessage
}

type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

func (r *listToolsResult) MarshalJSON() ([]byte, error) {
	type tool struct {
		*mcp.Tool
		Execution    *toolExecution `json:"execution,omitempty"`
		OutputSchema any            `json:"outputSchema,omitempty"`
	}
	tools := make([]tool, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = tool{Tool: t, OutputSchema: t.OutputSchema}
		if out, ok := r.outputs[t.Name]; ok {
			tools[i].Execution = &toolExecution{TaskSupport: "optional"}
			tools[i].OutputSchema = out
		}
	}
	return json.Marshal(struct {
		*mcp.ListToolsResult
		Tools []tool `json:"tools"`
	}{r.ListToolsResult, tools})
}

// taskOutputSchemas returns the output schema of each task tool of h: its
// start result (the job handle) or, for the CallToolResult tasks/result
// returns, the operation's own result, which the family's result tool
// describes as its "result" property. Clients check a task's result
// against the tool's output schema (the TypeScript SDK does), so it must
// admit both.
func taskOutputSchemas(h *host.Host) map[string]json.RawMessage {
	byName := map[string]*host.Operation{}
	for _, op := range h.Operations() {
		byName[op.Name] = op
	}
	out := map[string]json.RawMessage{}
	for name, op := range byName {
		if !h.TaskTool(name) || op.Family == nil {
			continue
		}
		var start any = map[string]any{"type": "object"}
		if len(op.OutputSchema) > 0 {
			start = op.OutputSchema
		}
		var result any = map[string]any{"type": "object"}
		if rt := byName[op.Family.Names[host.RoleResult]]; rt != nil {
			var s struct {
				Properties struct {
					Result json.RawMessage `json:"result"`
				} `json:"properties"`
			}
			if json.Unmarshal(rt.OutputSchema, &s) == nil && len(s.Properties.Result) > 0 {
				result = s.Properties.Result
			}
		}
		out[name], _ = json.Marshal(map[string]any{"type": "object", "anyOf": []any{start, result},
			"description": "A plain call returns the job handle; the result of the call run as a task (tasks/result) is the operation's result."})
	}
	return out
}

// Interface guards.
var (
	_ mcp.Result     = (*createTaskResult)(nil)
	_ mcp.Result     = (*taskObjectResult)(nil)
	_ mcp.Result     = (*listTasksResult)(nil)
	_ mcp.Result     = (*extTask)(nil)
	_ mcp.Result     = (*extAck)(nil)
	_ mcp.Result     = (*initializeResult)(nil)
	_ mcp.Result     = (*listToolsResult)(nil)
	_ mcp.Params     = (*taskIDParams)(nil)
	_ mcp.Params     = (*listTasksParams)(nil)
	_ json.Marshaler = (*initializeResult)(nil)
	_ json.Marshaler = (*listToolsResult)(nil)
)
