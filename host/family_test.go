package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

const familyOps = `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: follow
    description: Follow the endless feed.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 60000, max_session_lifetime_ms: 60000, max_items: 20}
    config: {method: GET, url: "UPSTREAM/endless"}
  - name: follow_idle
    description: Follow the feed, expiring fast without polls.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 300, max_session_lifetime_ms: 60000}
    config: {method: GET, url: "UPSTREAM/idle"}
  - name: follow_short
    description: Follow the feed for a short lifetime.
    adapter: rest
    mode: session
    limits: {max_session_lifetime_ms: 1200}
    config: {method: GET, url: "UPSTREAM/endless"}
  - name: pages
    description: Follow long-poll pages until done.
    adapter: rest
    mode: session
    transport_behavior: request_response
    limits: {poll_interval_ms: 10}
    aggregation: {items_path: "$.metrics[*]", cursor_path: $.next, done_path: $.done}
    family: {start_tool_name: pages_open, poll_tool_name: pages_read, stop_tool_name: pages_close}
    config: {method: GET, url: "UPSTREAM/poll", cursor_param: since}
  - name: report
    description: Build a report (one slow request).
    adapter: rest
    mode: async_job
    timeout: 1m
    input_schema: {type: object, properties: {delay_ms: {type: integer}}}
    config: {method: GET, url: "UPSTREAM/report", query: [delay_ms]}
  - name: snapshot
    description: Collect a window of the feed in the background.
    adapter: rest
    mode: async_job
    transport_behavior: server_stream
    limits: {window_duration_ms: 200}
    config: {method: GET, url: "UPSTREAM/endless"}
  - name: export
    description: Start an export on the upstream and follow its ticket.
    adapter: rest
    mode: async_job
    scope: workspace
    job:
      status_operation: ticket_status
      status_arguments: {ticket: $.ticket}
      poll_interval_ms: 10
      done_path: $.done
      status_path: $.state
      result_path: $.file
      cancel_operation: ticket_cancel
      cancel_arguments: {ticket: $.ticket}
    config: {method: POST, url: "UPSTREAM/exports"}
  - name: export_lost
    description: An export whose status is asked for with a ticket the upstream does not know.
    adapter: rest
    mode: async_job
    job:
      status_operation: ticket_status
      status_arguments: {ticket: nope}
      poll_interval_ms: 10
      done_path: $.done
    config: {method: POST, url: "UPSTREAM/exports"}
  - name: ticket_status
    description: Status of an export.
    adapter: rest
    config: {method: GET, url: "UPSTREAM/exports/{ticket}"}
  - name: ticket_cancel
    description: Cancel an export.
    adapter: rest
    config: {method: DELETE, url: "UPSTREAM/exports/{ticket}"}
`

// jobUpstream adds job endpoints to the stream upstream: a slow report,
// an export with a ticket, and a feed whose requests are counted.
type jobUpstream struct {
	*streamUpstream
	reportStarted   chan struct{}
	reportCancelled chan struct{}
	exportPolls     atomic.Int32
	exportStarts    atomic.Int32
	exportCancelled atomic.Bool
	idleOpen        atomic.Int32
	idleSeen        atomic.Int32
}

func newJobUpstream(t testing.TB) *jobUpstream {
	u := &jobUpstream{reportStarted: make(chan struct{}, 10), reportCancelled: make(chan struct{}, 10)}
	u.streamUpstream = newStreamUpstream(t, func(mux *http.ServeMux) { u.routes(mux) })
	return u
}

