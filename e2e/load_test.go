package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loadUpstream serves the load's operations: users, a numbered SSE feed
// that resumes after Last-Event-ID (so a reconnect continues the
// numbering), and a job endpoint that answers after ?ms=.
func loadUpstream(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s,"name":"User %s"}`, r.PathValue("id"), r.PathValue("id"))
	})
	mux.HandleFunc("GET /feed", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := n + 1; ; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d}\n\n", i, i)
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("GET /job", func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("ms") + "ms")
		select {
		case <-time.After(d):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"rows":%d}`, d.Milliseconds())
		case <-r.Context().Done():
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func loadOps(base string) string {
	return fmt.Sprintf(`
operations:
  - name: get_user
    description: Fetch a user by id.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: tail
    description: A short window over the feed.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 2000, max_items: 5}
    config: {method: GET, url: "%[1]s/feed"}
  - name: follow
    description: Follow the feed.
    adapter: rest
    mode: session
    limits: {max_items: 1000, idle_timeout_ms: 30000}
    config: {method: GET, url: "%[1]s/feed"}
  - name: export
    description: A job.
    adapter: rest
    mode: async_job
    timeout: 2m
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%[1]s/job", query: [ms]}
`, base)
}

// Kinds of load operations.
const (
	kindUnary   = "unary"
	kindWindow  = "window"
	kindSession = "session"
	kindJob     = "job"
)

var loadKinds = []string{kindUnary, kindWindow, kindSession, kindJob, kindTask}

// kindStats counts one kind of operation. An operation is one unary call,
// one window, one session family run (start, polls, stop) or one job
// (start, status until terminal, result or cancel).
type kindStats struct {
	Made, Answered, Retryable, Other, OwnerLost, Lost, Duplicated int
	latencies                                                     []time.Duration
	// firstOther is the first failure that was not retryable, with when
	// it started (an offset into the phase, to set beside its faults) and
	// how long it took.
	firstOther string
}

// loadReport is what one load phase did.
type loadReport struct {
	mu    sync.Mutex
	kinds map[string]*kindStats
	// codes counts the failed operations by failureCode.
	codes map[string]int
	// ts: a TypeScript client ran beside the go-sdk ones; faulted: a
	// fault was injected during the phase.
	ts, faulted bool
	// lastFailure is when the last failed operation ended.
	lastFailure time.Time
	start       time.Time
	elapsed     time.Duration
}

func newLoadReport() *loadReport {
	r := &loadReport{kinds: map[string]*kindStats{}, codes: map[string]int{}, start: time.Now()}
	for _, k := range reportKinds {
		r.kinds[k] = &kindStats{}
	}
	return r
}

// reportKinds are the kinds a report counts: the go-sdk clients' and the
// TypeScript client's runs.
var reportKinds = append(slices.Clone(loadKinds), kindTS)

// outcome of one operation.
type outcome struct {
	err       error // nil: answered and checked
	retryable bool
	ownerLost bool
	lost, dup int
}

