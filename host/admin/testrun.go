package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
)

// Test run bounds.
const (
	maxTestPolls     = 100
	maxTestTimeout   = 5 * time.Minute
	defTestTimeout   = 30 * time.Second
	maxTestChunks    = 1000
	defPollInterval  = 500 * time.Millisecond
	maxPollInterval  = 30 * time.Second
	testRunAgentBase = "admin-test:"
)

// TestRequest is the body of POST /crank/catalogs/{name}/test.
type TestRequest struct {
	// Operation names a saved operation of the catalog; Entry is a draft
	// entry (it replaces the saved one of its name for this run). One of
	// them is required.
	Operation string          `json:"operation,omitempty"`
	Entry     json.RawMessage `json:"entry,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Polls is how many times a session is polled (default 3);
	// PollIntervalMS the pause between polls and job status reads.
	Polls          int   `json:"polls,omitempty"`
	PollIntervalMS int64 `json:"poll_interval_ms,omitempty"`
	// TimeoutMS bounds the whole run (default 30 s, at most 5 min): a job
	// still running then is cancelled.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// TestStep is one tool call of a test run.
type TestStep struct {
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Text       string          `json:"text,omitempty"`
	IsError    bool            `json:"is_error"`
	DurationMS int64           `json:"duration_ms"`
}

// TestResult is what a test run answers: what a client would get.
type TestResult struct {
	Operation string `json:"operation"`
	Mode      string `json:"mode"`
	Tool      string `json:"tool"`
	// Result is the final structuredContent (a window's, a session's last
	// poll, a job's result); Text its text block.
	Result         json.RawMessage `json:"result,omitempty"`
	Text           string          `json:"text,omitempty"`
	IsError        bool            `json:"is_error"`
	Truncated      *bool           `json:"truncated,omitempty"`
	WindowComplete *bool           `json:"window_complete,omitempty"`
	HasMore        *bool           `json:"has_more,omitempty"`
	Status         string          `json:"status,omitempty"`
	EndReason      string          `json:"end_reason,omitempty"`
	Progress       []string        `json:"progress"`
	Steps          []TestStep      `json:"steps"`
	DurationMS     int64           `json:"duration_ms"`
	Warnings       []string        `json:"warnings"`
	// Saved says whether the operation tested is the saved one (false:
	// a draft; nothing is published either way).
	Saved bool `json:"saved"`
}

// testRun runs a saved or draft operation without publishing it, on a
// host built for the run alone, and answers what a client would get. A
// session is started, polled and stopped; a job is started and followed
// until it ends or the time limit, then cancelled if still running: the
// run leaves nothing open.
func testRun(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	name := args[0]
	if e := catalogName(name); e != nil {
		return e
	}
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var req TestRequest
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not a test request: " + err.Error(),
			Problems: opsfile.Problems{{Message: err.Error()}}}
	}
	if req.Polls == 0 {
		req.Polls = 3
	}
	var probs opsfile.Problems
	if req.Polls < 1 || req.Polls > maxTestPolls {
		probs = append(probs, opsfile.Problem{Pointer: "/polls", Message: fmt.Sprintf("must be from 1 to %d", maxTestPolls)})
	}
	interval := defPollInterval
	if req.PollIntervalMS != 0 {
		interval = time.Duration(req.PollIntervalMS) * time.Millisecond
	}
	if interval <= 0 || interval > maxPollInterval {
		probs = append(probs, opsfile.Problem{Pointer: "/poll_interval_ms", Message: fmt.Sprintf("must be from 1 to %d", maxPollInterval.Milliseconds())})
	}
	timeout := defTestTimeout
	if req.TimeoutMS != 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	if timeout <= 0 || timeout > maxTestTimeout {
		probs = append(probs, opsfile.Problem{Pointer: "/timeout_ms", Message: fmt.Sprintf("must be from 1 to %d", maxTestTimeout.Milliseconds())})
	}
	if len(req.Arguments) > 0 {
		var m map[string]any
		if json.Unmarshal(req.Arguments, &m) != nil || m == nil {
			probs = append(probs, opsfile.Problem{Pointer: "/arguments", Message: "must be a JSON object"})
		} else if msg := host.DuplicateMember(req.Arguments); msg != "" {
			probs = append(probs, opsfile.Problem{Pointer: "/arguments", Message: msg})
		}
	}
	if (req.Operation == "") == (len(req.Entry) == 0) {
		probs = append(probs, opsfile.Problem{Pointer: "/operation", Message: "name a saved operation, or send a draft in entry (one of the two)"})
	}
	if len(probs) > 0 {
		return &Error{Status: http.StatusBadRequest, Problems: probs, Message: "the test request is not valid"}
	}
	_, doc, _, e := g.current(r.Context(), name)
	if e != nil {
		return e
	}
	op, saved := req.Operation, true
	place := catalog.InFile
	if len(req.Entry) > 0 {
		entry, ps := catalog.ParseEntry(req.Entry)
		if ps != nil {
			for i := range ps {
				ps[i].Pointer, ps[i].Line = "/entry"+ps[i].Pointer, 0
			}
			return &Error{Status: http.StatusBadRequest, Problems: ps, Message: "the draft entry is not valid"}
		}
		op, saved = entryNameOf(entry), false
		doc = doc.With(entry)
		idx := doc.Index(op)
		place = func(i int) (string, bool) { return "/entry", i == idx }
	} else if doc.Index(op) < 0 {
		return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("operation %s not found in catalog %s", op, name),
			Problems: opsfile.Problems{{Pointer: "/operation", Message: "no saved operation of this name"}}}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ep := g.serving(name)
	if ep == nil {
		return errorf(http.StatusConflict, "no crank handler of this replica serves catalog %s: a test run runs on a replica whose handler serves it (its catalog_allow decides what the entries reach)", name)
	}
	workspace := ep.Info().Workspace
	h, err := ep.Build(ctx, doc, true)
	if err != nil {
		return &Error{Status: http.StatusUnprocessableEntity, Problems: catalog.ProblemsOf(err, "catalog "+name, doc, place),
			Message: fmt.Sprintf("catalog %s: the operation does not load; nothing was run", name)}
	}
	who, _ := caller(r)
	run := &testRunner{h: h, ctx: ctx, base: host.CallRequest{WorkspaceID: workspace, AgentID: testRunAgentBase + who,
		RequestID: "admin-test"}, polls: req.Polls, interval: interval}
	var stream *testStream
	if queryBool(r, "stream") {
		stream = newTestStream(w)
		run.emit = stream.send
	}
	res := run.run(op, req.Arguments)
	res.Saved = saved
	g.audit(r, "catalog.test", name, nil, zap.String("operation", op), zap.String("workspace", workspace),
		zap.Bool("saved", saved), zap.Bool("is_error", res.IsError), zap.Int64("duration_ms", res.DurationMS))
	if stream != nil {
		stream.finish(res)
		return nil
	}
	return writeJSON(w, http.StatusOK, res)
}

// testStream writes a streamed test run (?stream=true) as NDJSON, one
// event a line, flushed as it happens:
//
//	{"progress": "<chunk>"}              a window's progress chunk or a session's item
//	{"step": {…TestStep…}}               a tool call done
//	{"result": {…TestResult…}}           the last line
type testStream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	done bool
}

func newTestStream(w http.ResponseWriter) *testStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &testStream{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// send writes one event; after finish it drops them (a late progress
// notification of a call already answered).
func (s *testStream) send(ev map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	_, _ = s.w.Write(append(b, '\n'))
	_ = s.rc.Flush()
}

func (s *testStream) finish(res *TestResult) {
	s.send(map[string]any{"result": res})
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// serving is the first endpoint of this replica that serves the catalog,
// nil when none does: a test run builds its host with the endpoint's
// files, adapters, store, quotas, workspace and catalog_allow.
func (g *Gateway) serving(name string) Endpoint {
	for _, ep := range g.Endpoints {
		if ep.Info().Catalog == name {
			return ep
		}
	}
	return nil
}

type testRunner struct {
	h        *host.Host
	ctx      context.Context
	base     host.CallRequest
	polls    int
	interval time.Duration

	// emit, when set, receives each event as it happens (a streamed
	// run).
	emit func(map[string]any)

	mu       sync.Mutex
	progress []string
	res      TestResult
}

// chunk records a progress chunk or session item.
func (t *testRunner) chunk(s string) {
	t.mu.Lock()
	keep := len(t.progress) < maxTestChunks
	if keep {
		t.progress = append(t.progress, s)
	}
	t.mu.Unlock()
	if keep && t.emit != nil {
		t.emit(map[string]any{"progress": s})
	}
}

func (t *testRunner) run(op string, args json.RawMessage) *TestResult {
	start := time.Now()
	t.res = TestResult{Operation: op, Progress: []string{}, Steps: []TestStep{}, Warnings: []string{}}
	o, ok := t.h.File().Lookup(op)
	if !ok {
		t.warn("operation %s is not in the catalog the handler serves", op)
		return &t.res
	}
	t.res.Mode = string(o.Mode)
	switch {
	case o.Family != nil && o.Family.Job != nil:
		t.job(familyNames(o), args)
	case o.Family != nil:
		t.session(familyNames(o), args)
	default:
		t.res.Tool = op
		t.final(t.call(op, args, true))
	}
	return t.done(start)
}

// done completes the run's answer: its duration and chunks.
func (t *testRunner) done(start time.Time) *TestResult {
	t.res.DurationMS = time.Since(start).Milliseconds()
	t.mu.Lock()
	t.res.Progress = append(t.res.Progress, t.progress...)
	t.mu.Unlock()
	return &t.res
}

// one runs a single tool call (an operator's call of a served tool) and
// answers it with its flags.
func (t *testRunner) one(tool string, args json.RawMessage) *TestResult {
	start := time.Now()
	t.res = TestResult{Operation: tool, Tool: tool, Progress: []string{}, Steps: []TestStep{}, Warnings: []string{}}
	if o := t.h.Tool(tool).Base(); o != nil {
		t.res.Operation, t.res.Mode = o.Name, string(o.Mode)
	}
	t.final(t.call(tool, args, true))
	return t.done(start)
}

// familyNames are the tool names of a session or job family: as the
// family block renames them, else {operation}_{role}.
func familyNames(o *opsfile.Operation) map[string]string {
	out := map[string]string{}
	for _, role := range o.Family.Roles() {
		out[role] = o.Family.Names[role]
		if out[role] == "" {
			out[role] = o.Name + "_" + role
		}
	}
	return out
}

func (t *testRunner) warn(format string, args ...any) {
	t.res.Warnings = append(t.res.Warnings, fmt.Sprintf(format, args...))
}

// call runs one tool call as a client would and records it.
func (t *testRunner) call(tool string, args json.RawMessage, progress bool) *TestStep {
	req := t.base
	req.Tool, req.Arguments = t.h.Tool(tool), args
	if progress {
		req.Progress = func(_ context.Context, c host.ProgressChunk) { t.chunk(c.Message) }
	}
	start := time.Now()
	step := TestStep{Tool: tool, Arguments: args}
	res, err := t.h.Call(t.ctx, req)
	step.DurationMS = time.Since(start).Milliseconds()
	switch {
	case err != nil:
		step.IsError, step.Text = true, err.Error()
	default:
		step.Result, step.Text, step.IsError = res.Structured, res.Text, res.IsError
	}
	t.res.Steps = append(t.res.Steps, step)
	if t.emit != nil {
		t.emit(map[string]any{"step": step})
	}
	return &t.res.Steps[len(t.res.Steps)-1]
}

// final makes step the run's answer and reads its flags.
func (t *testRunner) final(step *TestStep) {
	t.res.Result, t.res.Text, t.res.IsError = step.Result, step.Text, step.IsError
	var f struct {
		Truncated      *bool           `json:"truncated"`
		WindowComplete *bool           `json:"window_complete"`
		HasMore        *bool           `json:"has_more"`
		Status         json.RawMessage `json:"status"`
		EndReason      string          `json:"end_reason"`
		Error          any             `json:"error"`
		Stats          struct {
			FieldsTruncated int   `json:"fields_truncated"`
			SkippedOversize int   `json:"skipped_oversize"`
			DurationMS      int64 `json:"duration_ms"`
			Redacted        int   `json:"redacted"`
		} `json:"stats"`
	}
	if len(step.Result) > 0 {
		_ = json.Unmarshal(step.Result, &f)
	}
	t.res.Truncated, t.res.WindowComplete, t.res.HasMore, t.res.EndReason = f.Truncated, f.WindowComplete, f.HasMore, f.EndReason
	var s string
	if json.Unmarshal(f.Status, &s) == nil {
		t.res.Status = s
	} else if len(f.Status) > 0 {
		t.res.Status = string(f.Status)
	}
	took := time.Duration(f.Stats.DurationMS) * time.Millisecond
	switch f.EndReason {
	case "max_items", "max_bytes":
		t.warn("window cut by %s after %s", f.EndReason, took)
	case "upstream_timeout":
		t.warn("upstream timed out after %s", took)
	case "idle_timeout":
		t.warn("no item within the idle timeout (after %s)", took)
	case "upstream_error":
		t.warn("the upstream failed after %s", took)
	case "window_duration":
		t.warn("window ended by its duration (%s)", took)
	}
	if f.Stats.FieldsTruncated > 0 {
		t.warn("fields truncated: %d", f.Stats.FieldsTruncated)
	}
	if f.Stats.SkippedOversize > 0 {
		t.warn("items skipped as oversized: %d", f.Stats.SkippedOversize)
	}
	if f.Stats.Redacted > 0 {
		t.warn("secrets redacted: %d", f.Stats.Redacted)
	}
	if step.IsError {
		t.warn("the call failed: %s", step.Text)
	}
}

func idArgs(key, id string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{key: id})
	return b
}

func field(raw json.RawMessage, key string) string {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	s, _ := m[key].(string)
	return s
}

// cleanup is a context for a run's last calls, which must happen even
// when the run's time is up.
func (t *testRunner) cleanup() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(t.ctx), 10*time.Second)
}

func (t *testRunner) pause() bool {
	select {
	case <-t.ctx.Done():
		return false
	case <-time.After(t.interval):
		return true
	}
}

func (t *testRunner) session(names map[string]string, args json.RawMessage) {
	t.res.Tool = names[opsfile.RoleStart]
	start := t.call(names[opsfile.RoleStart], args, false)
	id := field(start.Result, "session_id")
	if start.IsError || id == "" {
		t.final(start)
		return
	}
	defer func() {
		ctx, cancel := t.cleanup()
		defer cancel()
		saved := t.ctx
		t.ctx = ctx
		stop := t.call(names[opsfile.RoleStop], idArgs("session_id", id), false)
		t.ctx = saved
		if stop.IsError {
			t.warn("stopping session %s: %s", id, stop.Text)
		}
	}()
	cursor := ""
	var last *TestStep
	for i := 0; i < t.polls; i++ {
		if i > 0 && !t.pause() {
			t.warn("time limit reached after %d polls", i)
			break
		}
		pa := map[string]string{"session_id": id}
		if cursor != "" {
			pa["cursor"] = cursor
		}
		b, _ := json.Marshal(pa)
		last = t.call(names[opsfile.RolePoll], b, false)
		var p struct {
			Items  []json.RawMessage `json:"items"`
			Cursor string            `json:"cursor"`
			Status string            `json:"status"`
		}
		_ = json.Unmarshal(last.Result, &p)
		for _, it := range p.Items {
			t.chunk(string(it))
		}
		if p.Cursor != "" {
			cursor = p.Cursor
		}
		if last.IsError || (p.Status != "" && p.Status != "active") {
			break
		}
	}
	if last != nil {
		t.final(last)
	}
}

func (t *testRunner) job(names map[string]string, args json.RawMessage) {
	t.res.Tool = names[opsfile.RoleStart]
	start := t.call(names[opsfile.RoleStart], args, false)
	id := field(start.Result, "job_id")
	if start.IsError || id == "" {
		t.final(start)
		return
	}
	done := false
	for !done {
		if !t.pause() {
			break
		}
		st := t.call(names[opsfile.RoleStatus], idArgs("job_id", id), false)
		switch field(st.Result, "status") {
		case "succeeded", "failed", "canceled":
			done = true
		}
		if t.ctx.Err() != nil {
			break // the time limit passed during the status call: cancelled below
		}
		if st.IsError {
			done = true
		}
	}
	if !done {
		t.warn("the job did not finish within the time limit; it was cancelled")
		ctx, cancel := t.cleanup()
		defer cancel()
		t.ctx = ctx
		c := t.call(names[opsfile.RoleCancel], idArgs("job_id", id), false)
		t.final(c)
		return
	}
	t.final(t.call(names[opsfile.RoleResult], idArgs("job_id", id), false))
}
