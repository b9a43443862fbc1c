package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Upstream MCP Tasks (protocol 2025-11-25).
//
// A tool whose config has task: true is called as an MCP Task, over the
// session's raw channel (raw.go), since the go-sdk client has no Tasks
// API: a task-augmented tools/call creates the task; tasks/get follows it
// every pollInterval the upstream suggests (taskPollMin..taskPollMax,
// taskPollDefault without one), its statusMessage relayed as progress when
// the call asked for progress; once it ends (completed, failed,
// cancelled) or needs input (input_required), tasks/result gives the
// tools/call result, which is the call's result as a plain call's is. A
// call cancelled (a cancelled job, a timeout) cancels the task
// (tasks/cancel); one cancelled while the task is being created waits for
// it first, at most taskCancelWait.

// The bounds of the interval between two tasks/get of a task.
const (
	taskPollMin     = 100 * time.Millisecond
	taskPollMax     = 5 * time.Second
	taskPollDefault = time.Second
	// taskCancelWait bounds the tasks/cancel of a cancelled call.
	taskCancelWait = 5 * time.Second
)

// errTaskWindow is why a window cannot call its tool as a task.
const errTaskWindow = "cannot be used with mode: window: a window follows a plain call's progress notifications"

// upTask is an upstream task, as tasks/get and tools/call answer it.
type upTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	// PollInterval is in milliseconds.
	PollInterval *float64 `json:"pollInterval,omitempty"`
}

// waits reports whether the task is still working: neither ended nor
// waiting for input.
func (t *upTask) waits() bool { return t.Status == "working" }

// poll is the time to wait before the next tasks/get.
func (t *upTask) poll() time.Duration {
	if t.PollInterval == nil {
		return taskPollDefault
	}
	return min(max(time.Duration(*t.PollInterval*float64(time.Millisecond)), taskPollMin), taskPollMax)
}

// taskFailed is the failure of a task that ended failed or cancelled
// upstream and whose tasks/result is an error.
type taskFailed struct {
	task upTask
	err  error
}

func (e *taskFailed) Error() string {
	msg := e.task.StatusMessage
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("the upstream task %s %s: %s", e.task.TaskID, e.task.Status, msg)
}

func (e *taskFailed) Unwrap() error { return e.err }

