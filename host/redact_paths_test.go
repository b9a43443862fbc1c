package host_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/host/redact/redacttest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// The secrets of echoOps, expanded from placeholders: a bearer token with
// characters every encoding escapes, a query key, a user and password
// sent as Basic authorization (from a URL's userinfo), and a capability
// URL whose path and query are the secret.
const (
	echoToken = `tok"<en>&/+=~9Zq`
	echoKey   = "k3y_Abc-0123456789"
	echoUser  = "svc-user"
	echoPass  = "p4ss-w0rd!x"
	echoHook  = "hook-0123456789abcdefXYZ"
	echoSig   = "sig0123456789"
)

// echoUpstream echoes each request's credentials — the Authorization
// header, the key query parameter, the request URI — in its error bodies
// and stream items: as sent, JSON-escaped and in base64, as upstreams
// that quote a request do.
type echoUpstream struct {
	*streamUpstream
	exportPolls atomic.Int32
}

func echoOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	j, _ := json.Marshal(auth)
	return fmt.Sprintf("denied: auth=%s key=%s uri=%s json=%s b64=%s", auth, r.URL.Query().Get("key"), r.URL.RequestURI(),
		j, base64.StdEncoding.EncodeToString([]byte(auth)))
}

func newEchoUpstream(t testing.TB) *echoUpstream {
	u := &echoUpstream{}
	fail := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(code)
			fmt.Fprint(w, echoOf(r))
		}
	}
	answer := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	u.streamUpstream = newStreamUpstream(t, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /echo/fail", fail(http.StatusInternalServerError))
		mux.HandleFunc("GET /hook/", fail(http.StatusForbidden))
		mux.HandleFunc("GET /echo/ok", func(w http.ResponseWriter, r *http.Request) {
			answer(w, http.StatusOK, map[string]any{"echo": echoOf(r)})
		})
		// Two items, then the connection ends; the reconnection fails.
		mux.HandleFunc("GET /echo/stream", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Last-Event-ID") != "" {
				fail(http.StatusInternalServerError)(w, r)
				return
			}
			f := startSSE(w)
			for i := 1; i <= 2; i++ {
				item, _ := json.Marshal(map[string]any{"n": i, "echo": echoOf(r)})
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i, item)
			}
			f.Flush()
		})
		// A page, then a failing poll.
		mux.HandleFunc("GET /echo/poll", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("since") != "" {
				fail(http.StatusInternalServerError)(w, r)
				return
			}
			answer(w, http.StatusOK, map[string]any{"items": []any{map[string]any{"echo": echoOf(r)}}, "next": "1"})
		})
		// An upstream job: its ticket, its status (the echo as its state,
		// then as its result), and a ticket it refuses.
		mux.HandleFunc("POST /echo/exports", func(w http.ResponseWriter, r *http.Request) {
			answer(w, http.StatusAccepted, map[string]any{"ticket": "T-1", "echo": echoOf(r)})
		})
		mux.HandleFunc("GET /echo/exports/{ticket}", func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("ticket") != "T-1" {
				fail(http.StatusBadRequest)(w, r)
				return
			}
			if u.exportPolls.Add(1) < 3 {
				answer(w, http.StatusOK, map[string]any{"state": echoOf(r), "done": false})
				return
			}
			answer(w, http.StatusOK, map[string]any{"done": true, "file": map[string]any{"echo": echoOf(r)}})
		})
	})
	return u
}

