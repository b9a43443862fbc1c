package mcpserver

import (
	"testing"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// Tasks belong to the workspace of the endpoint that started them: an
// endpoint configured with another workspace, on the same store and for
// the same agent, neither lists, reads, waits for nor cancels them; an
// endpoint configured with the same workspace shares them.
func TestTasksStayInTheirWorkspace(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	workspace := func(ws string) func(*Options) { return func(o *Options) { o.Workspace = ws } }
	a, _ := newTaskReplica(t, st, up.URL, workspace("team-a"))
	b, _ := newTaskReplica(t, st, up.URL, workspace("team-b"))
	sameAsA, _ := newTaskReplica(t, st, up.URL, workspace("team-a"))

	c := newTaskClient(t, a, "agent-1", "")
	c.Initialize(tasksProtocolVersion)
	var created mcptest.CallResult
	c.OK("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": map[string]any{}}, &created)
	if created.Task == nil {
		t.Fatalf("CreateTaskResult = %+v", created)
	}
	id := created.Task.TaskID
	up.Await(t, "arrived", "1")

	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	onB := newTaskClient(t, b, "agent-1", "")
	onB.Initialize(tasksProtocolVersion)
	onB.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("another workspace's endpoint lists %+v", list.Tasks)
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		onB.Fails(m, map[string]any{"taskId": id}, -32602, "not found")
	}

	onSame := newTaskClient(t, sameAsA, "agent-1", "")
	onSame.Initialize(tasksProtocolVersion)
	onSame.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != id {
		t.Errorf("an endpoint of the same workspace lists %+v, want %s", list.Tasks, id)
	}
	if got := onSame.GetTask(id); got.TaskID != id || got.Status != "working" {
		t.Errorf("tasks/get on an endpoint of the same workspace = %+v", got)
	}
	up.Release("1")
}