func (r *loadReport) add(kind string, d time.Duration, o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.kinds[kind]
	k.Made++
	k.Lost += o.lost
	k.Duplicated += o.dup
	switch {
	case o.err == nil:
		k.Answered++
		k.latencies = append(k.latencies, d)
		return
	}
	r.codes[failureCode(o)]++
	switch {
	case o.ownerLost:
		k.OwnerLost++
	case o.retryable:
		k.Retryable++
	default:
		k.Other++
		if k.firstOther == "" {
			began := time.Since(r.start) - d
			k.firstOther = fmt.Sprintf("%v; began %s into the phase, took %s", o.err, began.Round(100*time.Millisecond), d.Round(100*time.Millisecond))
		}
	}
	if kind != kindTS { // a TypeScript run ends long after its failure
		r.lastFailure = time.Now()
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// table prints the report, one line per kind.
func (r *loadReport) table(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %-8s %6s %8s %9s %6s %9s %5s %5s %8s %8s\n", "scenario", "kind", "made", "answered", "retryable", "other", "ownerlost", "lost", "dup", "p50", "p99")
	for _, kind := range reportKinds {
		k := r.kinds[kind]
		if kind == kindTS && k.Made == 0 {
			continue // no TypeScript client here
		}
		fmt.Fprintf(&b, "%-26s %-8s %6d %8d %9d %6d %9d %5d %5d %8s %8s\n", name, kind, k.Made, k.Answered, k.Retryable, k.Other, k.OwnerLost,
			k.Lost, k.Duplicated, percentile(k.latencies, .5).Round(time.Millisecond), percentile(k.latencies, .99).Round(time.Millisecond))
	}
	return b.String()
}

// problem fails t with a message and keeps it in problems.
func problem(t *testing.T, problems *[]string, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Error(msg)
	*problems = append(*problems, msg)
}

// check fails t when an operation was lost, duplicated, or failed other
// than with a clear retryable error.
func (r *loadReport) check(t *testing.T, name string) (problems []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, kind := range reportKinds {
		k := r.kinds[kind]
		if kind == kindTS && (!r.ts || r.faulted) && k.Answered == 0 {
			// A TypeScript run takes seconds: under a fault the phase
			// may hold one run that failed retryably, checked below.
			if k.Other != 0 || k.Lost != 0 || k.Duplicated != 0 {
				problem(t, &problems, "%s %s: lost %d, duplicated %d, failed-other %d (first: %s)", name, kind, k.Lost, k.Duplicated, k.Other, k.firstOther)
			}
			continue
		}
		// Under a fault an operation may fail retryably for the whole
		// phase on a slow machine; recovered checks that service
		// comes back once the fault healed.
		if k.Made == 0 || k.Answered == 0 && !r.faulted {
			problem(t, &problems, "%s: no %s operation answered (%+v)", name, kind, *k)
		}
		if k.Lost != 0 || k.Duplicated != 0 || k.Other != 0 {
			problem(t, &problems, "%s %s: lost %d, duplicated %d, failed-other %d (first: %s)", name, kind, k.Lost, k.Duplicated, k.Other, k.firstOther)
		}
	}
	return problems
}

// recovered checks that, once a fault healed, one client gets every kind
// of operation answered: each is retried while it fails retryably, for up
// to a minute, and must not fail otherwise.
func recovered(t *testing.T, url, name string) (problems []string) {
	t.Helper()
	rep := newLoadReport()
	c := &loadClient{t: t, url: url, id: 0, rep: rep}
	defer func() {
		if c.cs != nil {
			_ = c.cs.Close()
		}
	}()
	for i, kind := range loadKinds {
		deadline := time.Now().Add(time.Minute)
		var last outcome
		for {
			if c.cs == nil {
				if err := c.connect(); err != nil {
					last = classify(err)
				}
			}
			if c.cs != nil {
				last = c.one(kind, i)
				if last.err != nil && !last.ownerLost {
					_ = c.cs.Close()
					c.cs = nil
				}
			}
			if last.err == nil || (!last.retryable && !last.ownerLost) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if last.err != nil || last.lost != 0 || last.dup != 0 {
			problem(t, &problems, "%s: after the fault healed, %s did not recover: %v (lost %d, duplicated %d)", name, kind, last.err, last.lost, last.dup)
		}
	}
	return problems
}

// loadDuration is how long each load phase runs: a few seconds, or
// CRANK_LOAD_DURATION (make loadtest).
func loadDuration(t testing.TB) time.Duration {
	return envDuration(t, "CRANK_LOAD_DURATION", 3*time.Second)
}

// envDuration is the duration the environment variable name gives, def
// when it is unset.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	if s := os.Getenv(name); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return d
	}
	return def
}

// loadWorkers is how many concurrent MCP clients a phase runs.
func loadWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("CRANK_LOAD_CLIENTS")); err == nil && n > 0 {
		return n
	}
	return 8
}

// runLoad runs workers MCP clients against url for d, each cycling
// through the kinds and checking every answer. fault, when set, runs
// concurrently (its start is the phase's start).
func runLoad(t *testing.T, url string, workers int, d time.Duration, fault func()) *loadReport {
	t.Helper()
	rep := newLoadReport()
	deadline := rep.start.Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { (&loadClient{t: t, url: url, id: w, rep: rep}).run(deadline) })
	}
	// One client of the share is the official TypeScript SDK's.
	if rep.ts = tsClientAvailable(t); rep.ts {
		wg.Go(func() { runTSLoad(url, deadline, rep) })
	}
	if fault != nil {
		rep.faulted = true
		wg.Go(fault)
	}
	wg.Wait()
	rep.elapsed = time.Since(rep.start)
	return rep
}

// loadClient is one MCP client of the load: one go-sdk session at a time,
// reconnected after a failure (the retry a real client makes).
type loadClient struct {
	t        *testing.T
	url      string
	id       int
	rep      *loadReport
	cs       *mcp.ClientSession
	progress progressLog
	calls    atomic.Int64
	// replayRefused: a resume of this client's stream was refused because
	// its events were gone (a replica died before storing them, or etcd
	// was down long enough for them to be dropped); go-sdk then ends the
	// session with "Bad Request", and the documented answer is to call
	// again.
	replayRefused atomic.Bool
}