const echoOps = `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: unary
    description: A call the upstream refuses, quoting the request.
    adapter: rest
    config: {method: GET, url: "UPSTREAM/echo/fail?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: basic
    description: A call with Basic authorization from the URL's userinfo.
    adapter: rest
    config: {method: GET, url: "http://{env.USER}:{env.PASS}@UPHOST/echo/fail"}
  - name: hook
    description: A capability URL.
    adapter: rest
    config: {method: GET, url: "{env.HOOK_URL}"}
  - name: window
    description: A stream that echoes, then fails.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 10000}
    config: {method: GET, url: "UPSTREAM/echo/stream?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: window_poll
    description: Polls that echo, then fail.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 10000, poll_interval_ms: 10}
    aggregation: {items_path: "$.items[*]", cursor_path: $.next}
    config: {method: GET, url: "UPSTREAM/echo/poll?key={env.KEY}", cursor_param: since, headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: session
    description: A session on a stream that echoes, then fails.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 60000, max_session_lifetime_ms: 60000}
    config: {method: GET, url: "UPSTREAM/echo/stream?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: session_poll
    description: A polled session that echoes, then fails.
    adapter: rest
    mode: session
    transport_behavior: request_response
    limits: {poll_interval_ms: 10}
    aggregation: {items_path: "$.items[*]", cursor_path: $.next}
    config: {method: GET, url: "UPSTREAM/echo/poll?key={env.KEY}", cursor_param: since, headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: job_fail
    description: A background call the upstream refuses.
    adapter: rest
    mode: async_job
    config: {method: GET, url: "UPSTREAM/echo/fail?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: job_ok
    description: A background call whose answer echoes.
    adapter: rest
    mode: async_job
    config: {method: GET, url: "UPSTREAM/echo/ok?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: job_window
    description: A window in the background.
    adapter: rest
    mode: async_job
    transport_behavior: server_stream
    limits: {window_duration_ms: 10000}
    config: {method: GET, url: "UPSTREAM/echo/stream?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: job_native
    description: An upstream job followed through its status.
    adapter: rest
    mode: async_job
    job:
      status_operation: export_status
      status_arguments: {ticket: $.ticket}
      poll_interval_ms: 10
      done_path: $.done
      status_path: $.state
      result_path: $.file
    config: {method: POST, url: "UPSTREAM/echo/exports?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: job_native_refused
    description: An upstream job whose status request is refused.
    adapter: rest
    mode: async_job
    job:
      status_operation: export_status
      status_arguments: {ticket: nope}
      poll_interval_ms: 10
      done_path: $.done
    config: {method: POST, url: "UPSTREAM/echo/exports?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
  - name: export_status
    description: An export's status.
    adapter: rest
    config: {method: GET, url: "UPSTREAM/echo/exports/{ticket}?key={env.KEY}", headers: {Authorization: "Bearer {env.TOKEN}"}}
`

type echoFixture struct {
	h    *host.Host
	st   *store.Etcd
	logs *observer.ObservedLogs
	// progress collects the progress messages of every call.
	mu       sync.Mutex
	progress []string
}

func newEchoFixture(t *testing.T) *echoFixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := newEchoUpstream(t)
	env := map[string]string{
		"{env.TOKEN}": echoToken, "{env.KEY}": echoKey, "{env.USER}": echoUser, "{env.PASS}": echoPass,
		"{env.HOOK_URL}": up.URL + "/hook/" + echoHook + "?sig=" + echoSig,
	}
	ops := strings.NewReplacer("UPSTREAM", up.URL, "UPHOST", strings.TrimPrefix(up.URL, "http://")).Replace(fmt.Sprintf(echoOps, exe))
	cat, err := opsfile.Parse("ops.yaml", []byte(ops), opsfile.LoadOptions{Expand: func(s string) string {
		for k, v := range env {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, st := storetest.Embedded(t)
	core, logs := observer.New(zap.DebugLevel)
	h, err := host.New(context.Background(), host.Options{File: cat, Store: st, Logger: zap.New(core), Audit: zap.New(core),
		Adapter: oneSupervisor(t, cat, zap.New(core))})
	if err != nil {
		t.Fatal(err)
	}
	return &echoFixture{h: h, st: st, logs: logs}
}

// oneSupervisor binds every adapter a catalog names to one supervisor, of
// the first adapter asked for.
func oneSupervisor(t *testing.T, cat *opsfile.File, log *zap.Logger) func(string) (*host.Supervisor, error) {
	var mu sync.Mutex
	var sup *host.Supervisor
	return func(name string) (*host.Supervisor, error) {
		mu.Lock()
		defer mu.Unlock()
		if sup == nil {
			spec, err := host.AdapterSpecOf(cat, name, nil)
			if err != nil {
				return nil, err
			}
			sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1, Logger: log})
			t.Cleanup(func() { sup.Close() })
		}
		return sup, nil
	}
}

func (f *echoFixture) call(t *testing.T, tool, args string) *host.Result {
	t.Helper()
	res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool(tool), Arguments: json.RawMessage(args),
		WorkspaceID: "ws", AgentID: "a1", Progress: func(_ context.Context, c host.ProgressChunk) {
			f.mu.Lock()
			f.progress = append(f.progress, c.Message)
			f.mu.Unlock()
		}})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// echoLeaks are the texts that must never leave the host: every secret in
