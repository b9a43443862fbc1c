package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// StreamSessionStore keeps the stream sessions of session operations: what
// their start, poll and stop tools and their runners read and write.
type StreamSessionStore interface {
	CreateStreamSession(ctx context.Context, ns store.NewStreamSession) (*store.StreamSession, error)
	GetStreamSession(ctx context.Context, scope store.Scope, id string) (*store.StreamSession, error)
	PollStreamSession(ctx context.Context, scope store.Scope, id string, req store.PollRequest) (*store.PollResult, error)
	CloseStreamSession(ctx context.Context, scope store.Scope, id, reason string) (*store.StreamSession, error)
	// The runner's side, on the replica that owns the session.
	AppendStreamSessionItems(ctx context.Context, id string, a store.Append) (int, error)
	FinishStreamSession(ctx context.Context, id string, end store.StreamSessionEnd) (*store.StreamSession, error)
}

// Causes that end a stream session's reader.
var (
	errStopRequested        = errors.New("stop requested")
	errStreamSessionExpired = errors.New("session expired")
	errLifetime             = errors.New("max_session_lifetime reached")
	errStoreFailed          = errors.New("the state store failed")
)

// Stream session reader tuning: items are handed to the store in batches; the
// items pending between the upstream reader and the store writes are what
// a slow poller lets accumulate before the upstream read blocks
// (backpressure). 64 still fill most of a batch while a store write is
// under way.
const (
	streamSessionQueue      = 64
	streamSessionBatchItems = 100
	streamSessionBatchBytes = 256 << 10
	bufferFullRetry         = 250 * time.Millisecond
	// streamSessionLinger is how long the writer lets a small batch grow
	// after a write. Every write changes the session's record, and a poll
	// (a read-modify-write of that record, on any replica) that a write
	// overtakes must start again: written back to back, a busy feed's
	// writes would starve the polls. Lingering also makes fewer, larger
	// etcd transactions.
	streamSessionLinger = 50 * time.Millisecond
	storeCallTimeout    = 10 * time.Second
)

// startStreamSession creates a session owned by this replica and starts its
// reader in the background; the call returns at once.
func (h *Host) startStreamSession(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) (*Result, string) {
	l := op.Execution.Limits
	run, refusal := h.runners.enter(h.endpoint)
	if refusal != "" {
		return errorResult(refusal), ""
	}
	slot, refusal := h.quotas.Replica.take(false)
	if refusal != "" {
		run.leave()
		return classed(errorResult(refusal), OutcomeQuota), ""
	}
	slot = joinRelease(slot, run.leave)
	ss, err := h.store.CreateStreamSession(ctx, store.NewStreamSession{
		Scope: req.scope(), AgentScoped: op.Family.AgentScoped, OperationID: op.Name, Protocol: op.Adapter,
		Mode:        string(opsfile.ModeSession),
		IdleTimeout: l.Idle(), MaxLifetime: l.Lifetime(),
		MaxItems: l.MaxItems, MaxBytes: l.MaxBytes, Owned: true,
		Quota: store.Quota{PerWorkspace: h.quotas.StreamSessionsPerWorkspace, PerAgent: h.quotas.StreamSessionsPerAgent,
			PerClient: h.quotas.StreamSessionsPerClient},
		ClientID: req.ClientID,
	})
	if err != nil {
		slot()
		return h.storeError("session", "", err), ""
	}
	// Stop requests from any replica cancel the reader; subscribed before
	// the client learns the session's ID.
	rctx, cancel := context.WithCancelCause(context.Background())
	run.bind(cancel)
	unsubscribe, err := hubFor(h.store).subscribe(false, ss.ID, func() { cancel(errStopRequested) })
	if err != nil {
		cancel(nil)
		slot()
		h.finishStreamSession(ss.ID, store.StreamSessionFailed, failureJSON("store_unavailable", err.Error()), streamSessionState{})
		return h.storeError("session", ss.ID, err), ss.ID
	}
	release := func() { unsubscribe(); slot() }
	rreq := req
	rreq.Progress, rreq.Log = nil, nil
	go h.runStreamSession(rctx, cancel, release, ss, op, rreq, args)
	return structured(map[string]any{
		"session_id": ss.ID, "status": ss.Status, "expires_at": ss.ExpiresAt,
		"idle_timeout_ms": l.IdleTimeoutMS, "max_session_lifetime_ms": l.MaxSessionLifetimeMS,
		"poll_tool": op.Family.Names[opsfile.RolePoll], "stop_tool": op.Family.Names[opsfile.RoleStop],
	}), ss.ID
}

