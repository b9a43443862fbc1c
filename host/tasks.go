package host

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
)

// Task is an async job seen as an MCP task: a task-augmented call of an
// async_job's start tool creates the job, and tasks/get, tasks/result,
// tasks/list and tasks/cancel read and drive it. Tasks and the job tools
// share one store, so a job started as a task can be followed with the
// status tool and the other way round, from any replica.
type Task struct {
	ID string
	// Tool is the start tool the task was created through.
	Tool      string
	Status    store.JobStatus
	Progress  json.RawMessage
	Error     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// TTL is how long the task lives from its creation (its timeout plus
	// the retention of its result).
	TTL time.Duration
	// PollInterval is the interval a client should poll tasks/get at.
	PollInterval time.Duration
}

// ErrNotTaskTool: the tool does not accept task-augmented calls.
var ErrNotTaskTool = fmt.Errorf("tool does not support tasks")

// taskPollInterval is the poll interval suggested to task clients.
const taskPollInterval = time.Second

// StartTask starts the job of a task-augmented call. A tool-level problem
// (bad arguments, a quota, the store unavailable) comes back as an error
// Result, like Call's; err is ErrUnknownTool or ErrNotTaskTool.
func (h *Host) StartTask(ctx context.Context, req CallRequest) (_ *Task, res *Result, _ error) {
	op := req.Tool.b
	if op == nil {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownTool, req.Tool.name)
	}
	if !req.Tool.AcceptsTasks() {
		return nil, nil, fmt.Errorf("%w: %q (only the start tool of an async_job does)", ErrNotTaskTool, req.Tool.name)
	}
	ctx, obs := h.observeCall(ctx, op, &req) // telemetry.go
	defer func() {
		r := res
		if r == nil {
			r = &Result{} // the job started
		}
		obs.end(r)
	}()
	args := normalizeArguments(req.Arguments)
	if msg := validateArguments(op.Operation, args); msg != "" {
		return nil, classed(errorResult(fmt.Sprintf("invalid arguments for tool %q: %s", op.Name, msg)), OutcomeInvalidArguments), nil
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	start := time.Now()
	job, err := h.createJob(ctx, op.base, req, args)
	if err != nil {
		res := h.storeError("job", "", err)
		h.auditCall(op, req, "", res, time.Since(start))
		return nil, res, nil
	}
	h.auditCall(op, req, job.ID, &Result{}, time.Since(start))
	return h.task(job), nil, nil
}

// task is a job as a task, its progress and error redacted (again: a
// record written by an earlier release may not have been).
func (h *Host) task(job *store.AsyncJobHandle) *Task {
	t := &Task{ID: job.ID, Tool: job.OperationID, Status: job.Status, Progress: h.redact.JSON(job.Progress), Error: h.redact.JSON(job.Error),
		CreatedAt: job.CreatedAt, UpdatedAt: job.UpdatedAt, TTL: job.MaxRuntime + job.Retention,
		PollInterval: taskPollInterval}
	if op, ok := h.tab.Load().families[job.OperationID]; ok {
		t.Tool = op.Family.Names[opsfile.RoleStart]
	}
	if job.Status.Terminal() {
		t.Progress = nil // a final task's status says all (see jobStatusView)
	}
	return t
}

// GetTask returns a task visible to scope; store.ErrNotFound when there is
// none.
func (h *Host) GetTask(ctx context.Context, scope Scope, id string) (*Task, error) {
	job, err := h.store.GetJob(ctx, store.Scope(scope), id)
	if err != nil {
		return nil, err
	}
	return h.task(job), nil
}