// each covered encoding, the bearer token and the Basic credentials inside
// the base64 of their Authorization headers, the capability URL's parts.
func echoLeaks() []string {
	var out []string
	for _, s := range []string{echoToken, echoKey, echoUser, echoPass, echoHook, echoSig} {
		for _, e := range redacttest.Encodings(s) {
			out = append(out, e)
		}
	}
	out = append(out,
		redacttest.Base64Run(base64.StdEncoding, "Bearer ", echoToken, ""),
		base64.StdEncoding.EncodeToString([]byte(echoUser+":"+echoPass)),
		redacttest.Base64Run(base64.StdEncoding, echoUser+":", echoPass, ""))
	slices.Sort(out)
	return slices.Compact(out)
}

// noLeak fails the test for every secret form found in what the host let
// out through a channel.
func noLeak(t *testing.T, channel, text string) {
	t.Helper()
	for _, leak := range echoLeaks() {
		if strings.Contains(text, leak) {
			t.Errorf("%s: %q leaks in:\n%s", channel, leak, text)
		}
	}
}

// mustEcho checks that a channel carried the upstream's echo, redacted: a
// channel that never saw the secret proves nothing.
func mustEcho(t *testing.T, channel, text string) {
	t.Helper()
	if !strings.Contains(text, "denied") || !strings.Contains(text, redact.Mark) {
		t.Errorf("%s: want the redacted echo, got:\n%s", channel, text)
	}
	noLeak(t, channel, text)
}

