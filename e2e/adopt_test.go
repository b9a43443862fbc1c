package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
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
