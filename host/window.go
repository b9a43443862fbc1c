package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Cancellation causes of a window's upstream call.
var (
	errWindowElapsed   = errors.New("window duration elapsed")
	errIdle            = errors.New("idle timeout")
	errLimit           = errors.New("window limit reached")
	errUpstreamTimeout = errors.New("upstream timeout")
)

// Retries of a polled window after a retryable upstream failure.
const (
	maxPollRetries = 3
	maxPollBackoff = 5 * time.Second
)

// ProgressChunk is one chunk of a window in progress: a counted item's
// JSON (redacted, truncated) or, for aggregation_mode text, the text of
// one chunk. The caller turns chunks into MCP progress notifications.
type ProgressChunk struct {
	Message string
	// Relayed: the chunk is an upstream's own progress report of a unary
	// call (sdk.ReportProgress), sent on with its Progress and Total
	// (0: unknown) rather than counted.
	Relayed         bool
	Progress, Total float64
}

// prepareWindow returns a copy of a window operation with its cursor
// argument and its output schema; the entry is left as written.
func prepareWindow(op *opsfile.Operation) (*opsfile.Operation, error) {
	in, err := window.InputSchema(op.InputSchema, window.Continues(op.Execution))
	if err != nil {
		return nil, err
	}
	cp := *op
	if err := cp.SetInputSchema(in); err != nil {
		return nil, err
	}
	cp.OutputSchema = outputSchema(&cp, "") // outputschema.go
	cp.Description = windowDescription(cp.Description, window.Continues(op.Execution))
	return &cp, nil
}

// windowDescription says in a window tool's description whether it can
// continue a window, unless the description speaks of cursors already.
func windowDescription(desc string, continues bool) string {
	if desc == "" || strings.Contains(strings.ToLower(desc), "cursor") {
		return desc
	}
	if continues {
		return desc + "\n\nPass the cursor a window returns back as the cursor argument to continue where it ended."
	}
	return desc + "\n\nEach call is a fresh window: it cannot continue an earlier one (has_more is always false)."
}

// callWindow runs one window: it opens the upstream (a stream, or polls),
// collects until a limit or the upstream ends it, cuts the upstream off
// and returns one bounded result.
func (h *Host) callWindow(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) *Result {
	ex := op.Execution
	cursorArg, args, err := takeCursor(args)
	if err != nil {
		return classed(errorResult(fmt.Sprintf("invalid arguments for tool %q: %v", op.Name, err)), OutcomeInvalidArguments)
	}
	key, err := h.cursorKey(ctx)
	if err != nil {
		return h.storeError("cursor key", cursorKeyName, err)
	}
	from, err := openWindowCursor(key, req.WorkspaceID, op.Name, cursorArg)
	if err != nil {
		return classed(errorResult(fmt.Sprintf("invalid arguments for tool %q: cursor: %v", op.Name, err)), OutcomeInvalidArguments)
	}

	ctx, cancel := context.WithTimeout(ctx, op.Timeout+time.Second)
	defer cancel()
	// The window's clock starts once the adapter is there: time spent
	// starting (or restarting) its process is not upstream time, and
	// counting it could leave a window complete with nothing collected.
	c, err := op.sup.Client(ctx)
	if err != nil {
		return classed(errorResult(h.redact.String(fmt.Sprintf("adapter %q is not available: %v", op.Adapter, err))), OutcomeAdapterUnavailable)
	}
	start := time.Now()
	// The window ends by cancellation, not by a deadline the adapter would
	// see: the host decides when it ended and why.
	wctx, wcancel := context.WithCancelCause(ctx)
	defer wcancel(nil)
	// A caller's MaxTimeout shortens the window: it still ends complete,
	// with what it collected, in time for the caller.
	length := req.bounded(ex.Limits.Window())
	windowTimer := time.AfterFunc(length, func() { wcancel(errWindowElapsed) })
	defer windowTimer.Stop()
	deadline := start.Add(length)

	rs := h.redactorsOf(req)
	var progress func(string)
	if req.Progress != nil {
		progress = func(chunk string) { req.Progress(ctx, ProgressChunk{Message: rs.String(chunk)}) }
	}
	col := window.NewCollector(ex, window.Options{Redact: rs, From: from, Progress: progress})

	areq := adapterRequest(op, req, args, deadline)
	areq.Cursor = from.Cursor
	var end string
	var failure windowFailure
	if ex.TransportBehavior == window.RequestResponse {
		end, failure = h.pollWindow(ctx, wctx, op, c, areq, col)
	} else {
		end, failure = h.streamWindow(ctx, wctx, op, c, areq, col)
	}
	col.Finish()
	var cursor string
	if window.Continues(ex) {
		cursor = sealWindowCursor(key, req.WorkspaceID, op.Name, col.Next())
	}
	return h.windowResult(op, col, cursor, end, failure, time.Since(start))
}

