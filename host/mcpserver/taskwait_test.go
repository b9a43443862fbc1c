package mcpserver

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// resultAudits counts the job.result audit records of task id that ended
// in an error.
func resultAudits(audit *observer.ObservedLogs, id string) int {
	n := 0
	for _, e := range audit.All() {
		if m := e.ContextMap(); m["via"] == methodTasksResult && m["id"] == id && m["outcome"] != "ok" {
			n++
		}
	}
	return n
}

// A tasks/result whose client dropped the stream stops waiting once the
// client can no longer resume it (after the event TTL; at once where
// there is nothing to resume), and a session has at most maxResultWaits
// waiting at once. Neither cancels the job, whose result is then served.
func TestTaskResultWaitsBounded(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	ep, url, audit := newTaskEndpoint(t, st, up.URL, func(o *Options) { o.EventLimits.TTL = time.Second })
	c := newTaskClient(t, url, "agent-1", "")
	c.Initialize(tasksProtocolVersion)
	task := c.StartTask("report_start", map[string]any{"n": 41})
	up.Await(t, "arrived", "41")
	id := map[string]any{"taskId": task.TaskID}

	ctx, drop := context.WithCancel(context.Background())
	resp, _, err := c.Request(ctx, methodTasksResult, id)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WaitUntil(t, "the wait", func() bool { return ep.waits.waiting(c.Session) == 1 })
	dropped := time.Now()
	drop()
	resp.Body.Close()
	mcptest.WaitUntil(t, "the dropped wait to end", func() bool { return ep.waits.waiting(c.Session) == 0 })
	if took := time.Since(dropped); took < 900*time.Millisecond {
		t.Errorf("the wait ended %s after its client left, before the event TTL", took)
	}
	mcptest.WaitUntil(t, "the audit record of the ended wait", func() bool { return resultAudits(audit, task.TaskID) == 1 })
	if got := c.GetTask(task.TaskID); got.Status != "working" {
		t.Fatalf("the job after a dropped tasks/result: %+v", got)
	}

	var drops []func()
	for range maxResultWaits {
		ctx, cancel := context.WithCancel(context.Background())
		resp, _, err := c.Request(ctx, methodTasksResult, id)
		if err != nil {
			t.Fatal(err)
		}
		drops = append(drops, func() { cancel(); resp.Body.Close() })
	}
	defer func() {
		for _, d := range drops {
			d()
		}
	}()
	mcptest.WaitUntil(t, "the waits", func() bool { return ep.waits.waiting(c.Session) == maxResultWaits })
	c.Fails(methodTasksResult, id, -32000, "at most 16")
	up.Release("41")
	mcptest.WaitUntil(t, "the waits to return the result", func() bool { return ep.waits.waiting(c.Session) == 0 })
	var res mcptest.CallResult
	c.OK(methodTasksResult, id, &res)
	if res.IsError || res.StructuredContent["rows"] != 3.0 {
		t.Errorf("tasks/result after the waits: %+v", res)
	}
}

// Where a dropped response cannot be resumed (JSON responses), the wait
// ends as soon as the client has gone.
func TestTaskResultWaitJSON(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	ep, url, audit := newTaskEndpoint(t, st, up.URL, func(o *Options) { o.JSONResponse = true })
	c := newTaskClient(t, url, "agent-1", "")
	c.Initialize(tasksProtocolVersion)
	task := c.StartTask("report_start", map[string]any{"n": 42})
	up.Await(t, "arrived", "42")
	ctx, drop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, _, err := c.Request(ctx, methodTasksResult, map[string]any{"taskId": task.TaskID}); err == nil {
			resp.Body.Close()
		}
	}()
	mcptest.WaitUntil(t, "the wait", func() bool { return ep.waits.waiting(c.Session) == 1 })
	drop()
	<-done
	mcptest.WaitUntil(t, "the dropped wait to end", func() bool { return ep.waits.waiting(c.Session) == 0 })
	mcptest.WaitUntil(t, "the audit record of the ended wait", func() bool { return resultAudits(audit, task.TaskID) == 1 })
	up.Release("42")
	var res mcptest.CallResult
	c.OK(methodTasksResult, map[string]any{"taskId": task.TaskID}, &res)
	if res.IsError {
		t.Errorf("tasks/result = %+v", res)
	}
	if r := c.Call("ping", nil); r.HTTPStatus != http.StatusOK {
		t.Errorf("ping: %+v", r)
	}
}
