package mcpserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// The secrets of redactOps, from the environment: a bearer token with
// characters JSON escapes, and a query key.
const (
	redactToken = `tok"<en>&9Zq-0123`
	redactKey   = "k3y_Abc-0123456789"
)

const redactOps = `version: 1
operations:
  - name: refused
    description: A job the upstream refuses, quoting the request.
    adapter: rest
    mode: async_job
    config: {method: GET, url: "%[1]s/fail?key={env.CRANK_REDACT_KEY}", headers: {Authorization: "Bearer {env.CRANK_REDACT_TOKEN}"}}
  - name: echoed
    description: A job whose answer quotes the request.
    adapter: rest
    mode: async_job
    config: {method: GET, url: "%[1]s/ok?key={env.CRANK_REDACT_KEY}", headers: {Authorization: "Bearer {env.CRANK_REDACT_TOKEN}"}}
`

// newEchoServer answers every request with its credentials quoted: as
// sent, JSON-escaped and in base64; /fail with a 500, /ok as JSON.
func newEchoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		j, _ := json.Marshal(auth)
		echo := fmt.Sprintf("denied: auth=%s key=%s json=%s b64=%s", auth, r.URL.Query().Get("key"), j,
			base64.StdEncoding.EncodeToString([]byte(auth)))
		if r.URL.Path == "/fail" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, echo)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"echo": echo})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// wireLeaks fails the test for each form of a secret in what a client
// received: as sent, JSON-escaped (once or twice), or the base64 run that
// stands for the token in its Authorization header.
func wireLeaks(t *testing.T, what, text string) {
	t.Helper()
	j, _ := json.Marshal(redactToken)
	jj, _ := json.Marshal(string(j))
	header := base64.StdEncoding.EncodeToString([]byte("Bearer " + redactToken))
	run := header[(8*len("Bearer ")+5)/6 : 8*len("Bearer "+redactToken)/6]
	for _, leak := range []string{redactToken, redactKey, string(j[1 : len(j)-1]), string(jj[1 : len(jj)-1]), run} {
		if strings.Contains(text, leak) {
			t.Errorf("%s: %q leaks in:\n%s", what, leak, text)
		}
	}
	if !strings.Contains(text, "denied") || !strings.Contains(text, redact.Mark) {
		t.Errorf("%s: want the upstream's answer, redacted: %s", what, text)
	}
}

// Tasks read what their jobs stored; the upstream's echo of the request's
// credentials never reaches a client: not in tasks/get's statusMessage,
// not in tasks/result, not in the result the 2026-07-28 extension inlines
// in tasks/get.
func TestTaskResultsRedacted(t *testing.T) {
	t.Setenv("CRANK_REDACT_TOKEN", redactToken)
	t.Setenv("CRANK_REDACT_KEY", redactKey)
	_, st := storetest.Embedded(t)
	up := newEchoServer(t)
	hst := newTestHost(t, fmt.Sprintf(redactOps, up.URL), st, nil)

	serve := func(o Options) string {
		ep, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ep.Attach(hst, st)
		srv := httptest.NewServer(ep)
		t.Cleanup(func() { srv.Close(); _ = ep.Close() })
		return srv.URL + "/mcp"
	}

	// Protocol 2025-11-25: tasks/get and tasks/result.
	c := newTaskClient(t, serve(testOptions("default")), "agent-1", "")
	c.Initialize(tasksProtocolVersion)
	for _, tool := range []string{"refused_start", "echoed_start"} {
		task := c.StartTask(tool, map[string]any{})
		var got mcptest.Task
		mcptest.WaitUntil(t, tool+" to end", func() bool { got = c.GetTask(task.TaskID); return got.Status != "working" })
		if tool == "refused_start" {
			wireLeaks(t, tool+" statusMessage", got.StatusMessage)
		}
		var res json.RawMessage
		c.OK("tasks/result", map[string]any{"taskId": task.TaskID}, &res)
		wireLeaks(t, tool+" tasks/result", string(res))
	}

	// Protocol 2026-07-28: the result inlined in tasks/get.
	opts := testOptions("default")
	opts.Stateless = true
	ext := newExtClient(t, serve(opts))
	for _, tool := range []string{"refused_start", "echoed_start"} {
		var created struct {
			TaskID string `json:"taskId"`
		}
		ext.Header.Set("Mcp-Method", "tools/call")
		ext.Header.Set("Mcp-Name", tool)
		ext.OK("tools/call", extParams(true, "name", tool, "arguments", map[string]any{}), &created)
		var got map[string]any
		mcptest.WaitUntil(t, tool+" to complete", func() bool {
			ext.Header.Set("Mcp-Method", "tasks/get")
			ext.Header.Set("Mcp-Name", created.TaskID)
			ext.OK("tasks/get", extParams(true, "taskId", created.TaskID), &got)
			return got["status"] == "completed"
		})
		b, _ := json.Marshal(got)
		wireLeaks(t, tool+" inlined result", string(b))
	}
}