// takeCursor removes the cursor argument from the arguments sent upstream.
func takeCursor(args json.RawMessage) (string, json.RawMessage, error) {
	if !strings.Contains(string(args), `"`+window.CursorArgument+`"`) {
		return "", args, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return "", nil, err
	}
	raw, ok := m[window.CursorArgument]
	if !ok {
		return "", args, nil
	}
	delete(m, window.CursorArgument)
	var c string
	if string(raw) != "null" {
		if err := json.Unmarshal(raw, &c); err != nil {
			return "", nil, errors.New("cursor: must be a string")
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	return c, rest, nil
}

// streamWindow reads the adapter's Stream until a limit, the upstream or
// the caller ends it.
func (h *Host) streamWindow(ctx, wctx context.Context, op *boundOp, c *client.Client,
	areq *sdk.Request, col *window.Collector) (string, windowFailure) {
	sctx, cancel := context.WithCancelCause(wctx)
	defer cancel(nil)
	idle := op.Execution.Limits.Idle()
	var idleTimer *time.Timer
	if idle > 0 {
		idleTimer = time.AfterFunc(idle, func() { cancel(errIdle) })
		defer idleTimer.Stop()
	}
	if op.Mode == opsfile.ModeSession || op.Mode == opsfile.ModeAsyncJob {
		// Read for long: the client carries it on the adapter's shared
		// Streams call, and the adapter still sees a window.
		areq.Operation.Mode = sdkMode(op.Mode)
	}
	st, err := c.Stream(sctx, areq)
	if err != nil {
		return h.interrupted(ctx, sctx, op, err)
	}
	for {
		ev, err := st.Recv()
		var ue *sdk.UpstreamError
		switch {
		case errors.Is(err, io.EOF):
			return window.EndUpstreamEnd, windowFailure{}
		case errors.As(err, &ue):
			return h.upstreamFailed(ctx, sctx, op, col.Redactors(), ue)
		case err != nil:
			return h.interrupted(ctx, sctx, op, err)
		}
		if idleTimer != nil {
			idleTimer.Reset(idle)
		}
		switch ev.Kind {
		case client.EventItem:
			cur := ev.Item.Cursor
			if cur == "" {
				cur = ev.Item.ID
			}
			if ev.Item.Partial != "" {
				col.Partial(ev.Item.Partial)
			}
			if col.Add(ev.Item.Data, cur) {
				// Early cut-off: cancelling the call makes the adapter
				// stop reading and close the upstream.
				cancel(errLimit)
				return col.End(), windowFailure{}
			}
		case client.EventGap:
			col.Gap(h.redact.String(ev.Reason))
		case client.EventEnd:
			col.Advance(ev.Cursor)
			return window.EndUpstreamEnd, windowFailure{}
		}
	}
}

// pollWindow polls the adapter's Invoke every poll_interval_ms, following
// the cursor, until a limit, done_path or the caller ends it.
func (h *Host) pollWindow(ctx, wctx context.Context, op *boundOp, c *client.Client,
	areq *sdk.Request, col *window.Collector) (string, windowFailure) {
	ex := op.Execution
	interval := ex.Limits.PollInterval()
	idle := ex.Limits.Idle()
	failures := 0
	lastItem := time.Now()
	for {
		areq.Cursor = col.Cursor()
		pctx, pcancel := context.WithTimeoutCause(wctx, ex.Limits.UpstreamTimeout()+time.Second, errUpstreamTimeout)
		r, err := c.Invoke(pctx, areq)
		col.Polled()
		var ue *sdk.UpstreamError
		if err != nil && !errors.As(err, &ue) {
			end, failure := h.interrupted(ctx, pctx, op, err)
			pcancel()
			return end, failure
		}
		if ue != nil {
			if end, failure := h.upstreamFailed(ctx, pctx, op, col.Redactors(), ue); end != window.EndUpstreamError || !ue.Retryable || failures >= maxPollRetries {
				pcancel()
				return end, failure
			}
			pcancel()
			failures++
			col.Retried()
			if end := waitWindow(ctx, wctx, min(interval<<failures, maxPollBackoff)); end != "" {
				return end, windowFailure{}
			}
			continue
		}
		pcancel()
		failures = 0
		doc := r.Structured
		if len(doc) == 0 {
			doc, _ = json.Marshal(r.Text)
		}
		received := col.Stats().Received
		if col.Add(doc, "") {
			return col.End(), windowFailure{}
		}
		if col.Stats().Received > received {
			lastItem = time.Now()
		} else if idle > 0 && time.Since(lastItem) >= idle {
			return window.EndIdleTimeout, windowFailure{}
		}
		if end := waitWindow(ctx, wctx, interval); end != "" {
			return end, windowFailure{}
		}
	}
}

// waitWindow waits d, or until the window or the call ends (returning why).
func waitWindow(ctx, wctx context.Context, d time.Duration) string {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ""
	case <-wctx.Done():
		if ctx.Err() != nil {
			return window.EndCancelled
		}
		return window.EndWindowDuration
	}
}

// windowFailure is why a window's upstream read failed: the text its
// result, a session's record or a job's says (redacted), and the
// outcome class of the failure, as a unary call's would be (an upstream
// that refused is upstream_status, a timeout timeout, …). The zero value
// is no failure.
type windowFailure struct{ text, class string }

func (f windowFailure) failed() bool { return f.text != "" }

// interrupted explains why an upstream call ended with a call error: a
// window limit (the host's own cancellation) or a failure, its text
// redacted.
func (h *Host) interrupted(ctx, callCtx context.Context, op *boundOp, err error) (string, windowFailure) {
	if end := hostCut(callCtx); end != "" {
		return end, windowFailure{}
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return window.EndUpstreamError, windowFailure{fmt.Sprintf("tool %q timed out after %s", op.Name, op.Timeout), OutcomeTimeout}
		}
		return window.EndCancelled, windowFailure{}
	}
	return window.EndUpstreamError, windowFailure{h.redact.String(h.describeCallError(ctx, op, err)), callErrorOutcome(ctx, op, err)}
}

