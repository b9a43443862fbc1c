package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
)

// windowSecret is expanded from a placeholder into an operation's config;
// the upstream echoes it back inside events.
const windowSecret = "w1nd0w-s3cret-token"

// streamUpstream is a real loopback server with SSE and long-poll
// endpoints that misbehave in every way a window must survive.
type streamUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	closed   map[string]chan struct{} // endpoint → closed when a request of it ended
	lastIDs  map[string][]string      // endpoint → Last-Event-ID per request
	pollArgs []string
}

func (u *streamUpstream) closedCh(name string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed[name] == nil {
		u.closed[name] = make(chan struct{})
	}
	return u.closed[name]
}

// track records a request of an endpoint and, when it ends, signals it.
func (u *streamUpstream) track(name string, r *http.Request) func() {
	u.mu.Lock()
	u.lastIDs[name] = append(u.lastIDs[name], r.Header.Get("Last-Event-ID"))
	u.mu.Unlock()
	ch := u.closedCh(name)
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

func (u *streamUpstream) ids(name string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.lastIDs[name]...)
}

func startSSE(w http.ResponseWriter) http.Flusher {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	f.Flush()
	return f
}

func newStreamUpstream(t testing.TB, extra ...func(*http.ServeMux)) *streamUpstream {
	u := &streamUpstream{closed: map[string]chan struct{}{}, lastIDs: map[string][]string{}}
	mux := http.NewServeMux()
	from := func(r *http.Request) int {
		n, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		return n + 1
	}
	// An upstream that never ends: an event every 10ms.
	mux.HandleFunc("GET /endless", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("endless", r)()
		f := startSSE(w)
		for i := from(r); ; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"level\":\"%s\"}\n\n", i, i, []string{"info", "warn", "error"}[i%3])
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	// A flood: events as fast as the connection takes them.
	mux.HandleFunc("GET /flood", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("flood", r)()
		f := startSSE(w)
		for i := from(r); r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"pad\":\"%s\"}\n\n", i, i, strings.Repeat("x", 64))
			if i%64 == 0 {
				f.Flush()
			}
		}
	})
	// A 10 MB event between two small ones, then the end of the stream.
	mux.HandleFunc("GET /huge", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("huge", r)()
		if r.Header.Get("Last-Event-ID") != "" {
			w.WriteHeader(http.StatusNoContent) // no more: stop reconnecting
			return
		}
		f := startSSE(w)
		fmt.Fprint(w, "id: 1\ndata: {\"n\":1}\n\n")
		big := strings.Repeat("y", 1<<20)
		fmt.Fprint(w, "data: {\"big\":\"")
		for range 10 {
			fmt.Fprint(w, big)
		}
		fmt.Fprint(w, "\"}\n\n")
		fmt.Fprint(w, "id: 2\ndata: {\"n\":2}\n\n")
		f.Flush()
	})
	// Stalls before answering at all.
	mux.HandleFunc("GET /mute", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("mute", r)()
		<-r.Context().Done()
	})
	// Two events, then silence with the connection open.
	mux.HandleFunc("GET /stall", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("stall", r)()
		f := startSSE(w)
		fmt.Fprint(w, "id: 1\ndata: 1\n\nid: 2\ndata: 2\n\n")
		f.Flush()
		<-r.Context().Done()
	})
	// Drops the connection after every three events, mid-event; resumes
	// after Last-Event-ID; has nothing more after event 6.
	mux.HandleFunc("GET /drop", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("drop", r)()
		start := from(r)
		if start > 6 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		f := startSSE(w)
		for i := start; i < start+3; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d}\n\n", i, i)
		}
		fmt.Fprint(w, "id: 99\ndata: {\"torn")
		f.Flush()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
	})
	// Two events, then the connection drops and the upstream fails.
	mux.HandleFunc("GET /broken", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("broken", r)()
		if r.Header.Get("Last-Event-ID") != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":"disk full","owner":"ops@example.com"}`)
			return
		}
		f := startSSE(w)
		fmt.Fprint(w, "id: 1\ndata: {\"n\":1}\n\nid: 2\ndata: {\"n\":2}\n\n")
		f.Flush()
	})
	// Events carrying secrets: a password, an email, and the configured
	// token echoed back.
	mux.HandleFunc("GET /secrets", func(w http.ResponseWriter, r *http.Request) {
		defer u.track("secrets", r)()
		f := startSSE(w)
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"user\":{\"email\":\"user%d@example.com\",\"password\":\"pw-%d-hunter2\"},\"echo\":%q}\n\n",
				i, i, i, i, r.Header.Get("X-Token"))
		}
		f.Flush()
		<-r.Context().Done()
	})
	// Long-poll pages: ?since=<cursor>, done on the last page.
	mux.HandleFunc("GET /poll", func(w http.ResponseWriter, r *http.Request) {
		since := r.URL.Query().Get("since")
		u.mu.Lock()
		u.pollArgs = append(u.pollArgs, since)
		u.mu.Unlock()
		page, _ := strconv.Atoi(since)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"metrics":[{"host":"a","cpu":%d},{"host":"b","cpu":%d}],"next":"%d","state":"page %d","done":%t}`,
			10+page, 20+page, page+1, page, page >= 2)
	})
	var flaky sync.Mutex
	flakyCalls := 0
	mux.HandleFunc("GET /flaky", func(w http.ResponseWriter, r *http.Request) {
		flaky.Lock()
		flakyCalls++
		n := flakyCalls
		flaky.Unlock()
		if n == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items":[1],"done":true}`)
	})
	mux.HandleFunc("GET /emptypoll", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"items":[]}`)
	})
	mux.HandleFunc("GET /slowpoll", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	for _, f := range extra {
		f(mux)
	}
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

const windowOps = `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: endless
    description: A stream that never ends.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 300}
    aggregation: {aggregation_mode: summary_plus_samples, group_by: $.level, sample_size: 1}
    config: {method: GET, url: "UPSTREAM/endless"}
  - name: flood_items
    description: A flood cut by max_items.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, max_items: 50}
    config: {method: GET, url: "UPSTREAM/flood"}
  - name: flood_bytes
    description: A flood cut by max_bytes.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, max_bytes: 10000}
    config: {method: GET, url: "UPSTREAM/flood"}
  - name: huge
    description: A 10 MB event.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 60000}
    config: {method: GET, url: "UPSTREAM/huge"}
  - name: mute
    description: An upstream that never answers.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, upstream_timeout_ms: 200}
    config: {method: GET, url: "UPSTREAM/mute"}
  - name: stall
    description: An upstream that stalls.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, idle_timeout_ms: 200}
    config: {method: GET, url: "UPSTREAM/stall"}
  - name: stall_window
    description: An upstream that stalls, no idle timeout.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 300}
    config: {method: GET, url: "UPSTREAM/stall"}
  - name: drop
    description: An upstream that drops the connection.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 10000}
    config: {method: GET, url: "UPSTREAM/drop"}
  - name: broken
    description: An upstream that fails mid-window.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 10000}
    safety: {redacted_paths: [$.owner]}
    config: {method: GET, url: "UPSTREAM/broken"}
  - name: secrets
    description: Events with secrets.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, max_items: 3}
    safety: {redacted_paths: [$.user.email, $..password]}
    config: {method: GET, url: "UPSTREAM/secrets", headers: {X-Token: "{env.WINDOW_SECRET}"}}
  - name: poll
    description: Long-poll pages.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10}
    aggregation: {aggregation_mode: stats, items_path: "$.metrics[*]", value_path: $.cpu, cursor_path: $.next, done_path: $.done, status_path: $.state}
    config: {method: GET, url: "UPSTREAM/poll", cursor_param: since}
  - name: poll_latest
    description: Long-poll pages, latest state.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10, max_items: 3}
    aggregation: {aggregation_mode: latest_state, items_path: "$.metrics[*]", key_path: $.host, cursor_path: $.next, done_path: $.done}
    config: {method: GET, url: "UPSTREAM/poll", cursor_param: since}
  - name: flaky
    description: A poll that fails once.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10}
    aggregation: {items_path: "$.items[*]", done_path: $.done}
    config: {method: GET, url: "UPSTREAM/flaky"}
  - name: emptypoll
    description: A poll that never has anything.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 10000, poll_interval_ms: 20, idle_timeout_ms: 1000}
    aggregation: {items_path: "$.items[*]"}
    config: {method: GET, url: "UPSTREAM/emptypoll"}
  - name: slowpoll
    description: A poll that never answers.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, upstream_timeout_ms: 200}
    config: {method: GET, url: "UPSTREAM/slowpoll"}