// Every path from an upstream answer or error to a result, a progress
// message, a stored record, an audit record or a log line redacts the
// secrets the request carried, in every encoding the upstream echoes them
// in: unary calls, windows (stream and polls), sessions, jobs of all
// three kinds and tasks.
func TestRedactionOfEchoingUpstream(t *testing.T) {
	f := newEchoFixture(t)
	ctx := context.Background()
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a1"}

	t.Run("unary", func(t *testing.T) {
		for _, tool := range []string{"unary", "basic", "hook"} {
			res := f.call(t, tool, `{}`)
			if !res.IsError {
				t.Fatalf("%s: %+v", tool, res)
			}
			mustEcho(t, tool+" result", res.Text)
		}
	})
	t.Run("window", func(t *testing.T) {
		for _, tool := range []string{"window", "window_poll"} {
			res := f.call(t, tool, `{}`)
			if !res.IsError || !strings.Contains(res.Text, "collected") {
				t.Fatalf("%s: %+v", tool, res)
			}
			mustEcho(t, tool+" text", res.Text)
			mustEcho(t, tool+" structuredContent", string(res.Structured))
		}
		f.mu.Lock()
		progress := strings.Join(f.progress, "\n")
		f.mu.Unlock()
		mustEcho(t, "progress", progress)
	})
	t.Run("session", func(t *testing.T) {
		for _, name := range []string{"session", "session_poll"} {
			start := f.call(t, name+"_start", `{}`)
			var s struct {
				ID string `json:"session_id"`
			}
			_ = json.Unmarshal(start.Structured, &s)
			var poll *host.Result
			waitFor(t, func() bool {
				poll = f.call(t, name+"_poll", `{"session_id":"`+s.ID+`"}`)
				return strings.Contains(poll.Text, `"status":"failed"`)
			})
			mustEcho(t, name+" poll", poll.Text)
			// The stored record and items, read as the store holds them.
			ss, err := f.st.GetStreamSession(ctx, scope, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			mustEcho(t, name+" stored error", string(ss.Error))
			items, err := f.st.PollStreamSession(ctx, scope, s.ID, store.PollRequest{})
			if err != nil || len(items.Items) == 0 {
				t.Fatalf("stored items: %v %v", items, err)
			}
			for _, it := range items.Items {
				mustEcho(t, name+" stored item", string(it.Data))
			}
		}
	})
	t.Run("job", func(t *testing.T) {
		for _, name := range []string{"job_fail", "job_ok", "job_window", "job_native", "job_native_refused"} {
			start := f.call(t, name+"_start", `{}`)
			var j struct {
				ID string `json:"job_id"`
			}
			_ = json.Unmarshal(start.Structured, &j)
			var res *host.Result
			waitFor(t, func() bool {
				res = f.call(t, name+"_result", `{"job_id":"`+j.ID+`"}`)
				return strings.Contains(res.Text, `"ready":true`)
			})
			mustEcho(t, name+" result", res.Text)
			job, err := f.st.GetJobResult(ctx, scope, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			mustEcho(t, name+" stored record", string(job.Result)+string(job.Error))
			noLeak(t, name+" stored progress", string(job.Progress))
			noLeak(t, name+" status", f.call(t, name+"_status", `{"job_id":"`+j.ID+`"}`).Text)
		}
	})
	t.Run("task", func(t *testing.T) {
		hs := host.Scope{WorkspaceID: "ws", AgentID: "a1"}
		for _, tool := range []string{"job_fail_start", "job_ok_start"} {
			task, res, err := f.h.StartTask(ctx, host.CallRequest{Tool: f.h.Tool(tool), Arguments: json.RawMessage(`{}`), WorkspaceID: "ws", AgentID: "a1"})
			if err != nil || res != nil {
				t.Fatalf("StartTask %s: %v %+v", tool, err, res)
			}
			done, out, err := f.h.WaitTask(ctx, hs, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			mustEcho(t, tool+" task result", out.Text+string(out.Structured))
			got, err := f.h.GetTask(ctx, hs, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			noLeak(t, tool+" task", string(done.Error)+string(got.Error)+string(got.Progress))
			if tool == "job_fail_start" {
				mustEcho(t, tool+" task error", string(got.Error))
			}
		}
	})
	// A record an earlier release stored unredacted is redacted as it is
	// read: by the job tools and as a task.
	t.Run("stored unredacted", func(t *testing.T) {
		job, err := f.st.CreateJob(ctx, store.NewJob{Scope: scope, AgentScoped: true, OperationID: "job_fail",
			MaxRuntime: time.Minute, Retention: time.Minute, Owned: true})
		if err != nil {
			t.Fatal(err)
		}
		msg := json.RawMessage(`{"code":"upstream_error","message":"denied: key=` + echoKey + ` json=\"` + strings.ReplaceAll(echoToken, `"`, `\\\"`) + `\""}`)
		if _, err := f.st.UpdateJob(ctx, job.ID, store.JobUpdate{Status: store.JobFailed, Error: msg}); err != nil {
			t.Fatal(err)
		}
		mustEcho(t, "earlier record's result", f.call(t, "job_fail_result", `{"job_id":"`+job.ID+`"}`).Text)
		mustEcho(t, "earlier record's status", f.call(t, "job_fail_status", `{"job_id":"`+job.ID+`"}`).Text)
		hs := host.Scope{WorkspaceID: "ws", AgentID: "a1"}
		task, err := f.h.GetTask(ctx, hs, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustEcho(t, "earlier record's task", string(task.Error))
		_, res, err := f.h.WaitTask(ctx, hs, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		mustEcho(t, "earlier record's task result", res.Text)
	})
	// Audit records and log lines, of every call above.
	time.Sleep(100 * time.Millisecond) // the last runners' log lines
	var logged strings.Builder
	for _, e := range f.logs.All() {
		fmt.Fprintf(&logged, "%s %v\n", e.Message, e.ContextMap())
	}
	if !strings.Contains(logged.String(), "crank audit") || !strings.Contains(logged.String(), "outcome:error") {
		t.Errorf("no audit records of failures:\n%s", logged.String())
	}
	noLeak(t, "logs", logged.String())
}