// taskCallsIn reports whether an upstream's capabilities let it run
// tools/call as tasks (capabilities.tasks.requests.tools.call).
func taskCallsIn(caps json.RawMessage) bool {
	var c struct {
		Tasks *struct {
			Requests *struct {
				Tools *struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	return json.Unmarshal(caps, &c) == nil && c.Tasks != nil && c.Tasks.Requests != nil &&
		c.Tasks.Requests.Tools != nil && len(c.Tasks.Requests.Tools.Call) > 0 && string(c.Tasks.Requests.Tools.Call) != "null"
}

// taskSupport lists the execution.taskSupport of the upstream's tools (the
// go-sdk client's Tool has no execution), when the upstream runs tools/call
// as tasks; capable says whether it does.
func (a *adapter) taskSupport(ctx context.Context, u *upstream) (support map[string]string, capable bool, err error) {
	c := a.pool.get(u)
	err = a.withConn(ctx, c, true, func(s *gomcp.ClientSession) error {
		raw, ok := c.rawFor(s)
		if support, capable = map[string]string{}, ok; !ok || raw == nil {
			return nil
		}
		cursor := ""
		for {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			var page struct {
				Tools []struct {
					Name      string `json:"name"`
					Execution struct {
						TaskSupport string `json:"taskSupport"`
					} `json:"execution"`
				} `json:"tools"`
				NextCursor string `json:"nextCursor"`
			}
			if err := raw.call(ctx, "tools/list", params, &page); err != nil {
				return err
			}
			for _, t := range page.Tools {
				support[t.Name] = t.Execution.TaskSupport
			}
			if cursor = page.NextCursor; cursor == "" {
				return nil
			}
		}
	})
	return support, capable, err
}

// taskOf decides whether the upstream tool name is called as a task: when
// the entry says so (which needs the upstream's and the tool's support),
// or when the tool requires it (not in a window, which follows a plain
// call's progress).
func taskOf(u *upstream, op *sdk.Operation, name string, support map[string]string, capable bool) (bool, error) {
	ts := support[name]
	switch {
	case u.task && !capable:
		return false, fmt.Errorf("%s does not run tools/call as MCP Tasks (it has no capabilities.tasks.requests.tools.call): tool %q cannot be called as a task", u.label, name)
	case u.task && ts != "optional" && ts != "required":
		if ts == "" {
			ts = "absent"
		}
		return false, fmt.Errorf("tool %q of %s does not support MCP Tasks (its execution.taskSupport is %s)", name, u.label, ts)
	case u.task:
		return true, nil
	}
	return capable && ts == "required" && op.Mode != sdk.ModeWindow, nil
}

// taskCall calls the upstream tool as a task (see above); progress, when
// not nil, gets the task's status messages.
func (a *adapter) taskCall(ctx context.Context, u *upstream, params *gomcp.CallToolParams, progress func(sdk.Progress)) (*gomcp.CallToolResult, error) {
	c := a.pool.get(u)
	c.logs.inflight.Add(1) // for the routing of log messages (logs.go)
	defer c.logs.inflight.Add(-1)
	st, err := a.startTask(ctx, c, params)
	t, raw := st.task, st.raw
	switch {
	case err != nil:
		return nil, err
	case t == nil:
		return st.res, ctx.Err() // the upstream answered at once
	case ctx.Err() != nil:
		cancelTask(ctx, raw, t.TaskID)
		return nil, ctx.Err()
	}
	resumable := reportResume(ctx, u, st) // resume.go
	return followTask(ctx, raw, t, progress, resumable, func() { c.drop(st.session) })
}

// followTask follows the upstream task t on raw until it ends (see above):
// its status messages to progress, its tools/call result from
// tasks/result. A call cancelled cancels the task, unless it is
// resumable (its resume state was reported) and ended because its host
// died: another replica resumes it then (resume.go). dropped, when not
// nil, is told that the session is lost.
func followTask(ctx context.Context, raw rawChannel, t *upTask, progress func(sdk.Progress), resumable bool, dropped func()) (*gomcp.CallToolResult, error) {
	// abandon ends the call's part in the task: it cancels it, unless
	// another replica will follow it on.
	abandon := func() {
		if !resumable || !sdk.HostGone(ctx) {
			cancelTask(ctx, raw, t.TaskID)
		}
	}
	follow := func(method string, out any) error {
		params := map[string]string{"taskId": t.TaskID}
		err := raw.call(ctx, method, params, out)
		if notSent(err) {
			// It never left (e.g. a pooled connection the upstream had
			// closed): send it again once, as withConn does.
			err = raw.call(ctx, method, params, out)
		}
		switch {
		case ctx.Err() != nil:
			abandon()
			return ctx.Err()
		case err != nil && lost(err) && dropped != nil:
			dropped()
		}
		return err
	}
	var reported float64
	last := ""
	report := func() {
		if progress != nil && t.StatusMessage != "" && t.StatusMessage != last {
			reported, last = reported+1, t.StatusMessage
			progress(sdk.Progress{Progress: reported, Message: t.StatusMessage})
		}
	}
	report()
	for t.waits() {
		wait := time.NewTimer(t.poll())
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			abandon()
			return nil, ctx.Err()
		}
		var next upTask
		if err := follow("tasks/get", &next); err != nil {
			return nil, err
		}
		next.TaskID = t.TaskID
		t = &next
		report()
	}
	res := &gomcp.CallToolResult{}
	if err := follow("tasks/result", res); err != nil {
		if ctx.Err() == nil && (t.Status == "failed" || t.Status == "cancelled") {
			return nil, &taskFailed{task: *t, err: err}
		}
		return nil, err
	}
	return res, nil
}

// startedTask is what a task-augmented tools/call gave: the task, with
// the raw channel and session it lives on, or the result of a call the
// upstream answered at once, without a task.
type startedTask struct {
	task    *upTask
	res     *gomcp.CallToolResult
	raw     rawChannel
	session *gomcp.ClientSession
}

// startTask sends the task-augmented tools/call on the session of c. A
// call cancelled while the task is being created still waits for the task
// (at most taskCancelWait), so that it can be cancelled rather than left
// running upstream.
func (a *adapter) startTask(ctx context.Context, c *conn, params *gomcp.CallToolParams) (startedTask, error) {
	var st startedTask
	b, err := json.Marshal(params)
	if err != nil {
		return st, err
	}
	var call map[string]json.RawMessage
	if err := json.Unmarshal(b, &call); err != nil {
		return st, err
	}
	call["task"] = json.RawMessage("{}") // the upstream's own ttl
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(taskCancelWait, stop) })()
	var created json.RawMessage
	err = a.withConn(cctx, c, false, func(s *gomcp.ClientSession) error {
		if st.raw, _ = c.rawFor(s); st.raw == nil {
			return gomcp.ErrConnectionClosed
		}
		st.session = s
		return st.raw.call(cctx, "tools/call", call, &created)
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return st, ctx.Err()
	case err != nil:
		return st, err
	}
	var answer struct {
		Task *upTask `json:"task"`
	}
	if json.Unmarshal(created, &answer) == nil && answer.Task != nil && answer.Task.TaskID != "" {
		st.task = answer.Task
		return st, nil
	}
	st.res = &gomcp.CallToolResult{}
	if err := json.Unmarshal(created, st.res); err != nil {
		return st, fmt.Errorf("the upstream answered the task-augmented tools/call with neither a task nor a result: %v", err)
	}
	return st, nil
}

// cancelTask asks the upstream to cancel the task of a call that was
// cancelled, on a context of its own (the call's is done).
func cancelTask(ctx context.Context, raw rawChannel, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), taskCancelWait)
	defer cancel()
	var answer json.RawMessage
	_ = raw.call(ctx, "tasks/cancel", map[string]string{"taskId": id}, &answer)
}