`

type windowFixture struct {
	h    *host.Host
	up   *streamUpstream
	logs *observer.ObservedLogs
}

func newWindowFixture(t testing.TB) *windowFixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := newStreamUpstream(t)
	yaml := strings.ReplaceAll(fmt.Sprintf(windowOps, exe), "UPSTREAM", up.URL)
	cat, err := opsfile.Parse("ops.yaml", []byte(yaml), opsfile.LoadOptions{Expand: func(s string) string {
		return strings.ReplaceAll(s, "{env.WINDOW_SECRET}", windowSecret)
	}})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	var sup *host.Supervisor
	h, err := host.New(context.Background(), host.Options{File: cat, Logger: zap.New(core), Adapter: func(name string) (*host.Supervisor, error) {
		if sup == nil {
			spec, err := host.AdapterSpecOf(cat, name, nil)
			if err != nil {
				return nil, err
			}
			sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1, Logger: zap.New(core)})
			t.Cleanup(func() { sup.Close() })
		}
		return sup, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &windowFixture{h: h, up: up, logs: logs}
}

// windowOut is a decoded window result.
type windowOut struct {
	Items   []json.RawMessage `json:"items"`
	Summary json.RawMessage   `json:"summary"`
	Stats   struct {
		Received, Counted, Returned, Polls, Retries int
		SkippedOversize                             int   `json:"skipped_oversize"`
		Bytes                                       int64 `json:"bytes"`
	} `json:"stats"`
	Truncated      bool            `json:"truncated"`
	WindowComplete bool            `json:"window_complete"`
	HasMore        bool            `json:"has_more"`
	Cursor         string          `json:"cursor"`
	EndReason      string          `json:"end_reason"`
	Status         json.RawMessage `json:"status"`
	Gaps           []string        `json:"gaps"`
	Error          string          `json:"error"`

	res    *host.Result
	chunks []string
	// upstream is the upstream cursor inside Cursor (cursorValue).
	upstream string
}

func (f *windowFixture) call(t *testing.T, tool, args string) *windowOut {
	t.Helper()
	var mu sync.Mutex
	var chunks []string
	res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool(tool), Arguments: json.RawMessage(args),
		Progress: func(_ context.Context, c host.ProgressChunk) {
			mu.Lock()
			chunks = append(chunks, c.Message)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	w := &windowOut{res: res, chunks: chunks}
	if err := json.Unmarshal(res.Structured, w); err != nil {
		t.Fatalf("%s: structured content: %v\n%s", tool, err, res.Text)
	}
	w.upstream = cursorValue(t, w.Cursor)
	return w
}

func (w *windowOut) flags() string {
	return fmt.Sprintf("end=%s truncated=%t complete=%t more=%t", w.EndReason, w.Truncated, w.WindowComplete, w.HasMore)
}

// waitClosed fails unless the upstream request of name ended promptly:
// the early cut-off closes the upstream connection.
func (f *windowFixture) waitClosed(t *testing.T, name string) {
	t.Helper()
	select {
	case <-f.up.closedCh(name):
	case <-time.After(5 * time.Second):
		t.Errorf("the %s upstream was not closed after the window ended", name)
	}
}

func TestWindowLimits(t *testing.T) {
	f := newWindowFixture(t)

	t.Run("endless stream ends with the window duration", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "endless", `{}`)
		if w.flags() != "end=window_duration truncated=false complete=true more=true" || w.res.IsError {
			t.Fatalf("flags %s: %s", w.flags(), w.res.Text)
		}
		if w.Stats.Counted < 5 || w.upstream != strconv.Itoa(w.Stats.Counted) || len(w.Items) != 3 || len(w.chunks) != w.Stats.Counted {
			t.Fatalf("counted %d cursor %q items %d chunks %d", w.Stats.Counted, w.Cursor, len(w.Items), len(w.chunks))
		}
		f.waitClosed(t, "endless")
		// The cursor continues the stream: the next window starts after it.
		next := f.call(t, "endless", `{"cursor":"`+w.Cursor+`"}`)
		var first struct{ N int }
		_ = json.Unmarshal([]byte(next.chunks[0]), &first)
		if first.N != w.Stats.Counted+1 {
			t.Fatalf("next window starts at %d, want %d (Last-Event-ID %v)", first.N, w.Stats.Counted+1, f.up.ids("endless"))
		}
	})
	t.Run("flood is cut at max_items", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "flood_items", `{}`)
		if w.flags() != "end=max_items truncated=true complete=false more=true" || len(w.Items) != 50 || w.upstream != "50" {
			t.Fatalf("flags %s items %d cursor %q", w.flags(), len(w.Items), w.Cursor)
		}
		f.waitClosed(t, "flood")
	})
	t.Run("flood is cut at max_bytes", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "flood_bytes", `{}`)
		if w.flags() != "end=max_bytes truncated=true complete=false more=true" || w.Stats.Bytes > 10000 || w.Stats.Bytes < 9000 {
			t.Fatalf("flags %s bytes %d", w.flags(), w.Stats.Bytes)
		}
		if w.upstream != strconv.Itoa(len(w.Items)) {
			t.Fatalf("cursor %q after %d items", w.Cursor, len(w.Items))
		}
	})
	t.Run("10 MB event is skipped", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "huge", `{}`)
		if w.flags() != "end=upstream_end truncated=true complete=true more=false" || len(w.Items) != 2 ||
			len(w.Gaps) != 1 || !strings.Contains(w.Gaps[0], "larger than max_event_bytes (1048576)") {
			t.Fatalf("flags %s items %s gaps %q", w.flags(), w.Items, w.Gaps)
		}
	})
	t.Run("upstream that never answers", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "mute", `{}`)
		// Nothing came, so no cursor: has_more only with a cursor that
		// continues.
		if w.flags() != "end=upstream_timeout truncated=false complete=false more=false" || w.res.IsError || len(w.Items) != 0 {
			t.Fatalf("flags %s: %s", w.flags(), w.res.Text)
		}
		f.waitClosed(t, "mute")
	})
	t.Run("stall ends with the idle timeout", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "stall", `{}`)
		if w.flags() != "end=idle_timeout truncated=false complete=false more=true" || len(w.Items) != 2 || w.upstream != "2" {
			t.Fatalf("flags %s items %d cursor %q", w.flags(), len(w.Items), w.Cursor)
		}
	})
	t.Run("stall without idle timeout ends with the window", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "stall_window", `{}`)
		if w.flags() != "end=window_duration truncated=false complete=true more=true" || len(w.Items) != 2 {
			t.Fatalf("flags %s items %d", w.flags(), len(w.Items))
		}
	})
	t.Run("dropped connection resumes with Last-Event-ID", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "drop", `{}`)
		var ns []string
		for _, it := range w.Items {
			ns = append(ns, string(it))
		}
		if w.flags() != "end=upstream_end truncated=false complete=true more=false" ||
			strings.Join(ns, ",") != `{"n":1},{"n":2},{"n":3},{"n":4},{"n":5},{"n":6}` || w.upstream != "6" {
			t.Fatalf("flags %s items %s cursor %q", w.flags(), ns, w.Cursor)
		}
		if ids := strings.Join(f.up.ids("drop"), ","); ids != ",3,6" {
			t.Fatalf("Last-Event-ID per connection: %q", ids)
		}
	})
	t.Run("upstream failure mid-window is an error with the partial window", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "broken", `{}`)
		if !w.res.IsError || w.EndReason != "upstream_error" || len(w.Items) != 2 ||
			!strings.Contains(w.res.Text, "upstream answered 500 Internal Server Error") ||
			!strings.Contains(w.res.Text, "collected 2 items before the failure") || w.Error == "" {
			t.Fatalf("isError=%v end=%s items=%d text=%s", w.res.IsError, w.EndReason, len(w.Items), w.res.Text)
		}
		// Classed as a unary call with the same answer would be.
		if o := host.OutcomeOf(w.res); o != host.OutcomeUpstreamStatus {
			t.Errorf("outcome %s, want %s", o, host.OutcomeUpstreamStatus)
		}
		// redacted_paths apply to a JSON error body too.
		if strings.Contains(w.res.Text, "ops@example.com") || !strings.Contains(w.res.Text, `"owner":"[REDACTED]"`) {
			t.Fatalf("error body not redacted: %s", w.res.Text)
		}
	})
	t.Run("long-poll follows the cursor until done", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "poll", `{}`)
		if w.flags() != "end=done truncated=false complete=true more=false" || w.Stats.Polls != 3 || w.upstream != "3" ||
			string(w.Status) != `"page 2"` {
			t.Fatalf("flags %s polls %d cursor %q status %s", w.flags(), w.Stats.Polls, w.Cursor, w.Status)
		}
		if string(w.Summary) != `{"count":6,"numeric":6,"non_numeric":0,"min":10,"max":22,"avg":16,"p50":12,"p95":22,"sum":96}` {
			t.Fatalf("summary %s", w.Summary)
		}
	})
	t.Run("long-poll cut inside a page resumes inside it", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "poll_latest", `{}`)
		if w.flags() != "end=max_items truncated=true complete=false more=true" ||
			string(w.Summary) != `{"count":3,"keys":2,"state":{"a":{"cpu":11,"host":"a"},"b":{"cpu":20,"host":"b"}}}` {
			t.Fatalf("flags %s summary %s", w.flags(), w.Summary)
		}
		next := f.call(t, "poll_latest", `{"cursor":"`+w.Cursor+`"}`)
		if string(next.Summary) != `{"count":3,"keys":2,"state":{"a":{"cpu":12,"host":"a"},"b":{"cpu":22,"host":"b"}}}` ||
			next.EndReason != "done" {
			t.Fatalf("next window: %s %s", next.flags(), next.Summary)
		}
	})
	t.Run("poll retries a retryable failure", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "flaky", `{}`)
		if w.flags() != "end=done truncated=false complete=true more=false" || w.Stats.Retries != 1 || len(w.Items) != 1 {
			t.Fatalf("flags %s retries %d: %s", w.flags(), w.Stats.Retries, w.res.Text)
		}
	})
	t.Run("poll with nothing ends with the idle timeout", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "emptypoll", `{}`)
		if w.flags() != "end=idle_timeout truncated=false complete=false more=false" || w.Stats.Polls < 2 {
			t.Fatalf("flags %s polls %d", w.flags(), w.Stats.Polls)
		}
	})
	t.Run("poll that never answers", func(t *testing.T) {
		t.Parallel()
		w := f.call(t, "slowpoll", `{}`)
		if w.flags() != "end=upstream_timeout truncated=false complete=false more=false" || w.res.IsError {
			t.Fatalf("flags %s: %s", w.flags(), w.res.Text)
		}
	})
	t.Run("bad cursor", func(t *testing.T) {
		t.Parallel()
		res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("poll"), Arguments: json.RawMessage(`{"cursor":"crank1:%%%"}`)})
		if err != nil || !res.IsError || !strings.Contains(res.Text, `invalid arguments for tool "poll": cursor: not a cursor this tool returned`) {
			t.Fatalf("%v %+v", err, res)
		}
		res, _ = f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("poll"), Arguments: json.RawMessage(`{"cursor":5}`)})
		if !res.IsError || !strings.Contains(res.Text, "cursor: must be a string, got an integer") {
			t.Fatalf("%+v", res)
		}
	})
}

// Redacted values never leave the host: not in the result, not in a
// progress chunk, not in a log line.
func TestWindowRedactionEverywhere(t *testing.T) {
	f := newWindowFixture(t)
	w := f.call(t, "secrets", `{}`)
	if w.flags() != "end=max_items truncated=true complete=false more=true" || len(w.chunks) != 3 {
		t.Fatalf("flags %s chunks %d: %s", w.flags(), len(w.chunks), w.res.Text)
	}
	var logged strings.Builder
	for _, e := range f.logs.All() {
		fmt.Fprintf(&logged, "%s %v\n", e.Message, e.ContextMap())
	}
	channels := map[string]string{
		"structuredContent": string(w.res.Structured),
		"text":              w.res.Text,
		"progress":          strings.Join(w.chunks, "\n"),
		"logs":              logged.String(),
	}
	for name, s := range channels {
		for _, secret := range []string{"@example.com", "hunter2", windowSecret} {
			if strings.Contains(s, secret) {
				t.Errorf("%q reached the %s:\n%s", secret, name, s)
			}
		}
	}
	want := `{"echo":"[REDACTED]","n":1,"user":{"email":"[REDACTED]","password":"[REDACTED]"}}`
	if w.chunks[0] != want || string(w.Items[0]) != want {
		t.Errorf("chunk %s item %s, want %s", w.chunks[0], w.Items[0], want)
	}
	if !strings.Contains(logged.String(), "window finished") {
		t.Errorf("no window log line:\n%s", logged.String())
	}
}

// A window tool publishes the cursor argument and its output schema.
func TestWindowSchemas(t *testing.T) {
	f := newWindowFixture(t)
	for _, op := range f.h.Operations() {
		if op.Name != "poll" {
			continue
		}
		if !strings.Contains(string(op.InputSchema), `"cursor":{"description"`) {
			t.Errorf("input schema: %s", op.InputSchema)
		}
		for _, p := range []string{`"items"`, `"summary"`, `"stats"`, `"truncated"`, `"window_complete"`, `"has_more"`, `"cursor"`} {
			if !strings.Contains(string(op.OutputSchema), p) {
				t.Errorf("output schema lacks %s: %s", p, op.OutputSchema)
			}
		}
		return
	}
	t.Fatal("no poll tool")
}

// An adapter that does not serve mode window is refused at load.
func TestWindowNeedsAnAdapterThatServesIt(t *testing.T) {
	_, err := newFixture(t, `
adapters:
  test: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: "1"}}
operations:
  - {name: w, description: d, adapter: test, mode: window, config: {behavior: echo}}
`)
	if err == nil || !strings.Contains(err.Error(), `operation "w": /mode: adapter "test" does not serve mode "window"`) {
		t.Fatalf("got %v", err)
	}
}
