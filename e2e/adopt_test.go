package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/crankmcp/crank/internal/mcptest"
)

// ticketUpstream runs jobs itself: POST /tickets starts one and answers
// its ticket, GET /tickets/{t} reports it (done once finish is set), and
// DELETE /tickets/{t} cancels it.
type ticketUpstream struct {
	*httptest.Server
	starts, polls, cancels atomic.Int32
	finish                 atomic.Bool
}

func newTicketUpstream(t testing.TB) *ticketUpstream {
	u := &ticketUpstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", func(w http.ResponseWriter, r *http.Request) {
		n := u.starts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ticket":"T-%d"}`, n)
	})
	mux.HandleFunc("GET /tickets/{t}", func(w http.ResponseWriter, r *http.Request) {
		u.polls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if u.finish.Load() {
			fmt.Fprintf(w, `{"done":true,"state":"done","report":{"ticket":%q,"rows":42}}`, r.PathValue("t"))
			return
		}
		fmt.Fprint(w, `{"done":false,"state":"running"}`)
	})
	mux.HandleFunc("DELETE /tickets/{t}", func(w http.ResponseWriter, r *http.Request) {
		u.cancels.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"canceled":true}`)
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

func ticketOps(base string) string {
	return fmt.Sprintf(`
operations:
  - name: report
    description: A report the upstream builds behind a ticket.
    adapter: rest
    mode: async_job
    timeout: 2m
    job:
      status_operation: ticket_status
      status_arguments: {ticket: $.ticket}
      poll_interval_ms: 200
      done_path: $.done
      status_path: $.state
      result_path: $.report
      cancel_operation: ticket_cancel
      cancel_arguments: {ticket: $.ticket}
    config: {method: POST, url: "%[1]s/tickets"}
  - name: ticket_status
    description: A ticket's status.
    adapter: rest
    input_schema: {type: object, properties: {ticket: {type: string}}, required: [ticket]}
    config: {method: GET, url: "%[1]s/tickets/{ticket}"}
  - name: ticket_cancel
    description: Cancel a ticket.
    adapter: rest
    input_schema: {type: object, properties: {ticket: {type: string}}, required: [ticket]}
    config: {method: DELETE, url: "%[1]s/tickets/{ticket}"}
`, base)
}

// A job whose progress lives upstream (a ticket followed through its
// status operation) survives its replica: A is killed with SIGKILL, B
// takes the job over — same ID, its record and progress — polls the
// ticket on without starting the upstream's job again, and the client's
// status, result and cancel through B simply work.
func TestTicketJobAdoptedAcrossReplicas(t *testing.T) {
	t.Parallel()
	up := newTicketUpstream(t)
	a, b, lb, cs := familyReplicas(t, ticketOps(up.URL))

	done := callOK(t, cs, "report_start", nil)["job_id"].(string)
	canceled := callOK(t, cs, "report_start", nil)["job_id"].(string)
	waitFor(t, "A to poll both tickets", func() bool {
		for _, id := range []string{done, canceled} {
			p, _ := callOK(t, cs, "report_status", map[string]any{"job_id": id})["progress"].(map[string]any)
			if p["status"] != "running" {
				return false
			}
		}
		return true
	})

	_ = a.cmd.Process.Kill()
	<-a.exited
	polls := up.polls.Load() // A's, which polls no more
	lb.to(b)                 // the same MCP session, now served by B
	waitFor(t, "B to take A's jobs over", func() bool {
		st := callOK(t, cs, "report_status", map[string]any{"job_id": done})
		if st["status"] != "running" {
			t.Fatalf("A's job after A died: %v", st)
		}
		return up.polls.Load() > polls+3 // polled by B: A is gone (bar a poll in flight)
	})
	callOK(t, cs, "report_cancel", map[string]any{"job_id": canceled})
	waitFor(t, "the adopted job to be canceled", func() bool {
		return callOK(t, cs, "report_status", map[string]any{"job_id": canceled})["status"] == "canceled"
	})
	if n := up.cancels.Load(); n != 1 {
		t.Errorf("the upstream saw %d cancels of the ticket, want 1", n)
	}
	up.finish.Store(true)
	waitFor(t, "the adopted job to succeed", func() bool {
		return callOK(t, cs, "report_status", map[string]any{"job_id": done})["status"] == "succeeded"
	})
	r := callOK(t, cs, "report_result", map[string]any{"job_id": done})
	if rep, _ := r["result"].(map[string]any); rep == nil || rep["rows"] != float64(42) || !strings.HasPrefix(fmt.Sprint(rep["ticket"]), "T-") {
		t.Errorf("result of the adopted job: %v", r)
	}
	if n := up.starts.Load(); n != 2 {
		t.Errorf("the upstream started %d jobs, want 2 (adoption starts none)", n)
	}
}

// taskServerHTTP starts e2e/ts/task-server.mjs over Streamable HTTP on a
// free loopback port and returns its MCP endpoint and its output.
func taskServerHTTP(t *testing.T, node string) (string, *syncBuffer) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(node, filepath.Join(repoRoot, "e2e", "ts", "task-server.mjs"), "http", strconv.Itoa(port))
	return serveHTTPProcess(t, "the task server", cmd, port)
}

// mcpTaskJobOps serves two upstream tools that run as MCP Tasks over
// Streamable HTTP as jobs: server-everything's research query, and the
// task server's task that works until cancelled.
const mcpTaskJobOps = `
operations:
  - name: research
    description: server-everything's research query as a job.
    adapter: mcp
    mode: async_job
    timeout: 2m
    config: {url: %q, tool: simulate-research-query}
  - name: wait
    description: A task that works until cancelled, as a job.
    adapter: mcp
    mode: async_job
    timeout: 2m
    config: {url: %q, tool: waits}
`

// A job over one adapter call whose progress lives upstream — an MCP
// upstream's task, over Streamable HTTP — survives its replica: A is
// killed with SIGKILL once the tasks run, B takes the jobs over from the
// resume state A's adapter reported and follows the same upstream tasks
// (no new one is started), and the client's status, tasks/get,
// tasks/result, tasks/list and cancel through B simply work, under the
// same IDs; B's cancel reaches the upstream task.
func TestMCPTaskJobAdoptedAcrossReplicas(t *testing.T) {
	t.Parallel()
	node, js := serverEverything(t) // mcp_upstream_test.go
	waits, waitsOut := taskServerHTTP(t, node)
	a, b, lb, cs := familyReplicas(t, fmt.Sprintf(mcpTaskJobOps, everythingHTTP(t, node, js), waits))

	onA := &mcptest.Client{T: t, URL: a.MCPURL}
	onA.Initialize("2025-11-25")
	task := onA.StartTask("research_start", map[string]any{"topic": "adoption"})
	wait := callOK(t, cs, "wait_start", map[string]any{"text": "adoption"})["job_id"].(string)
	// Each job's progress is its upstream task's status: the task exists,
	// and its resume state was recorded before it.
	waitLong(t, "A to follow both tasks", func() bool {
		p, _ := callOK(t, cs, "wait_status", map[string]any{"job_id": wait})["progress"].(map[string]any)
		msg := onA.GetTask(task.TaskID).StatusMessage
		return p["message"] == "waiting for adoption" && slices.ContainsFunc(researchStages, func(st string) bool { return msg == "The job is running: "+st })
	})

	_ = a.cmd.Process.Kill()
	<-a.exited
	lb.to(b) // the go-sdk client's session, now served by B
	onB := &mcptest.Client{T: t, URL: b.MCPURL, Session: onA.Session, Version: onA.Version}
	onB.SkipIDs(1000)
	waitLong(t, "B to take A's jobs over", func() bool {
		log := b.log.String()
		return strings.Count(log, "job of a replica that died taken over") >= 2 && strings.Contains(log, wait) && strings.Contains(log, task.TaskID)
	})

	// The task that works until cancelled is B's now: its cancel through
	// B cancels the upstream task.
	if c := callOK(t, cs, "wait_cancel", map[string]any{"job_id": wait}); c["status"] != "canceling" && c["status"] != "canceled" {
		t.Errorf("wait_cancel through B: %v", c)
	}
	waitLong(t, "the adopted job to be canceled", func() bool {
		return callOK(t, cs, "wait_status", map[string]any{"job_id": wait})["status"] == "canceled"
	})
	waitLong(t, "the upstream task to be cancelled", func() bool { return strings.Contains(waitsOut.String(), "cancelled adoption") })

	// The research task ends upstream, and B finishes its job with the
	// task's result: tasks/get, tasks/result and the job's tools agree.
	waitLong(t, "the adopted research task to complete", func() bool { return onB.GetTask(task.TaskID).Status == "completed" })
	if got := onB.GetTask(task.TaskID); got.CreatedAt != task.CreatedAt {
		t.Errorf("tasks/get on B = %+v, created %s", got, task.CreatedAt)
	}
	var res mcptest.CallResult
	onB.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
	if res.IsError || !strings.Contains(res.Text(), "# Research Report: adoption") {
		t.Errorf("tasks/result on B: %+v", res)
	}
	var st mcptest.CallResult
	onB.OK("tools/call", map[string]any{"name": "research_status", "arguments": map[string]any{"job_id": task.TaskID}}, &st)
	if st.IsError || st.StructuredContent["status"] != "succeeded" || st.StructuredContent["created_at"] == nil {
		t.Errorf("research_status on B: %+v", st)
	}
	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	onB.OK("tasks/list", nil, &list)
	if n := slices.IndexFunc(list.Tasks, func(x mcptest.Task) bool { return x.TaskID == task.TaskID }); n < 0 ||
		slices.ContainsFunc(list.Tasks[n+1:], func(x mcptest.Task) bool { return x.TaskID == task.TaskID }) {
		t.Errorf("tasks/list on B does not list the adopted task once: %+v", list.Tasks)
	}
}