// WaitTask blocks until the task is final (or ctx ends) and returns it
// with the tool result it produced: the operation's own result, an error
// result for a failed or cancelled job.
func (h *Host) WaitTask(ctx context.Context, scope Scope, id string) (*Task, *Result, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := h.store.WatchJob(wctx, store.Scope(scope), id)
	if err != nil {
		return nil, nil, err
	}
	for ev := range events {
		if ev.Gone {
			// Expired, or evicted: the read says which.
			if _, err := h.store.GetJob(ctx, store.Scope(scope), id); err != nil {
				return nil, nil, err
			}
			return nil, nil, store.ErrNotFound
		}
		if job := ev.Job; job.Status.Terminal() {
			if job.ResultBytes > 0 { // kept apart from the record
				if job, err = h.store.GetJobResult(ctx, store.Scope(scope), id); err != nil {
					return nil, nil, err
				}
			}
			return h.task(job), h.redacted(taskResult(job)), nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, store.ErrNotFound
}

// taskResult is the tool result of a final job.
func taskResult(job *store.AsyncJobHandle) *Result {
	switch job.Status {
	case store.JobSucceeded:
		var o jobOutcome
		_ = json.Unmarshal(job.Result, &o)
		return &Result{Structured: o.Structured, Text: o.text()}
	case store.JobCanceled:
		return errorResult("the task was cancelled")
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(job.Error, &e) != nil || e.Message == "" {
		e.Message = string(job.Error)
	}
	return errorResult("the task failed: " + e.Message)
}

// CancelTask cancels a task; cancelling a final task fails with
// store.ErrIllegalTransition (already cancelled: returned unchanged).
func (h *Host) CancelTask(ctx context.Context, scope Scope, id string) (*Task, error) {
	job, err := h.store.CancelJob(ctx, store.Scope(scope), id, "cancelled by the client (tasks/cancel)")
	if err != nil {
		return nil, err
	}
	return h.task(job), nil
}

// ListTasks returns a page of the tasks visible to scope, newest first: at
// most limit of them, after the opaque position after ("" for the first
// page). next is the position of the following page, "" when none follows.
// Positions are sealed (cursor.go), bound to the scope's workspace and
// agent: one ListTasks did not hand out to that scope fails with
// store.ErrInvalid.
func (h *Host) ListTasks(ctx context.Context, scope Scope, after string, limit int) (tasks []*Task, next string, err error) {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return nil, "", err
	}
	bind := []string{scope.WorkspaceID, scope.AgentID}
	var pos string
	if after != "" {
		var ok bool
		if pos, ok = openCursor(key, taskListCursor, bind, after); !ok {
			return nil, "", fmt.Errorf("%w: not a position tasks/list handed out to this caller", store.ErrInvalid)
		}
	}
	jobs, next, err := h.store.ListJobs(ctx, store.Scope(scope), pos, limit)
	if err != nil {
		return nil, "", err
	}
	if next != "" {
		next = sealCursor(key, taskListCursor, bind, next)
	}
	tasks = make([]*Task, len(jobs))
	for i, j := range jobs {
		tasks[i] = h.task(j)
	}
	return tasks, next, nil
}

// taskRoles are the family roles of the task methods, for the audit.
var taskRoles = map[string]string{
	"tasks/get": opsfile.RoleStatus, "tasks/result": opsfile.RoleResult, "tasks/cancel": opsfile.RoleCancel, "tasks/list": "list",
}

// AuditTask writes the audit record of one task request (tasks/get,
// tasks/result, tasks/cancel, tasks/list), as the family tool of the same
// role would: event job.status, job.result, job.cancel (job.list), with the
// method in "via". The MCP face calls it once per request, as a request
// may use several of the methods above. t may be nil.
func (h *Host) AuditTask(method string, scope Scope, id string, t *Task, err error, took time.Duration) {
	role, ok := taskRoles[method]
	if !ok {
		role = method
	}
	fields := []zap.Field{
		zap.String("event", "job."+role), zap.String("via", method),
		zap.String("workspace", scope.WorkspaceID), zap.String("agent", scope.AgentID),
		zap.String("id", id), zap.Duration("duration", took),
	}
	if t != nil {
		fields = append(fields, zap.String("tool", t.Tool))
	}
	if err != nil {
		h.audit.Info("crank audit", append(fields, zap.String("outcome", "error"), zap.String("error", h.redact.String(err.Error())))...)
		return
	}
	h.audit.Info("crank audit", append(fields, zap.String("outcome", "ok"))...)
}