func (u *jobUpstream) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("delay_ms") + "ms")
		u.reportStarted <- struct{}{}
		select {
		case <-time.After(d):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"rows":42,"token":"`+windowSecret+`"}`)
		case <-r.Context().Done():
			u.reportCancelled <- struct{}{}
		}
	})
	mux.HandleFunc("GET /idle", func(w http.ResponseWriter, r *http.Request) {
		u.idleOpen.Add(1)
		u.idleSeen.Add(1)
		defer u.idleOpen.Add(-1)
		f := startSSE(w)
		fmt.Fprint(w, "id: 1\ndata: {\"n\":1}\n\n")
		f.Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /exports", func(w http.ResponseWriter, r *http.Request) {
		u.exportStarts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"ticket":"T-7"}`)
	})
	mux.HandleFunc("GET /exports/{ticket}", func(w http.ResponseWriter, r *http.Request) {
		n := u.exportPolls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("ticket") != "T-7" {
			http.Error(w, `{"error":"unknown ticket"}`, http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"state":"step %d","done":%t,"file":{"url":"https://files.example/T-7.csv"}}`, n, n >= 3)
	})
	mux.HandleFunc("DELETE /exports/{ticket}", func(w http.ResponseWriter, r *http.Request) {
		u.exportCancelled.Store(true)
		w.WriteHeader(http.StatusNoContent)
	})
}

type familyFixture struct {
	h    *host.Host
	up   *jobUpstream
	logs *observer.ObservedLogs
	st   *store.Etcd      // the host's store, for benchmark baselines
	sup  *host.Supervisor // the rest adapter, bound by host.New
}

// newFamilyFixture serves ops on a fresh store; wrap, when given, wraps
// the store the host sees.
func newFamilyFixture(t testing.TB, ops string, quotas host.Quotas, wrap ...func(host.Store) host.Store) *familyFixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := newJobUpstream(t)
	_, st := storetest.Embedded(t)
	cat, err := opsfile.Parse("ops.yaml", []byte(strings.ReplaceAll(fmt.Sprintf(ops, exe), "UPSTREAM", up.URL)), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	f := &familyFixture{up: up, logs: logs, st: st}
	var mu sync.Mutex
	var hst host.Store = st
	for _, w := range wrap {
		hst = w(hst)
	}
	h, err := host.New(context.Background(), host.Options{File: cat, Store: hst, Quotas: quotas, Logger: zap.New(core),
		Adapter: func(name string) (*host.Supervisor, error) {
			mu.Lock()
			defer mu.Unlock()
			if f.sup == nil {
				spec, err := host.AdapterSpecOf(cat, name, nil)
				if err != nil {
					return nil, err
				}
				sup := host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
				t.Cleanup(func() { sup.Close() })
				f.sup = sup
			}
			return f.sup, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

// famCall calls a family tool as an agent of workspace ws and decodes its
// structured answer.
func famCall(t *testing.T, h *host.Host, agent, tool, args string) (map[string]any, *host.Result) {
	t.Helper()
	res, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool(tool), Arguments: json.RawMessage(args),
		WorkspaceID: "ws", AgentID: agent})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var m map[string]any
	if len(res.Structured) > 0 {
		if err := json.Unmarshal(res.Structured, &m); err != nil {
			t.Fatalf("%s: structured content: %v", tool, err)
		}
	}
	return m, res
}

// famOK is famCall for a call that must succeed.
func famOK(t *testing.T, h *host.Host, agent, tool, args string) map[string]any {
	t.Helper()
	m, res := famCall(t, h, agent, tool, args)
	if res.IsError {
		t.Fatalf("%s: unexpected error: %s", tool, res.Text)
	}
	return m
}

// pollUntil polls a session until cond holds for the answer.
func pollUntil(t *testing.T, h *host.Host, tool, args string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := famOK(t, h, "a1", tool, args)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: condition not reached; last answer %v", tool, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFamilyTools(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	got := map[string]*opsfile.Operation{}
	for _, op := range f.h.Operations() {
		got[op.Name] = op
	}
	for _, name := range []string{"follow_start", "follow_poll", "follow_stop", "pages_open", "pages_read", "pages_close",
		"report_start", "report_status", "report_result", "report_cancel", "export_status", "ticket_status"} {
		if got[name] == nil {
			t.Errorf("tool %s not published", name)
		}
	}
	for _, name := range []string{"follow", "report", "pages_start"} {
		if got[name] != nil {
			t.Errorf("tool %s published, want only its family", name)
		}
	}
	poll := got["follow_poll"]
	if !strings.Contains(string(poll.InputSchema), `"session_id"`) || !strings.Contains(string(poll.OutputSchema), `"has_more"`) {
		t.Errorf("poll schemas: %s / %s", poll.InputSchema, poll.OutputSchema)
	}
	meta, _ := json.Marshal(poll.ToolMeta())
	if !strings.Contains(string(meta), `"role":"poll"`) || !strings.Contains(string(meta), `"stop":"follow_stop"`) {
		t.Errorf("poll meta: %s", meta)
	}
	if !strings.Contains(got["report_start"].Description, "report_status") {
		t.Errorf("start description does not point to the status tool: %q", got["report_start"].Description)
	}
	if !f.h.Tool("report_start").AcceptsTasks() || f.h.Tool("report_status").AcceptsTasks() || f.h.Tool("follow_start").AcceptsTasks() {
		t.Error("AcceptsTasks: only an async_job start tool takes tasks")
	}
}

func TestStreamSessionPollAndStop(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	start := famOK(t, f.h, "a1", "follow_start", `{}`)
	id, _ := start["session_id"].(string)
	if !strings.HasPrefix(id, "ss_") || start["status"] != "active" || start["poll_tool"] != "follow_poll" {
		t.Fatalf("start: %v", start)
	}
	// The buffer (max_items 20) fills while nobody polls.
	first := pollUntil(t, f.h, "follow_poll", `{"session_id":"`+id+`","max_items":5}`, func(m map[string]any) bool {
		return len(m["items"].([]any)) == 5 && m["has_more"] == true
	})
	cursor := first["cursor"].(string)
	// Repeating a poll with the same cursor returns the same items.
	again := famOK(t, f.h, "a1", "follow_poll", `{"session_id":"`+id+`","max_items":5}`)
	if fmt.Sprint(again["items"]) != fmt.Sprint(first["items"]) {
		t.Errorf("repeated poll: %v, want %v", again["items"], first["items"])
	}
	next := famOK(t, f.h, "a1", "follow_poll", `{"session_id":"`+id+`","cursor":"`+cursor+`","max_items":5}`)
	n0 := first["items"].([]any)[0].(map[string]any)["n"].(float64)
	n1 := next["items"].([]any)[0].(map[string]any)["n"].(float64)
	if n1 != n0+5 {
		t.Errorf("next poll starts at n=%v, want %v", n1, n0+5)
	}
	// Another agent of the workspace does not see the session.
	_, res := famCall(t, f.h, "a2", "follow_poll", `{"session_id":"`+id+`"}`)
	if !res.IsError || !strings.Contains(res.Text, "not found") {
		t.Errorf("poll by another agent: %+v", res)
	}
	stop := famOK(t, f.h, "a1", "follow_stop", `{"session_id":"`+id+`"}`)
	if stop["status"] != "stopping" && stop["status"] != "stopped" {
		t.Errorf("stop: %v", stop)
	}
	select {
	case <-f.up.closedCh("endless"):
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream stream was not closed after stop")
	}
	end := pollUntil(t, f.h, "follow_poll", `{"session_id":"`+id+`","cursor":"`+cursor+`"}`, func(m map[string]any) bool {
		return m["status"] == "stopped"
	})
	if end["end_reason"] != "stopped" {
		t.Errorf("end: %v", end)
	}
	// Stopping again is idempotent.
	if again := famOK(t, f.h, "a1", "follow_stop", `{"session_id":"`+id+`"}`); again["status"] != "stopped" {
		t.Errorf("second stop: %v", again)
	}
	if f.logs.FilterField(zap.String("event", "session.start")).Len() != 1 || f.logs.FilterField(zap.String("event", "session.poll")).Len() < 3 {
		t.Errorf("audit records missing: %v", f.logs.FilterMessage("crank audit").All())
	}
}

func TestStreamSessionRequestResponse(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	start := famOK(t, f.h, "a1", "pages_open", `{}`)
	id := start["session_id"].(string)
	end := pollUntil(t, f.h, "pages_read", `{"session_id":"`+id+`"}`, func(m map[string]any) bool { return m["status"] == "completed" })
	// Pages 0, 1 and 2 with two metrics each; the last page says done.
	var items []any
	items = append(items, end["items"].([]any)...)
	if len(items) != 6 {
		t.Errorf("items: %v", items)
	}
}

func TestStreamSessionExpiry(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	idle := famOK(t, f.h, "a1", "follow_idle_start", `{}`)
	short := famOK(t, f.h, "a1", "follow_short_start", `{}`)
	// Lifetime: polled or not, the session stops before 1.2s.
	end := pollUntil(t, f.h, "follow_short_poll", `{"session_id":"`+short["session_id"].(string)+`"}`, func(m map[string]any) bool {
		return m["status"] == "stopped"
	})
	if end["end_reason"] != "max_session_lifetime" {
		t.Errorf("lifetime end: %v", end)
	}
	// Idle: no poll for 300ms ends the session and its upstream request.
	waitFor(t, func() bool { return f.up.idleSeen.Load() == 1 })
	waitFor(t, func() bool { return f.up.idleOpen.Load() == 0 })
	_, res := famCall(t, f.h, "a1", "follow_idle_poll", `{"session_id":"`+idle["session_id"].(string)+`"}`)
	if !res.IsError || !strings.Contains(res.Text, "not found") {
		t.Errorf("poll after the idle timeout: %+v", res)
	}
}

func TestStreamSessionQuota(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{StreamSessionsPerAgent: 1, JobsPerWorkspace: 1})
	first := famOK(t, f.h, "a1", "follow_start", `{}`)
	_, res := famCall(t, f.h, "a1", "follow_start", `{}`)
	if !res.IsError || !strings.Contains(res.Text, "max_sessions_per_agent") {
		t.Errorf("second session: %+v", res)
	}
	famOK(t, f.h, "a2", "follow_start", `{}`) // another agent has its own quota
	famOK(t, f.h, "a1", "follow_stop", `{"session_id":"`+first["session_id"].(string)+`"}`)
	waitFor(t, func() bool {
		_, res := famCall(t, f.h, "a1", "follow_start", `{}`)
		return !res.IsError
	})
	famOK(t, f.h, "a1", "report_start", `{"delay_ms":60000}`)
	_, res = famCall(t, f.h, "a2", "report_start", `{"delay_ms":1}`)
	if !res.IsError || !strings.Contains(res.Text, "max_jobs_per_workspace") {
		t.Errorf("second job: %+v", res)
	}
}

func TestJobFinishes(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	start := famOK(t, f.h, "a1", "report_start", `{"delay_ms":100}`)
	id := start["job_id"].(string)
	if !strings.HasPrefix(id, "job_") || start["status"] != "running" {
		t.Fatalf("start: %v", start)
	}
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a1", "report_status", `{"job_id":"`+id+`"}`)
		return m["status"] == "succeeded"
	})
	res := famOK(t, f.h, "a1", "report_result", `{"job_id":"`+id+`"}`)
	if res["ready"] != true || !strings.Contains(fmt.Sprint(res["result"]), "rows:42") {
		t.Errorf("result: %v", res)
	}
}

func TestJobCancelReachesUpstream(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	start := famOK(t, f.h, "a1", "report_start", `{"delay_ms":600000}`)
	id := start["job_id"].(string)
	<-f.up.reportStarted
	m, res := famCall(t, f.h, "a1", "report_result", `{"job_id":"`+id+`"}`)
	if res.IsError || m["ready"] != false {
		t.Errorf("result before the end: %v %s", m, res.Text)
	}
	c := famOK(t, f.h, "a1", "report_cancel", `{"job_id":"`+id+`"}`)
	if c["status"] != "canceling" && c["status"] != "canceled" {
		t.Errorf("cancel: %v", c)
	}
	select {
	case <-f.up.reportCancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a1", "report_status", `{"job_id":"`+id+`"}`)
		return m["status"] == "canceled"
	})
}

func TestJobWindowAndUpstreamNative(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	snap := famOK(t, f.h, "a1", "snapshot_start", `{}`)
	exp := famOK(t, f.h, "a1", "export_start", `{}`)
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a1", "snapshot_status", `{"job_id":"`+snap["job_id"].(string)+`"}`)
		return m["status"] == "succeeded"
	})
	r := famOK(t, f.h, "a1", "snapshot_result", `{"job_id":"`+snap["job_id"].(string)+`"}`)
	if w, _ := r["result"].(map[string]any); w == nil || w["window_complete"] != true {
		t.Errorf("window job result: %v", r)
	}
	// The export job is workspace-scoped: another agent follows it.
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a2", "export_status", `{"job_id":"`+exp["job_id"].(string)+`"}`)
		return m["status"] == "succeeded"
	})
	r = famOK(t, f.h, "a2", "export_result", `{"job_id":"`+exp["job_id"].(string)+`"}`)
	if !strings.Contains(fmt.Sprint(r["result"]), "T-7.csv") || f.up.exportPolls.Load() != 3 {
		t.Errorf("export result: %v after %d polls", r, f.up.exportPolls.Load())
	}
}

func TestTasks(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	scope := host.Scope{WorkspaceID: "ws", AgentID: "a1"}
	task, res, err := f.h.StartTask(context.Background(), host.CallRequest{Tool: f.h.Tool("report_start"),
		Arguments: json.RawMessage(`{"delay_ms":50}`), WorkspaceID: "ws", AgentID: "a1"})
	if err != nil || res != nil {
		t.Fatalf("StartTask: %v %+v", err, res)
	}
	if task.Tool != "report_start" || task.Status != "running" {
		t.Errorf("task: %+v", task)
	}
	done, out, err := f.h.WaitTask(context.Background(), scope, task.ID)
	if err != nil || done.Status != "succeeded" || !strings.Contains(string(out.Structured), `"rows":42`) {
		t.Fatalf("WaitTask: %v %+v %+v", err, done, out)
	}
	list, next, err := f.h.ListTasks(context.Background(), scope, "", 10)
	if err != nil || len(list) != 1 || list[0].ID != task.ID || next != "" {
		t.Errorf("ListTasks: %v %v %q", err, list, next)
	}
	if _, err := f.h.GetTask(context.Background(), host.Scope{WorkspaceID: "ws", AgentID: "a2"}, task.ID); err == nil {
		t.Error("another agent sees the task")
	}
	_, res, _ = f.h.StartTask(context.Background(), host.CallRequest{Tool: f.h.Tool("report_start"), Arguments: json.RawMessage(`{"delay_ms":"x"}`)})
	if res == nil || !res.IsError {
		t.Errorf("bad arguments: %+v", res)
	}
}

func TestFamilyLoadErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ops, want string }{
		{`{name: s, description: d, adapter: rest, mode: session, limits: {window_duration_ms: 10}, config: {}}`, "/limits/window_duration_ms: does not apply to mode session"},
		{`{name: s, description: d, adapter: rest, mode: session, aggregation: {aggregation_mode: stats, value_path: $.x}, config: {}}`, "/aggregation/aggregation_mode: a session hands out its items"},
		{`{name: s, description: d, adapter: rest, mode: session, limits: {idle_timeout_ms: 5000, max_session_lifetime_ms: 1000}, config: {}}`, "/limits/idle_timeout_ms: must not exceed max_session_lifetime_ms"},
		{`{name: s, description: d, adapter: rest, mode: session, family: {status_tool_name: x}, config: {}}`, "/family/status_tool_name: not a tool of mode session"},
		{`{name: s, description: d, adapter: rest, mode: session, family: {poll_tool_nmae: x}, config: {}}`, `/family/poll_tool_nmae: unknown field (did you mean "poll_tool_name"?)`},
		{`{name: j, description: d, adapter: rest, mode: async_job, job: {status_operation: st}, config: {}}`, "/job/done_path: is required with status_operation"},
		{`{name: j, description: d, adapter: rest, mode: async_job, job: {result_path: $.x}, config: {}}`, "/job/result_path: only applies with job.status_operation"},
		{`{name: j, description: d, adapter: rest, mode: async_job, scope: team, config: {}}`, `/scope: must be one of agent, workspace`},
		{`{name: u, description: d, adapter: rest, job: {retention_ms: 5}, config: {}}`, "/job: only applies to modes session and async_job"},
	} {
		_, err := opsfile.Parse("ops.yaml", []byte("operations:\n  - "+tc.ops+"\n"), opsfile.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.ops, err, tc.want)
		}
	}
}

// A status operation that refuses the request itself (404: unknown
// ticket) fails the job at once: repeating the poll cannot succeed.
func TestJobStatusRefused(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	id := famOK(t, f.h, "a1", "export_lost_start", `{}`)["job_id"].(string)
	var st map[string]any
	waitFor(t, func() bool {
		st = famOK(t, f.h, "a1", "export_lost_status", `{"job_id":"`+id+`"}`)
		return st["status"] == "failed"
	})
	if !strings.Contains(fmt.Sprint(st["error"]), "refused the job's status request") || f.up.exportPolls.Load() != 1 {
		t.Errorf("status after a refused poll: %v (%d polls)", st, f.up.exportPolls.Load())
	}
}

// staleJobReads is a store whose next GetJob answers a finished job as
// still running, as a read just before the job ended does.
type staleJobReads struct {
	host.Store
	stale atomic.Bool
}

func (s *staleJobReads) GetJob(ctx context.Context, scope store.Scope, id string) (*store.AsyncJobHandle, error) {
	j, err := s.Store.GetJob(ctx, scope, id)
	if err == nil && s.stale.Swap(false) {
		j.Status = store.JobRunning
	}
	return j, err
}

// A cancel that loses the race with the job's end (its read saw it
// running, the job ended before the cancel's transition) answers the
// job's state now, not the "running" it read.
func TestJobCancelAfterItsEnd(t *testing.T) {
	t.Parallel()
	ss := &staleJobReads{}
	f := newFamilyFixture(t, familyOps, host.Quotas{}, func(s host.Store) host.Store { ss.Store = s; return ss })
	id := famOK(t, f.h, "a1", "report_start", `{"delay_ms":100}`)["job_id"].(string)
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a1", "report_status", `{"job_id":"`+id+`"}`)
		return m["status"] == "succeeded"
	})
	ss.stale.Store(true)
	if c := famOK(t, f.h, "a1", "report_cancel", `{"job_id":"`+id+`"}`); c["status"] != "succeeded" {
		t.Errorf("cancel of a job that ended meanwhile: %v, want succeeded", c)
	}
}