// hostCut returns the end reason when the host itself cut the upstream
// call (a window limit), "" otherwise.
func hostCut(callCtx context.Context) string {
	switch cause := context.Cause(callCtx); {
	case errors.Is(cause, errWindowElapsed):
		return window.EndWindowDuration
	case errors.Is(cause, errIdle):
		return window.EndIdleTimeout
	case errors.Is(cause, errUpstreamTimeout):
		return window.EndUpstreamTimeout
	}
	return ""
}

// upstreamFailed classifies an upstream error of a window: a timeout is a
// limit (the window ends with its flags), anything else fails the call
// with a redacted failure text (it goes into a window's result, a stream
// session's stored record and a job's).
func (h *Host) upstreamFailed(ctx, callCtx context.Context, op *boundOp, rs redact.Chain, ue *sdk.UpstreamError) (string, windowFailure) {
	if end := hostCut(callCtx); end != "" {
		return end, windowFailure{}
	}
	switch ue.Kind {
	case sdk.KindTimeout:
		return window.EndUpstreamTimeout, windowFailure{}
	case sdk.KindCancelled:
		if ctx.Err() != nil {
			return window.EndCancelled, windowFailure{}
		}
	}
	// A JSON body excerpt goes through redacted_paths too.
	if body := ue.Body; body != "" && len(op.Execution.Paths.Redact) > 0 {
		redacted := *ue
		if v, err := jsonpath.Decode([]byte(body)); err == nil {
			v, _ = jsonpath.Replace(op.Execution.Paths.Redact, v, redact.Mark)
			redacted.Body = string(jsonpath.Encode(v))
		} else {
			redacted.Body = "(not shown: the excerpt is not JSON and the operation redacts paths)"
		}
		ue = &redacted
	}
	return window.EndUpstreamError, windowFailure{h.redact.String(describeUpstreamError(rs, ue)), upstreamOutcome(ue)}
}

// windowResult builds the tool result of a window, whose cursor is
// cursor (sealed).
func (h *Host) windowResult(op *boundOp, col *window.Collector, cursor, end string, failure windowFailure, took time.Duration) *Result {
	r := col.Result(cursor, end, failure.text, took)
	raw := h.redact.JSON(r.Encode())
	res := &Result{Structured: raw, Text: string(raw)}
	if text, ok := r.Text(); ok && !failure.failed() {
		res.Text = h.redact.String(text)
	}
	if failure.failed() {
		res.IsError = true
		res.Text = h.redact.String(failure.text)
		res.class = failure.class
		if r.Stats.Counted > 0 {
			res.Text += fmt.Sprintf("\n(the window had collected %d items before the failure; structuredContent holds them)", r.Stats.Counted)
		}
	}
	telemetry.Window(op.Name, r.EndReason, r.Stats.Counted, r.Stats.Bytes, r.Truncated)
	if failure.failed() && r.EndReason == window.EndCancelled {
		res.class = OutcomeCancelled
	}
	h.log.Info("window finished", zap.String("tool", op.Name), zap.String("end_reason", r.EndReason),
		zap.Int("received", r.Stats.Received), zap.Int("counted", r.Stats.Counted),
		zap.Int64("bytes", r.Stats.Bytes), zap.Duration("took", took), zap.Bool("error", res.IsError))
	return res
}