func (c *loadClient) run(deadline time.Time) {
	defer func() {
		if c.cs != nil {
			_ = c.cs.Close()
		}
	}()
	for i := c.id; time.Now().Before(deadline); i++ {
		kind := loadKinds[i%len(loadKinds)]
		if c.cs == nil {
			if err := c.connect(); err != nil {
				c.rep.add(kind, 0, classify(err))
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		start := time.Now()
		o := c.one(kind, i)
		c.rep.add(kind, time.Since(start), o)
		if o.err != nil && !o.ownerLost {
			_ = c.cs.Close()
			c.cs = nil
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// one runs one operation of kind; i is the client's operation count.
func (c *loadClient) one(kind string, i int) outcome {
	switch kind {
	case kindUnary:
		return c.unary()
	case kindWindow:
		return c.window()
	case kindSession:
		return c.session()
	case kindJob:
		return c.job(i)
	default:
		return c.task()
	}
}

// loadTransport bounds the wait for an answer's headers: go-sdk opens a
// session's GET stream outside Connect's context, so a gateway that never
// answers would hang the test instead of failing it.
var loadTransport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	return t
}()

func (c *loadClient) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-load", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: c.progress.handler})
	hc := &http.Client{Transport: badRequestLogger{t: c.t, next: loadTransport, replayRefused: &c.replayRefused}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: hc}, sessionProtocol)
	if err != nil {
		return err
	}
	c.cs = cs
	return nil
}

// classify sorts a failure: retryable when the answer says to retry (503
// with Retry-After, a JSON-RPC error or tool error saying "retry", an
// interrupted call's answer, the
// load balancer's 502 for a replica that died mid-request, a call or job
// cut by its adapter's crash, which the next call restarts).
func classify(err error) outcome {
	s := err.Error()
	for _, r := range []string{"retry", "stopped during the call", "Bad Gateway", "502", "503", "Service Unavailable", "connection refused", "EOF",
		"connection reset", "client is closing", "request terminated without response", "session not found", "unavailable",
		"was interrupted",            // an interrupted call's answer (data.retryable), seen as text where the data is not (a TS client's initialize)
		"stopped before it finished", // a job (a task) of a replica drained for a restart: start it again
		"try again in a moment"} {    // a start refused by a replica being drained
		if strings.Contains(s, r) {
			return outcome{err: err, retryable: true}
		}
	}
	return outcome{err: err}
}

// failureCodes name a failure by what its error says, most telling first:
// the HTTP status a client saw, or the error's reason.
var failureCodes = []struct{ code, says string }{
	{"owner_lost", "owner_lost"}, {"400-replay-refused", "Bad Request"},
	{"503", "503"}, {"503", "Service Unavailable"}, {"502", "502"}, {"502", "Bad Gateway"},
	{"adapter-stopped", "stopped during the call"}, {"etcd", "etcd"},
	{"connection-refused", "connection refused"}, {"connection-reset", "connection reset"},
	{"no-response", "request terminated without response"}, {"session-not-found", "session not found"},
	{"client-closing", "client is closing"}, {"stream-broken", "broke before its first event"}, {"interrupted", "was interrupted"},
	{"eof", "EOF"}, {"unavailable", "unavailable"}, {"retry", "retry"},
}

// failureCode is the code a failed operation is counted under in a
// report: "owner_lost", an HTTP status, a reason, or "other" for a
// non-retryable failure whose error names none of them.
func failureCode(o outcome) string {
	if o.ownerLost {
		return "owner_lost"
	}
	s := o.err.Error()
	for _, c := range failureCodes {
		if strings.Contains(s, c.says) {
			return c.code
		}
	}
	if o.retryable {
		return "retryable"
	}
	return "other"
}

// codeSummary is the failures by code, most frequent first ("-" for
// none).
func (r *loadReport) codeSummary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	codes := slices.Collect(maps.Keys(r.codes))
	slices.SortFunc(codes, func(a, b string) int { return cmp.Or(r.codes[b]-r.codes[a], strings.Compare(a, b)) })
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s %d", c, r.codes[c]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// call runs one tool and returns its structured content, or a classified
// failure (a tool error is classified by its text).
func (c *loadClient) call(name string, args map[string]any, progress string) (map[string]any, *outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress != "" {
		p.SetProgressToken(progress)
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		o := classifyCall(name, err)
		if c.replayRefused.Swap(false) && strings.Contains(err.Error(), "Bad Request") {
			o.retryable = true // the events were lost: call again
		}
		return nil, &o
	}
	if res.IsError {
		o := classify(fmt.Errorf("%s: tool error: %s", name, textOf(res)))
		return nil, &o
	}
	var m map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		m = map[string]any{"text": textOf(res)}
	}
	return m, nil
}

// classifyCall sorts the failure of a call of the tool name: as classify
// does, and retryable too when its JSON-RPC error's data says so.
func classifyCall(name string, err error) outcome {
	o := classify(fmt.Errorf("%s: %w", name, err))
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && retryableData(werr.Data) {
		o.retryable = true // the answer says so (an interrupted call)
	}
	return o
}

// retryableData reports whether a JSON-RPC error's data says to call
// again (data.retryable, as the answer of an interrupted call has).
func retryableData(data []byte) bool {
	var d struct{ Retryable bool }
	return json.Unmarshal(data, &d) == nil && d.Retryable
}

func fail(format string, args ...any) outcome { return outcome{err: fmt.Errorf(format, args...)} }

func (c *loadClient) unary() outcome {
	id := rand.IntN(1000) + 1
	m, o := c.call("get_user", map[string]any{"id": id}, "")
	if o != nil {
		return *o
	}
	if m["name"] != fmt.Sprintf("User %d", id) {
		return fail("get_user %d answered %v", id, m)
	}
	return outcome{}
}

// sequence checks the feed numbers in items against last (the previous
// number seen): each must be last+1, unless the answer reported a gap.
func sequence(items []any, last *int, gaps bool) (lost, dup int) {
	for _, it := range items {
		n := -1
		if m, ok := it.(map[string]any); ok {
			if f, ok := m["n"].(float64); ok {
				n = int(f)
			}
		}
		switch {
		case n < 0:
			lost++
		case *last >= 0 && n <= *last:
			dup++
		case *last >= 0 && n != *last+1 && !gaps:
			lost += n - *last - 1
		}
		*last = max(*last, n)
	}
	return lost, dup
}

func (c *loadClient) window() outcome {
	token := fmt.Sprintf("w%d-%d", c.id, c.calls.Add(1))
	c.progress.take(0) // forget notifications of earlier windows
	m, o := c.call("tail", map[string]any{}, token)
	if o != nil {
		return *o
	}
	items, _ := m["items"].([]any)
	if len(items) != 5 || m["end_reason"] != "max_items" {
		return fail("window: %v", m)
	}
	last := -1
	lost, dup := sequence(items, &last, false)
	got := 0
	for _, p := range c.progress.take(5) {
		if p.ProgressToken == token {
			got++
		}
	}
	if got != 5 {
		return outcome{err: fmt.Errorf("window: %d progress notifications, want 5", got), lost: lost, dup: dup}
	}
	return outcome{lost: lost, dup: dup}
}

func (c *loadClient) session() outcome {
	m, o := c.call("follow_start", nil, "")
	if o != nil {
		return *o
	}
	id, _ := m["session_id"].(string)
	var cursor any
	last, seen := -1, 0
	var lost, dup int
	// A session whose replica died, or lost its owner lease (an etcd
	// member stopped under the lease's keep-alive outlives the cluster's
	// 3s owner TTL), ends failed with owner_lost once a sweep sees the
	// owner gone — the owner watch or the 10s periodic sweep, after the
	// client drops the stopped member (5s+1s) — or is resumed: polls
	// wait that long for items.
	deadline := time.Now().Add(30 * time.Second)
	for seen < 6 && time.Now().Before(deadline) {
		args := map[string]any{"session_id": id, "max_items": 4}
		if cursor != nil {
			args["cursor"] = cursor
		}
		p, o := c.call("follow_poll", args, "")
		if o != nil {
			o.lost, o.dup = lost, dup
			return *o
		}
		items, _ := p["items"].([]any)
		gaps, _ := p["gaps"].(float64)
		l, d := sequence(items, &last, gaps > 0)
		lost, dup, seen = lost+l, dup+d, seen+len(items)
		cursor = p["cursor"]
		if st := p["status"]; st == "failed" && strings.Contains(fmt.Sprint(p["error"]), "owner_lost") {
			return outcome{err: fmt.Errorf("session %s: owner_lost", id), ownerLost: true, lost: lost, dup: dup}
		} else if st == "stopped" && p["end_reason"] == "shutdown" {
			// Its replica was drained for a restart (an upgrade): the
			// answer is to start a session again.
			return outcome{err: fmt.Errorf("session %s: stopped by its replica's shutdown", id), retryable: true, lost: lost, dup: dup}
		}
		if len(items) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if seen < 6 {
		return outcome{err: fmt.Errorf("session %s: %d items in 30s", id, seen), lost: lost, dup: dup}
	}
	s, o := c.call("follow_stop", map[string]any{"session_id": id}, "")
	if o != nil {
		o.lost, o.dup = lost, dup
		return *o
	}
	if s["status"] != "stopping" && s["status"] != "stopped" {
		p, _ := c.call("follow_poll", map[string]any{"session_id": id, "cursor": cursor}, "")
		return outcome{err: fmt.Errorf("stop: %v (poll: %v)", s, p), lost: lost, dup: dup}
	}
	return outcome{lost: lost, dup: dup}
}

// job starts a job and follows it to a terminal state; every fourth one
// is long and cancelled. A terminal state must stay as it is (reached
// exactly once); a job whose replica died ends failed with owner_lost.
func (c *loadClient) job(i int) outcome {
	ms, cancelIt := 100, (i/len(loadKinds))%4 == 3
	if cancelIt {
		ms = 60000
	}
	m, o := c.call("export_start", map[string]any{"ms": ms}, "")
	if o != nil {
		return *o
	}
	id, _ := m["job_id"].(string)
	if cancelIt {
		cm, o := c.call("export_cancel", map[string]any{"job_id": id}, "")
		if o != nil {
			return *o
		}
		switch cm["status"] {
		case "canceling", "canceled":
		case "failed":
			// The job ended before the cancel reached it — its adapter or
			// replica died meanwhile; the answer says how, as a status
			// would.
			if strings.Contains(fmt.Sprint(cm["error"]), "owner_lost") {
				return outcome{err: fmt.Errorf("job %s: owner_lost", id), ownerLost: true}
			}
			return classify(fmt.Errorf("cancel %s: the job ended first: %v", id, cm))
		default:
			return fail("cancel %s: %v", id, cm)
		}
	}
	want := "succeeded"
	if cancelIt {
		want = "canceled"
	}
	deadline := time.Now().Add(30 * time.Second)
	var status map[string]any
	for {
		st, o := c.call("export_status", map[string]any{"job_id": id}, "")
		if o != nil {
			return *o
		}
		status = st
		if s := st["status"]; s != "running" && s != "canceling" && s != "queued" {
			break
		}
		if time.Now().After(deadline) {
			return fail("job %s not terminal after 30s: %v", id, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status["status"] == "failed" && strings.Contains(fmt.Sprint(status["error"]), "owner_lost") {
		return outcome{err: fmt.Errorf("job %s: owner_lost", id), ownerLost: true}
	}
	if status["status"] == "failed" && want == "succeeded" {
		// A job cut by its adapter's crash fails with an error saying
		// so; starting it again is the retry.
		return classify(fmt.Errorf("job %s ended %v, want %s", id, status, want))
	}
	if status["status"] != want {
		return fail("job %s ended %v, want %s", id, status, want)
	}
	// Terminal exactly once: a second look sees the same state.
	again, o := c.call("export_status", map[string]any{"job_id": id}, "")
	if o != nil {
		return *o
	}
	if again["status"] != want {
		return outcome{err: fmt.Errorf("job %s: %s, then %v", id, want, again["status"]), dup: 1}
	}
	if !cancelIt {
		r, o := c.call("export_result", map[string]any{"job_id": id}, "")
		if o != nil {
			return *o
		}
		if r["ready"] != true || fmt.Sprint(r["result"]) != "map[rows:100]" {
			return fail("job %s result: %v", id, r)
		}
	}
	return outcome{}
}

// badRequestLogger logs the body of a 400 answer, which go-sdk's client
// reduces to "Bad Request": the body says which check refused it.
type badRequestLogger struct {
	t             *testing.T
	next          http.RoundTripper
	replayRefused *atomic.Bool
}

func (l badRequestLogger) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		return resp, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	l.t.Logf("%s %s (session %q): 400 %s", r.Method, r.URL.Path, r.Header.Get("Mcp-Session-Id"), b)
	if r.Header.Get("Last-Event-ID") != "" && bytes.Contains(b, []byte("failed to replay events")) {
		l.replayRefused.Store(true)
	}
	return resp, nil
}
