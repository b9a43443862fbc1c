package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
)

// mcpTasksOps serves server-everything's simulate-research-query, a tool
// that runs only as an MCP Task upstream (execution.taskSupport
// required, four stages of a second), as a job and as a plain call.
const mcpTasksOps = `
operations:
  - name: research
    description: server-everything's research query as a job.
    adapter: mcp
    mode: async_job
    timeout: 1m
    config:
      command: %[1]q
      args: [%[2]q, stdio]
      tool: simulate-research-query
  - name: research_now
    description: server-everything's research query, answered in the call.
    adapter: mcp
    timeout: 1m
    config:
      command: %[1]q
      args: [%[2]q, stdio]
      tool: simulate-research-query
`

// researchStages are the upstream task's status messages.
var researchStages = []string{"Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."}

// waitLong polls cond until it holds, failing the test after 30s: a
// research task takes about 4s, more on a loaded machine.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestMCPUpstreamTasks federates an upstream tool that runs only as an MCP
// Task: the gateway's job tools and its MCP Tasks drive it, and a plain
// call of it reports the task's status messages as progress.
func TestMCPUpstreamTasks(t *testing.T) {
	t.Parallel()
	node, js := serverEverything(t) // mcp_upstream_test.go
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(mcpTasksOps, node, js)})

	t.Run("job tools", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cs := g.connect(ctx)
		status := func(job any) any {
			return callOK(t, cs, "research_status", map[string]any{"job_id": job})["status"]
		}
		job := callOK(t, cs, "research_start", map[string]any{"topic": "crank"})["job_id"]
		// While it runs, the job's progress is the upstream task's
		// status message; once it is over, its status says all.
		var stages []string
		waitLong(t, "the research job to succeed", func() bool {
			st := callOK(t, cs, "research_status", map[string]any{"job_id": job})
			if p, ok := st["progress"].(map[string]any); ok {
				if m, _ := p["message"].(string); m != "" && !slices.Contains(stages, m) {
					stages = append(stages, m)
				}
			}
			return st["status"] == "succeeded"
		})
		if len(stages) == 0 || !slices.Contains(researchStages, stages[0]) {
			t.Errorf("the job's progress named no research stage: %q", stages)
		}
		if r := callOK(t, cs, "research_result", map[string]any{"job_id": job}); r["ready"] != true ||
			!strings.Contains(fmt.Sprint(r["text"]), "# Research Report: crank") {
			t.Errorf("research_result: %v", r)
		}

		job = callOK(t, cs, "research_start", map[string]any{"topic": "cancelled"})["job_id"]
		if c := callOK(t, cs, "research_cancel", map[string]any{"job_id": job}); c["status"] != "canceling" && c["status"] != "canceled" {
			t.Errorf("research_cancel: %v", c)
		}
		waitLong(t, "the research job to be canceled", func() bool { return status(job) == "canceled" })
	})

	t.Run("mcp tasks", func(t *testing.T) {
		t.Parallel()
		c := &mcptest.Client{T: t, URL: g.MCPURL}
		c.Initialize("2025-11-25")
		task := c.StartTask("research_start", map[string]any{"topic": "tasks"})
		staged := false
		waitLong(t, "the research task to complete", func() bool {
			got := c.GetTask(task.TaskID)
			for _, st := range researchStages {
				staged = staged || got.StatusMessage == "The job is running: "+st
			}
			return got.Status == "completed"
		})
		if !staged {
			t.Error("tasks/get never said which research stage the upstream task was in")
		}
		var res mcptest.CallResult
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		if res.IsError || !strings.Contains(res.Text(), "Research Report: tasks") {
			t.Errorf("tasks/result: %+v", res)
		}

		task = c.StartTask("research_start", map[string]any{"topic": "cancelled"})
		c.OK("tasks/cancel", map[string]any{"taskId": task.TaskID}, &mcptest.Task{})
		waitLong(t, "the research task to be cancelled", func() bool { return c.GetTask(task.TaskID).Status == "cancelled" })
	})

	t.Run("progress", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var progress progressLog
		cs := g.connectProgress(ctx, &progress)
		params := &mcp.CallToolParams{Name: "research_now", Arguments: map[string]any{"topic": "now"}}
		params.SetProgressToken("tok-research")
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError || !strings.Contains(textOf(res), "Research Report: now") {
			t.Fatalf("research_now: %v %+v", err, res)
		}
		got := progress.take(1)
		if len(got) == 0 {
			t.Fatal("no progress from the upstream task's status messages")
		}
		for _, p := range got {
			if p.ProgressToken != "tok-research" || !slices.Contains(researchStages, p.Message) {
				t.Errorf("progress: %+v", p)
			}
		}
	})
}