// streamSessionState is a session's state_json: how its reader is doing.
type streamSessionState struct {
	Gaps       int      `json:"gaps,omitempty"`
	GapReasons []string `json:"gap_reasons,omitempty"`
	// Partial counts the items the upstream delivered incomplete.
	Partial   int    `json:"partial,omitempty"`
	Received  int    `json:"received,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
}

// runStreamSession reads the upstream into the session's buffer until the
// upstream ends, a stop is requested (on any replica), the session idles
// out or reaches its lifetime. It is not tied to the MCP request that
// started it: a client disconnect does not stop it.
func (h *Host) runStreamSession(ctx context.Context, cancel context.CancelCauseFunc, release func(),
	ss *store.StreamSession, op *boundOp, req CallRequest, args json.RawMessage) {
	defer release()
	defer cancel(nil)
	telemetry.StreamSessionRunning(op.Name, 1)
	defer telemetry.StreamSessionRunning(op.Name, -1)
	// A panic fails the session instead of ending the process.
	defer func() {
		if v := recover(); v != nil {
			p := h.recovered("session", ss.ID, v)
			cancel(p)
			h.finishStreamSession(ss.ID, store.StreamSessionFailed, failureJSON("internal_error", p.msg), streamSessionState{EndReason: "internal_error"})
		}
	}()
	// The reader stops a little before the lifetime ends, so the session
	// is still there to record why it ended (the store drops it at the
	// end of its lifetime). The end is a cancellation, not a deadline: an
	// adapter that saw a deadline would end first and report it as its
	// own timeout, a failure.
	lifeEnd := ss.CreatedAt.Add(ss.MaxLifetime - min(time.Second, ss.MaxLifetime/4))
	lifeTimer := time.AfterFunc(time.Until(lifeEnd), func() { cancel(errLifetime) })
	defer lifeTimer.Stop()
	log := h.log.With(zap.String("session", ss.ID), zap.String("operation", op.Name))

	// Idle expiry: looked at when the session would expire (polls move
	// that on); a timer, not a goroutine, while it lives. The look also
	// catches a stop whose signal was missed.
	var expiry atomic.Pointer[time.Timer]
	var check func()
	arm := func(d time.Duration) { expiry.Store(time.AfterFunc(max(d, 10*time.Millisecond), check)) }
	check = func() {
		defer func() {
			if v := recover(); v != nil {
				cancel(h.recovered("session", ss.ID, v))
			}
		}()
		if ctx.Err() != nil {
			return
		}
		cur, err := h.store.GetStreamSession(ctx, req.scope(), ss.ID)
		switch {
		case errors.Is(err, store.ErrNotFound) || err == nil && cur.Expired(time.Now()):
			cancel(errStreamSessionExpired)
		case err != nil:
			arm(time.Second)
		case cur.Status != store.StreamSessionActive:
			cancel(errStopRequested)
		default:
			arm(time.Until(cur.ExpiresAt))
		}
	}
	arm(time.Until(ss.ExpiresAt))
	defer func() {
		if t := expiry.Load(); t != nil {
			t.Stop()
		}
	}()

	// The reader: the window engine, its items sent to the writer.
	ex := *op.Execution
	ex.Limits.IdleTimeoutMS = 0 // a session's idle timeout is about polls, not the upstream
	rdef := *op.Operation
	rdef.Execution = &ex
	rop := *op
	rop.Operation = &rdef
	w := &streamSessionWriter{h: h, ctx: ctx, cancel: cancel, id: ss.ID, space: make(chan struct{}, 1), idle: make(chan struct{}, 1)}
	rs := h.redactorsOf(req)
	col := window.NewCollector(&ex, window.Options{Redact: rs,
		Sink:  func(raw []byte) bool { return w.add(rs.JSON(raw)) },
		OnGap: func() { w.gaps.Add(1) }, OnPartial: func() { w.partial.Add(1) }})

	end, failure := h.readAcrossAdapterRestarts(ctx, &rop, req, args, lifeEnd, col)
	w.wait()

	reasons, gaps := col.Gaps()
	state := streamSessionState{Gaps: gaps, GapReasons: reasons, Received: col.Stats().Received, Partial: col.Stats().Partial}
	status := store.StreamSessionCompleted
	var errJSON json.RawMessage
	var panicked *runnerPanic
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStreamSessionExpired):
		telemetry.StreamSessionEnded(op.Name, "expired")
		return // gone already: nothing to finish
	case errors.As(cause, &panicked):
		status, end = store.StreamSessionFailed, "internal_error"
		errJSON = failureJSON("internal_error", panicked.msg)
	case errors.Is(cause, errStopRequested):
		status, end = store.StreamSessionStopped, "stopped"
	case errors.Is(cause, errShutdown):
		status, end = store.StreamSessionStopped, "shutdown"
	case errors.Is(cause, errEndpointRemoved):
		status, end = store.StreamSessionStopped, "endpoint_removed"
		errJSON = failureJSON("endpoint_removed", endpointRemovedMessage)
	case errors.Is(cause, errStoreFailed):
		status, end = store.StreamSessionFailed, "store_failed"
		errJSON = failureJSON("store_failed", "the session's items could not be stored")
	case errors.Is(cause, errLifetime):
		status, end = store.StreamSessionStopped, "max_session_lifetime"
	case failure.failed():
		status, errJSON = store.StreamSessionFailed, failureJSON("upstream_error", failure.text)
	}
	state.EndReason = end
	h.finishStreamSession(ss.ID, status, errJSON, state)
	telemetry.StreamSessionEnded(op.Name, string(status))
	log.Debug("session ended", zap.String("status", string(status)), zap.String("end_reason", end), zap.String("outcome", failure.class))
}

// Adapter restarts a session's reader rides out: when the adapter process
// running the session's upstream stream dies, the reader reopens it on the
// restarted adapter from the last cursor (for SSE, Last-Event-ID) after a
// backoff, and the session records a gap.
const (
	sessionAdapterRestarts = 5
	sessionAdapterBackoff  = 200 * time.Millisecond
)

// readAcrossAdapterRestarts is readUpstream, resumed from the session's
// cursor when the adapter process was lost (it exited or was restarted
// meanwhile) rather than the upstream failing.
func (h *Host) readAcrossAdapterRestarts(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage, deadline time.Time, col *window.Collector) (string, windowFailure) {
	for attempt := 0; ; attempt++ {
		starts := op.sup.Starts()
		end, failure := h.readUpstream(ctx, op, req, args, deadline, col)
		// The stream may end before the supervisor sees the process
		// exit: describeCallError names a lost connection as such.
		lost := end == window.EndUpstreamError && ctx.Err() == nil &&
			(op.sup.Exited() || op.sup.Starts() != starts || strings.Contains(failure.text, adapterStoppedDuringCall))
		if !lost || attempt == sessionAdapterRestarts {
			return end, failure
		}
		h.log.Warn("session reader lost its adapter; resuming from its cursor", zap.String("adapter", op.Adapter),
			zap.String("tool", op.Name), zap.String("cursor", col.Cursor()))
		col.Gap("the adapter process stopped; the stream was reopened from the last cursor")
		select {
		case <-time.After(sessionAdapterBackoff << attempt):
		case <-ctx.Done():
			return window.EndCancelled, windowFailure{}
		}
	}
}

// readUpstream runs the operation's upstream reader — its stream, or
// polls — feeding col until ctx ends or the upstream does.
func (h *Host) readUpstream(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage, deadline time.Time, col *window.Collector) (string, windowFailure) {
	c, err := op.sup.Client(ctx)
	if err != nil {
		return window.EndUpstreamError, windowFailure{h.redact.String(fmt.Sprintf("adapter %q is not available: %v", op.Adapter, err)), OutcomeAdapterUnavailable}
	}
	areq := adapterRequest(op, req, args, deadline)
	if col.Cursor() != "" {
		areq.Cursor = col.Cursor() // resuming after the adapter was lost
	}
	if op.Execution.TransportBehavior == window.RequestResponse {
		return h.pollWindow(ctx, ctx, op, c, areq, col)
	}
	return h.streamWindow(ctx, ctx, op, c, areq, col)
}

// streamSessionWriter hands a session's items to the store in batches. A
// goroutine writes only while items are pending, so a quiet session costs
// no goroutine for it. A full buffer waits for a poll to make room;
// meanwhile items pile up to streamSessionQueue and the reader blocks, which
// slows the upstream read instead of growing memory.
type streamSessionWriter struct {
	h       *Host
	ctx     context.Context
	cancel  context.CancelCauseFunc
	id      string
	gaps    atomic.Int64  // gaps so far, told to the store with the items
	partial atomic.Int64  // partial items so far, told alike
	space   chan struct{} // a write took items (capacity 1)
	idle    chan struct{} // the write goroutine ended (capacity 1)

	mu       sync.Mutex
	pending  [][]byte
	writing  bool
	reported [2]int64 // gaps and partial items the store knows of
	taken    uint64   // items the store took, the next write's Append.First
}

// add queues one item, waiting while streamSessionQueue items are pending; it
// returns false once the session is ending.
func (w *streamSessionWriter) add(item []byte) bool {
	for {
		w.mu.Lock()
		if len(w.pending) < streamSessionQueue {
			w.pending = append(w.pending, item)
			if !w.writing {
				w.writing = true
				go w.write()
			}
			w.mu.Unlock()
			return true
		}
		w.mu.Unlock()
		select {
		case <-w.space:
		case <-w.ctx.Done():
			return false
		}
	}
}

// write stores pending items until none are left, then ends. A panic
// fails the session (the reader sees the cancellation).
func (w *streamSessionWriter) write() {
	defer func() {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			w.mu.Lock()
			w.writing = false
			w.mu.Unlock()
			w.cancel(w.h.recovered("session", w.id, v))
		}
	}()
	for {
		w.mu.Lock()
		if len(w.pending) == 0 || w.ctx.Err() != nil {
			w.writing = false
			w.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(w.pending) && n < streamSessionBatchItems && size < streamSessionBatchBytes {
			size += len(w.pending[n])
			n++
		}
		batch := w.pending[:n:n]
		w.mu.Unlock()

		var st json.RawMessage
		if n := [2]int64{w.gaps.Load(), w.partial.Load()}; n != w.reported {
			w.reported = n
			st, _ = json.Marshal(streamSessionState{Gaps: int(n[0]), Partial: int(n[1])})
		}
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(w.ctx), storeCallTimeout)
		took, err := w.h.store.AppendStreamSessionItems(wctx, w.id, store.Append{Items: batch, State: st, Sequenced: true, First: w.taken})
		wcancel()
		w.taken += uint64(took)
		if err != nil && st != nil {
			w.reported = [2]int64{-1, -1} // tell the counts again with the retry
		}
		if took > 0 {
			w.mu.Lock()
			w.pending = w.pending[took:]
			w.mu.Unlock()
			select {
			case w.space <- struct{}{}:
			default:
			}
		}
		switch {
		case err == nil:
			w.linger()
		case errors.Is(err, store.ErrBufferFull), store.Retryable(err):
			// A full buffer drains as the client polls; an unavailable
			// etcd or polls winning every race on the record pass. The
			// append is sequenced, so its retry stores each item once.
			select {
			case <-time.After(bufferFullRetry):
			case <-w.ctx.Done():
			}
		default:
			if w.ctx.Err() == nil {
				w.h.log.Warn("session items not stored", zap.String("session", w.id), zap.Error(err))
				w.cancel(errStoreFailed)
			}
		}
	}
}

// linger waits streamSessionLinger after a write unless a quarter batch
// is pending already, or the session ends.
func (w *streamSessionWriter) linger() {
	w.mu.Lock()
	n := len(w.pending)
	w.mu.Unlock()
	if n >= streamSessionQueue/4 {
		return
	}
	select {
	case <-time.After(streamSessionLinger):
	case <-w.ctx.Done():
	}
}

// wait returns once the pending items are stored, or the session ends.
func (w *streamSessionWriter) wait() {
	for {
		w.mu.Lock()
		writing := w.writing
		w.mu.Unlock()
		if !writing {
			return
		}
		select {
		case <-w.idle:
		case <-w.ctx.Done():
			return
		}
	}
}

// finishStreamSession records a session's end, its error and state
// redacted; a session that is gone or already final is left alone.
func (h *Host) finishStreamSession(id string, status store.StreamSessionStatus, errJSON json.RawMessage, st streamSessionState) {
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	state, _ := json.Marshal(st)
	_, err := h.store.FinishStreamSession(ctx, id, store.StreamSessionEnd{Status: status,
		Error: h.redact.JSON(errJSON), State: h.redact.JSON(state)})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrIllegalTransition) {
		h.log.Warn("session end not recorded", zap.String("session", id), zap.Error(err))
	}
}

func failureJSON(code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"code": code, "message": msg})
	return b
}

// pollStreamSession returns the items after the cursor. Its cursors are
// sealed (cursor.go), bound to the session: a cursor no poll of the
// session returned is refused before anything is acknowledged.
func (h *Host) pollStreamSession(ctx context.Context, op *boundOp, req CallRequest, a familyArgs) *Result {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return h.storeError("cursor key", cursorKeyName, err)
	}
	bind := []string{a.SessionID}
	var seq string
	if a.Cursor != "" {
		var ok bool
		if seq, ok = openCursor(key, pollCursor, bind, a.Cursor); !ok {
			return classed(errorResult(fmt.Sprintf("invalid arguments for tool %q: cursor: not a cursor a poll of session %q returned "+
				"(pass the cursor of the previous poll unchanged, or leave it out)", req.Tool.Name(), a.SessionID)), OutcomeInvalidArguments)
		}
	}
	// The operation is checked before the poll acknowledges anything: a
	// session of another operation is not found.
	res, err := h.store.PollStreamSession(ctx, req.scope(), a.SessionID,
		store.PollRequest{Cursor: seq, MaxItems: a.MaxItems, OperationID: op.Name})
	if err != nil {
		return h.storeError("session", a.SessionID, err)
	}
	telemetry.StreamSessionPolled(op.Name, res.StreamSession.BufferedItems, res.StreamSession.MaxItems)
	items := make([]json.RawMessage, len(res.Items))
	for i, it := range res.Items {
		items[i] = it.Data
	}
	out := map[string]any{
		"session_id": a.SessionID, "status": res.StreamSession.Status, "items": items,
		"cursor": sealCursor(key, pollCursor, bind, res.Cursor), "has_more": res.HasMore, "expires_at": res.StreamSession.ExpiresAt,
	}
	var st streamSessionState
	if json.Unmarshal(res.StreamSession.State, &st) == nil {
		if st.Gaps > 0 {
			out["gaps"] = st.Gaps
		}
		if st.Partial > 0 {
			out["partial"] = st.Partial
		}
		if st.EndReason != "" {
			out["end_reason"] = st.EndReason
		}
	}
	if len(res.StreamSession.Error) > 0 {
		out["error"] = res.StreamSession.Error
	}
	return structured(out)
}

// stopStreamSession asks the session's reader, on whichever replica runs it, to
// stop.
func (h *Host) stopStreamSession(ctx context.Context, op *boundOp, req CallRequest, id string) *Result {
	cur, err := h.store.GetStreamSession(ctx, req.scope(), id)
	if err == nil && cur.OperationID != op.Name {
		err = store.ErrNotFound
	}
	if err != nil {
		return h.storeError("session", id, err)
	}
	ss, err := h.store.CloseStreamSession(ctx, req.scope(), id, "stopped by the client")
	if errors.Is(err, store.ErrIllegalTransition) {
		// Already completed or failed: stopping is moot, not an error.
		return structured(map[string]any{"session_id": id, "status": cur.Status, "buffered_items": cur.BufferedItems})
	}
	if err != nil {
		return h.storeError("session", id, err)
	}
	return structured(map[string]any{"session_id": id, "status": ss.Status, "buffered_items": ss.BufferedItems})
}
