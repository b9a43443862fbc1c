package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// floodOps has an async_job operation with a large result (big_job), one
// with a small result (small_job) and a unary one with a large answer
// (big), against the upstream of floodUpstream at %s.
const floodOps = `version: 1
operations:
  - name: big_job
    description: A job with a large result.
    adapter: rest
    mode: async_job
    timeout: 1m
    input_schema: {type: object}
    config: {method: GET, url: "%[1]s/big"}
  - name: small_job
    description: A job with a small result.
    adapter: rest
    mode: async_job
    timeout: 1m
    input_schema: {type: object}
    config: {method: GET, url: "%[1]s/small"}
  - name: big
    description: A large answer.
    adapter: rest
    input_schema: {type: object}
    config: {method: GET, url: "%[1]s/big"}
`

// floodPayload is the size of a large answer: a big_job result keeps it
// once, a big call's SSE response (structured content and text) twice,
// under the 1 MiB a stream's log keeps.
const floodPayload = 450 << 10

func floodUpstream(t *testing.T) *httptest.Server {
	big, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", floodPayload)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/big" {
			_, _ = w.Write(big)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// floodQuotas are the retention quotas of TestRetainedFlood, scaled to
// its etcd of floodEtcdQuota: what one agent's finished jobs and what one
// session's and one client address's event logs may keep.
func floodQuotas(ho *host.Options, eo *Options) {
	ho.Quotas.RetainedJobBytesPerAgent = 4 << 20
	ho.Quotas.RetainedJobsPerAgent = 100
	eo.EventQuota = EventQuota{PerSession: 4 << 20, PerClient: 6 << 20}
}

const floodEtcdQuota = 32 << 20

// TestRetainedFlood: one anonymous client floods a small etcd, from two
// MCP sessions, with finished jobs of large results and with large SSE
// event logs — more than the etcd holds — while another client keeps
// working. The other client's starts succeed, its retained job result and
// its stored stream stay, etcd never refuses a write for lack of space;
// the flooder's starts are refused naming max_retained_job_bytes_per_agent
// and its streams past max_event_bytes_per_session and
// max_event_bytes_per_client are not stored, while those before stay.
func TestRetainedFlood(t *testing.T) {
	t.Parallel()
	_, st := storetest.EmbeddedWith(t, store.EmbeddedConfig{QuotaBytes: floodEtcdQuota}, store.EtcdConfig{})
	sctx, stopSweeper := context.WithCancel(context.Background())
	var sweeper sync.WaitGroup
	sweeper.Go(func() {
		_ = st.RunSweeper(sctx, store.SweeperConfig{RecoverSpace: true, SpaceRecoveryInterval: time.Second})
	})
	t.Cleanup(func() { stopSweeper(); sweeper.Wait() })

	up := floodUpstream(t)
	var hostOpts host.Options
	opts := testOptions("default")
	floodQuotas(&hostOpts, &opts)
	hst := newTestHostOf(t, "rest", fmt.Sprintf(floodOps, up.URL), st, nil, func(o *host.Options) { o.Quotas = hostOpts.Quotas })
	core, logs := observer.New(zap.InfoLevel)
	opts.Logger = zap.New(core)
	opts.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Test-Client") }
	_, url := serveEndpoint(t, hst, st, opts)

	client := func(addr string) *mcptest.Client {
		c := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Test-Client": {addr}}}
		c.Initialize("2025-11-25")
		return c
	}
	other := client("192.0.2.2")

	// The other client's job and stream before the flood.
	kept := finishJob(t, other, "small_job")
	if kept.status != "succeeded" {
		t.Fatalf("the other client's first job: %+v", kept)
	}
	keptStream, res := streamCall(t, other, "big")
	if res.IsError || keptStream == "" {
		t.Fatalf("the other client's big call: %q, %+v", keptStream, res)
	}

	// The flood: two anonymous sessions (two agents) of one address.
	var refusals []string
	flooders := []*mcptest.Client{client("192.0.2.1"), client("192.0.2.1")}
	streams := make([][]string, len(flooders))
	for i, flooder := range flooders {
		for range 15 {
			if j := finishJob(t, flooder, "big_job"); j.refusal != "" {
				refusals = append(refusals, j.refusal)
			}
			if id, _ := streamCall(t, flooder, "big"); id != "" {
				streams[i] = append(streams[i], id)
			}
		}
	}
	// A big answer's log takes about 0.9 MiB: the first session keeps
	// four (max_event_bytes_per_session 4 MiB), the second two more, and
	// its third is past max_event_bytes_per_client (6 MiB) while its own
	// session is far from its bound.
	for _, c := range []struct {
		flooder, stream int
		stored          bool
		what            string
	}{
		{0, 0, true, "the first session's first stream"},
		{0, 14, false, "the first session's last stream (past its session's quota)"},
		{1, 0, true, "the second session's first stream"},
		{1, 2, false, "the second session's third stream (past the client's quota)"},
	} {
		if code := resume(t, flooders[c.flooder], streams[c.flooder][c.stream]); (code == http.StatusOK) != c.stored {
			t.Errorf("resuming %s: HTTP %d, want it stored %v", c.what, code, c.stored)
		}
	}

	// The other client keeps working: a new job, and nothing it kept lost.
	if j := finishJob(t, other, "small_job"); j.status != "succeeded" {
		t.Errorf("the other client's start after the flood: %+v", j)
	}
	if got := callTool(other, "small_job_result", map[string]any{"job_id": kept.id}); got.IsError || got.StructuredContent["status"] != "succeeded" {
		t.Errorf("the other client's kept result after the flood: %+v", got)
	}
	if code := resume(t, other, keptStream); code != http.StatusOK {
		t.Errorf("resuming the other client's stream after the flood: HTTP %d", code)
	}
	if sp := st.SpaceStatus(); sp.Refused > 0 {
		t.Errorf("etcd refused %d writes for lack of space", sp.Refused)
	}

	if len(refusals) == 0 || !strings.Contains(refusals[0], "quota max_retained_job_bytes_per_agent exceeded") {
		t.Errorf("the flooder's starts were not refused by its retention quota: %q", refusals)
	}
	if logs.FilterMessageSnippet("not stored: an event-log quota is full").Len() == 0 {
		t.Error("no log line for the streams not stored")
	}
}

type floodJob struct {
	id, status, refusal string
}

// finishJob starts a job of op and waits until it is final; a refused
// start returns its text as refusal.
func finishJob(t *testing.T, c *mcptest.Client, op string) floodJob {
	t.Helper()
	var res mcptest.CallResult
	r := c.Call("tools/call", map[string]any{"name": op + "_start", "arguments": map[string]any{}})
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		return floodJob{refusal: fmt.Sprintf("HTTP %d %s %+v", r.HTTPStatus, r.Body, r.Error)}
	}
	if res.IsError {
		return floodJob{refusal: res.Text()}
	}
	id, _ := res.StructuredContent["job_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var s mcptest.CallResult
		r := c.Call("tools/call", map[string]any{"name": op + "_status", "arguments": map[string]any{"job_id": id}})
		if r.Error != nil || json.Unmarshal(r.Result, &s) != nil || s.IsError {
			return floodJob{id: id, status: fmt.Sprintf("status: %s %+v %s", r.Result, r.Error, s.Text())}
		}
		if st, _ := s.StructuredContent["status"].(string); st != "queued" && st != "running" {
			return floodJob{id: id, status: st}
		}
	}
	return floodJob{id: id, status: "still running after 30s"}
}

// streamCall calls tool in an SSE response and returns the id of its
// first event (the priming event: a resume from it replays the answer)
// and the answer.
func streamCall(t *testing.T, c *mcptest.Client, tool string) (string, mcptest.CallResult) {
	t.Helper()
	var res mcptest.CallResult
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, _, err := c.Request(ctx, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok && first == "" {
			first = id
		}
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
			var msg struct {
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal([]byte(d), &msg) == nil && msg.Result != nil {
				_ = json.Unmarshal(msg.Result, &res)
			}
		}
	}
	return first, res
}

// resume resumes a stream of c's session after its event id and returns
// the HTTP status (200 once the answer was replayed).
func resume(t *testing.T, c *mcptest.Client, eventID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	for k, v := range c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	req.Header.Set("MCP-Protocol-Version", c.Version)
	req.Header.Set("Last-Event-ID", eventID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"result"`) {
			return http.StatusOK
		}
	}
	return http.StatusNoContent // 200 without the answer
}

// TestEvictedJobSaysWhy: past max_retained_jobs_per_agent an agent's
// oldest finished job is evicted, and its result tool and tasks/get say
// so, naming the quota; another agent's job stays.
func TestEvictedJobSaysWhy(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := floodUpstream(t)
	hst := newTestHostOf(t, "rest", fmt.Sprintf(floodOps, up.URL), st, nil, func(o *host.Options) { o.Quotas.RetainedJobsPerAgent = 1 })
	_, url := serveEndpoint(t, hst, st, testOptions("default"))

	other := &mcptest.Client{T: t, URL: url}
	other.Initialize(tasksProtocolVersion)
	kept := finishJob(t, other, "small_job")
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize(tasksProtocolVersion)
	task := c.StartTask("small_job_start", map[string]any{})
	mcptest.WaitUntil(t, "the task to complete", func() bool { return c.GetTask(task.TaskID).Status == "completed" })
	if j := finishJob(t, c, "small_job"); j.status != "succeeded" {
		t.Fatalf("the second job: %+v", j)
	}

	// The finish of the second job trims the agent's oldest after the
	// job's final status is written: its status may be read first.
	var res mcptest.CallResult
	mcptest.WaitUntil(t, "the first job to be evicted", func() bool {
		res = callTool(c, "small_job_result", map[string]any{"job_id": task.TaskID})
		return res.IsError
	})
	if !res.IsError || !strings.Contains(res.Text(), "expired early: evicted") ||
		!strings.Contains(res.Text(), "by the agent's retention quota (max_retained_jobs_per_agent 1") {
		t.Errorf("the evicted job's result: %+v", res)
	}
	c.Fails("tasks/get", map[string]any{"taskId": task.TaskID}, -32602, "evicted at")
	if kres := callTool(other, "small_job_result", map[string]any{"job_id": kept.id}); kres.IsError || kres.StructuredContent["status"] != "succeeded" {
		t.Errorf("another agent's job: %+v", kres)
	}
}
