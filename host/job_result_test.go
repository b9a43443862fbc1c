package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
)

// bigOps is an async_job whose upstream answers with as many bytes as
// asked for (the REST adapter takes up to 16 MiB).
const bigOps = `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: big
    description: Fetch a large document.
    adapter: rest
    mode: async_job
    timeout: 1m
    input_schema: {type: object, properties: {bytes: {type: integer}}}
    config: {method: GET, url: "BIG/big", query: [bytes], max_response_bytes: 16777216}
`

// newBigUpstream answers GET /big?bytes=N with a JSON document of about N
// bytes.
func newBigUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":"%s"}`, strings.Repeat("x", n))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitJob polls a job's status tool until it is final.
func waitJob(t *testing.T, h *host.Host, tool, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := famOK(t, h, "a1", tool, `{"job_id":"`+id+`"}`)
		switch m["status"] {
		case "succeeded", "failed", "canceled":
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %v after 30s: it is stuck", id, m["status"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A job whose answer is larger than a store record keeps ends, never
// stuck running: a 900 KB answer is kept whole (the result is stored once,
// apart from the job record); a 10 MB one fails the job with an error
// naming the limit, and tasks/result (WaitTask) answers at once.
func TestJobResultSizes(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, strings.ReplaceAll(bigOps, "BIG", newBigUpstream(t)), host.Quotas{})
	scope := host.Scope{WorkspaceID: "ws", AgentID: "a1"}

	start := famOK(t, f.h, "a1", "big_start", `{"bytes":900000}`)
	id := start["job_id"].(string)
	if st := waitJob(t, f.h, "big_status", id); st["status"] != "succeeded" {
		t.Fatalf("900 KB answer: %v", st)
	}
	r := famOK(t, f.h, "a1", "big_result", `{"job_id":"`+id+`"}`)
	data, _ := r["result"].(map[string]any)["data"].(string)
	if len(data) != 900000 || !strings.HasPrefix(r["text"].(string), `{"data":"xxx`) {
		t.Fatalf("900 KB result: %d bytes of data, text %.40q", len(data), r["text"])
	}
	_, out, err := f.h.WaitTask(context.Background(), scope, id)
	if err != nil || out.IsError || len(out.Structured) < 900000 || len(out.Text) < 900000 {
		t.Fatalf("WaitTask of the 900 KB job: %v, %d/%d bytes", err, len(out.Structured), len(out.Text))
	}

	task, res, err := f.h.StartTask(context.Background(), host.CallRequest{Tool: f.h.Tool("big_start"),
		Arguments: json.RawMessage(`{"bytes":10000000}`), WorkspaceID: "ws", AgentID: "a1"})
	if err != nil || res != nil {
		t.Fatalf("StartTask: %v %+v", err, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, out, err := f.h.WaitTask(ctx, scope, task.ID)
	if err != nil {
		t.Fatalf("WaitTask of the 10 MB job: %v (stuck running?)", err)
	}
	if done.Status != "failed" || !out.IsError || !strings.Contains(out.Text, "over the") || !strings.Contains(out.Text, "limit of a job result") {
		t.Fatalf("10 MB job: %s, %q", done.Status, out.Text)
	}
	st := waitJob(t, f.h, "big_status", task.ID)
	e, _ := st["error"].(map[string]any)
	if st["status"] != "failed" || e["code"] != "result_too_large" || !strings.Contains(fmt.Sprint(e["message"]), "max_request_bytes") {
		t.Fatalf("10 MB job status: %v", st)
	}
	if m, res := famCall(t, f.h, "a1", "big_result", `{"job_id":"`+task.ID+`"}`); !res.IsError || m["status"] != "failed" {
		t.Fatalf("10 MB job result: %v", m)
	}
}
