package mcp

import (
	"context"
	"encoding/json"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// researchStages are the status messages of server-everything's
// simulate-research-query task, one a second.
var researchStages = []string{"Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."}

// waitUntil polls cond until it holds, failing the test after 30s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
	}
}

// upstreamTasks lists the upstream's tasks on the adapter's own session,
// through its raw channel.
func upstreamTasks(t *testing.T, a *adapter, cfg map[string]any) []upTask {
	t.Helper()
	b, _ := json.Marshal(cfg)
	p := a.configs.Get(&sdk.Operation{Name: "x", Config: b})
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	c := a.pool.get(p.Value)
	s, err := c.open(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := c.rawFor(s)
	var list struct {
		Tasks []upTask `json:"tasks"`
	}
	if err := raw.call(ctxT(t), "tasks/list", map[string]any{}, &list); err != nil {
		t.Fatalf("tasks/list: %v", err)
	}
	return list.Tasks
}

// checkTasks drives server-everything's simulate-research-query, whose
// execution.taskSupport is required, through the adapter as MCP Tasks.
func checkTasks(t *testing.T, base map[string]any) {
	with := func(extra map[string]any) map[string]any {
		cfg := maps.Clone(base)
		maps.Copy(cfg, extra)
		return cfg
	}
	h := newHarness(t)
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: with(map[string]any{"prefix": "ev_",
		"include": []string{"simulate-research-query", "echo"}}), Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 {
		t.Fatalf("expand: %v %v", diags, err)
	}
	// The tool that requires tasks is called as one; the others are not.
	var research, echo struct {
		Tool string `json:"tool"`
		Task bool   `json:"task"`
	}
	if json.Unmarshal(findTool(t, tools, "ev_simulate-research-query").Config, &research) != nil || !research.Task ||
		json.Unmarshal(findTool(t, tools, "ev_echo").Config, &echo) != nil || echo.Task {
		t.Fatalf("derived configs: research %+v, echo %+v", research, echo)
	}
	cfg := findTool(t, tools, "ev_simulate-research-query").Config

	// An entry that names the tool alone calls it as a task too.
	self, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: with(map[string]any{"tool": "simulate-research-query"})})
	if err != nil || len(diags) > 0 || len(self) != 1 || !strings.Contains(string(self[0].Config), `"task":true`) {
		t.Fatalf("expand of the tool alone: %+v %v %v", self, diags, err)
	}

	// A task on a tool that does not support tasks is a load error naming
	// the field and the tool.
	_, diags, err = h.Expand(ctxT(t), adaptertest.Call{Config: with(map[string]any{"tool": "echo", "task": true})})
	if err != nil || len(diags) != 1 || diags[0].Field != "task" || !strings.Contains(diags[0].Message, `"echo"`) ||
		!strings.Contains(diags[0].Message, "taskSupport") {
		t.Fatalf("task on echo: %+v %v", diags, err)
	}

	// The calls take some seconds each: they run side by side.
	t.Run("progress", func(t *testing.T) {
		t.Parallel()
		// The report, with the task's status messages as progress.
		info, err := h.Describe(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		req := &sdk.Request{Operation: sdk.Operation{Name: "research", Config: cfg}, Arguments: json.RawMessage(`{"topic": "crank"}`)}
		var mu sync.Mutex
		var got []sdk.Progress
		res, err := h.Client.InvokeWithProgress(ctxT(t), req, info.Capabilities, func(p sdk.Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		})
		if err != nil || !strings.Contains(res.Text, "# Research Report: crank") || !strings.Contains(string(res.Content), `"type":"text"`) {
			t.Fatalf("research: %+v %v", res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			t.Error("no progress from the task's status messages")
		}
		for i, p := range got {
			if !slices.Contains(researchStages, p.Message) || p.Progress != float64(i+1) {
				t.Errorf("progress %d: %+v", i, p)
			}
		}
	})
	t.Run("ambiguous", func(t *testing.T) {
		t.Parallel()
		// An ambiguous query asks for no clarification (the adapter does
		// not offer elicitation) and completes.
		res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"topic": "python", "ambiguous": true}`})
		if err != nil || ue != nil || !strings.Contains(res.Text, "# Research Report: python") {
			t.Errorf("ambiguous research: %+v %+v %v", res, ue, err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		// A cancelled call cancels the upstream task. A harness of its
		// own has a session of its own, whose tasks are this call's.
		a := newAdapter()
		t.Cleanup(a.pool.closeAll)
		h := adaptertest.New(t, a)
		ctx, cancel := context.WithCancel(ctxT(t))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, ue, err := h.Invoke(ctx, adaptertest.Call{Config: cfg, Args: `{"topic": "cancelled"}`})
			if err == nil && (ue == nil || ue.Kind != sdk.KindCancelled) {
				t.Errorf("cancelled research: %+v %v", ue, err)
			}
		}()
		waitUntil(t, "the task to be working", func() bool {
			tasks := upstreamTasks(t, a, base)
			return len(tasks) == 1 && tasks[0].Status == "working"
		})
		cancel()
		<-done
		waitUntil(t, "the upstream task to be cancelled", func() bool {
			tasks := upstreamTasks(t, a, base)
			return len(tasks) == 1 && tasks[0].Status == "cancelled"
		})
	})
}

func TestTasksEverythingStdio(t *testing.T) {
	t.Parallel()
	checkTasks(t, everythingStdio(t))
}

func TestTasksEverythingStreamableHTTP(t *testing.T) {
	t.Parallel()
	checkTasks(t, map[string]any{"url": everythingHTTP(t)})
}

// An upstream without the tasks capability cannot call a tool as a task:
// a load error names the field and the tool.
func TestTaskNeedsTheUpstreamsCapability(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	_, diags, err := newHarness(t).Expand(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "tool": "ticks", "task": true}})
	if err != nil || len(diags) != 1 || diags[0].Field != "task" || !strings.Contains(diags[0].Message, `"ticks"`) ||
		!strings.Contains(diags[0].Message, "capabilities.tasks.requests.tools.call") {
		t.Fatalf("%+v %v", diags, err)
	}
}

// task cannot be set on a window.
func TestTaskIsNotForWindows(t *testing.T) {
	t.Parallel()
	diags, err := newHarness(t).Validate(ctxT(t), adaptertest.Call{Mode: sdk.ModeWindow,
		Config: map[string]any{"url": "http://127.0.0.1:1/mcp", "tool": "x", "task": true}})
	if err != nil || len(diags) != 1 || diags[0].Field != "task" {
		t.Fatalf("%+v %v", diags, err)
	}
}

func TestTaskPollInterval(t *testing.T) {
	t.Parallel()
	ms := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		in   *float64
		want time.Duration
	}{{nil, time.Second}, {ms(1), taskPollMin}, {ms(250), 250 * time.Millisecond}, {ms(60000), taskPollMax}} {
		if got := (&upTask{PollInterval: c.in}).poll(); got != c.want {
			t.Errorf("pollInterval %v: %v, want %v", c.in, got, c.want)
		}
	}
}

// taskServer is the config of e2e/ts/task-server.mjs, a TypeScript SDK
// server whose task tools fail in two ways and echo.
func taskServer(t *testing.T) map[string]any {
	everything(t) // the same TypeScript dependencies
	js, err := filepath.Abs("../../e2e/ts/task-server.mjs")
	if err != nil {
		t.Fatal(err)
	}
	node, _ := exec.LookPath("node")
	return map[string]any{"command": node, "args": []string{js}}
}

// A task that fails is the tool's error: the result's when it has one
// (isError), else the task's status message; a tool whose taskSupport is
// optional is called as a task when the entry says so, plainly otherwise.
func TestTaskEndings(t *testing.T) {
	t.Parallel()
	base := taskServer(t)
	h := newHarness(t)
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: base})
	if err != nil || len(diags) > 0 {
		t.Fatalf("expand: %v %v", diags, err)
	}
	for name, task := range map[string]bool{"refuses": true, "breaks": true, "echoes": false} {
		if got := strings.Contains(string(findTool(t, tools, name).Config), `"task":true`); got != task {
			t.Errorf("%s: task %v, want %v", name, got, task)
		}
	}
	invoke := func(cfg json.RawMessage) (*sdk.Result, *sdk.UpstreamError) {
		t.Helper()
		res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Args: `{"text": "hi"}`})
		if err != nil {
			t.Fatal(err)
		}
		return res, ue
	}
	if _, ue := invoke(findTool(t, tools, "refuses").Config); ue == nil || ue.Kind != sdk.KindUpstreamStatus || ue.Message != "no such report" {
		t.Errorf("refuses: %+v", ue)
	}
	if _, ue := invoke(findTool(t, tools, "breaks").Config); ue == nil || ue.Kind != sdk.KindUpstreamStatus ||
		!strings.Contains(ue.Message, "failed: the report store is down") {
		t.Errorf("breaks: %+v", ue)
	}
	if res, ue := invoke(findTool(t, tools, "echoes").Config); ue != nil || res.Text != "hi" {
		t.Errorf("echoes, a plain call: %+v %+v", res, ue)
	}
	cfg := maps.Clone(base)
	cfg["tool"], cfg["task"] = "echoes", true
	self, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg})
	if err != nil || len(diags) > 0 || len(self) != 1 || !strings.Contains(string(self[0].Config), `"task":true`) {
		t.Fatalf("expand echoes as a task: %+v %v %v", self, diags, err)
	}
	if res, ue := invoke(self[0].Config); ue != nil || res.Text != "hi" {
		t.Errorf("echoes, a task: %+v %+v", res, ue)
	}
}
