package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

// maxPendingEvents bounds the events of one stream waiting to be written,
// so that memory stays bounded when etcd is slow or down.
const maxPendingEvents = 1024

// eventLogStore keeps the SSE event logs of MCP response streams.
type eventLogStore interface {
	AppendStreams(ctx context.Context, streams []store.StreamEvents, lim store.EventLimits) []error
	EventsAfter(ctx context.Context, session, stream string, index int64) ([][]byte, error)
	EventStream(ctx context.Context, session, stream string) (store.EventStreamInfo, error)
	DeleteEventStream(ctx context.Context, session, stream string) error
}

// eventStore is go-sdk's mcp.EventStore over the state store, so that a
// client whose SSE stream dropped resumes it with Last-Event-ID, on any
// replica that holds the session.
//
// Appends do not wait for etcd: each stream's events queue up and one
// writer stores the queues of all streams in rounds (one transaction for
// all the events that arrived meanwhile, across streams: many unary calls'
// response streams share one), so a streaming tool pays no etcd round trip
// per chunk, a unary call less than one, and a slow or unavailable etcd
// never holds up delivery. A replay first waits for the stream's queue to
// drain, so it sees every event sent before it. What a replica had not stored when it
// died is lost with the call that produced it.
//
// It numbers each stream's events itself, counting appends that failed,
// so that the index the store records always equals the SDK's event id:
// after a failed write the store drops the events before the gap rather
// than replay the wrong ones.
type eventStore struct {
	store  func() eventLogStore
	limits store.EventLimits
	logger *zap.Logger
	// standaloneOnly: POST answers are JSON (json_response), which carry
	// no event ids and cannot be resumed; only the GET stream is logged.
	standaloneOnly bool
	// ledger bounds what the logs of a session and of a client address
	// take (eventquota.go); clientOf names a session's client address
	// ("" when unknown).
	ledger   *eventLedger
	clientOf func(session string) string

	mu       sync.Mutex
	changed  *sync.Cond // on mu: the writer finished a round
	sessions map[string]*sessionLogs
	dirty    []streamRef // streams with queued events, for the writer
	writing  bool        // the writer goroutine runs
	// refusalLogged is when a quota's refusal was last logged;
	// refusalsUnlogged counts those since.
	refusalLogged    time.Time
	refusalsUnlogged int
}

// streamRef names a stream with queued events.
type streamRef struct {
	session, stream string
	sl              *sessionLogs
	pl              *pendingLog
}

// sessionLogs is what the event store keeps in memory for one session.
type sessionLogs struct {
	next    map[string]int64       // stream → next index, for streams opened here
	pending map[string]*pendingLog // stream → events not yet written
	// calls: stream → the JSON-RPC id of the call its POST carries
	// (callIDKey), from Open until the stream's first event records it.
	// Only Open has the POST's context: the SDK appends a message the
	// call's handler sends with the session connection's context, which
	// carries the id of another POST.
	calls map[string]json.RawMessage
}

// pendingLog holds a stream's events waiting for the writer.
type pendingLog struct {
	queue   []pendingEvent
	writing bool // the stream is in the writer's hands (dirty or being stored)
	// held: a POST stream before its first write ended (streamHold); its
	// events wait in queue, not yet counted or handed to the writer.
	// answered: the stream's response is among them.
	held, answered bool
	// drop: delete what the store holds of the stream once the events
	// taken before are written (an event-log quota refused it).
	drop bool
}

type pendingEvent struct {
	idx  int64 // -1: the store's next
	data []byte
	// request: the JSON-RPC id of the call the stream answers, with its
	// first event (callID); open: the event itself was refused, only the
	// stream's record is written, for its request.
	request json.RawMessage
	open    bool
}

// callIDKey is the request context key of the JSON-RPC id of the call a
// POST carries, which its stream records when it opens: a replay of the
// stream that cannot be served then fails that call, not the session.
type callIDKey struct{}

// maxRecordedCallID bounds the call id a stream records (a client picks
// it; a longer one is not recorded, and its stream's replay fails as
// before).
const maxRecordedCallID = 256

// withCallID returns r with the id of the call its body carries.
func withCallID(r *http.Request, p *peeked) *http.Request {
	if p.body == nil {
		return r
	}
	if m := p.message(); m.ok && m.method != "" && m.id != nil && len(m.id) <= maxRecordedCallID {
		return r.WithContext(context.WithValue(r.Context(), callIDKey{}, m.id))
	}
	return r
}

// interruptedAnswer is the JSON-RPC error answering the call id whose
// stream cannot be replayed.
func interruptedAnswer(id json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": jsonrpc.CodeInternalError,
		"message": "the call was interrupted and its answer cannot be replayed (the replica serving it stopped before " +
			"storing its events, or they expired); call it again",
		"data": map[string]any{"retryable": true},
	}})
	return b
}

func newEventStore(st func() eventLogStore, lim store.EventLimits, q EventQuota) *eventStore {
	es := &eventStore{store: st, limits: lim, sessions: make(map[string]*sessionLogs), ledger: newEventLedger(q, lim)}
	es.changed = sync.NewCond(&es.mu)
	return es
}

func (es *eventStore) backend() (eventLogStore, error) {
	if st := es.store(); st != nil {
		return st, nil
	}
	return nil, errors.New("crank: no state store for SSE events")
}

func (es *eventStore) sessionLocked(id string) *sessionLogs {
	sl := es.sessions[id]
	if sl == nil {
		sl = &sessionLogs{next: make(map[string]int64), pending: make(map[string]*pendingLog), calls: make(map[string]json.RawMessage)}
		es.sessions[id] = sl
	}
	return sl
}

// Open implements mcp.EventStore: a stream starts at event 0. Nothing is
// written until its first event. The POST stream of a request that
// carries a streamHold (ctx) is held until its first write ends.
func (es *eventStore) Open(ctx context.Context, sessionID, streamID string) error {
	if es.standaloneOnly && streamID != "" {
		return nil // a JSON answer's stream: Append keeps nothing of it either
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	sl := es.sessionLocked(sessionID)
	sl.next[streamID] = 0
	if id, ok := ctx.Value(callIDKey{}).(json.RawMessage); ok && streamID != "" {
		sl.calls[streamID] = id
	}
	if h, ok := ctx.Value(streamHoldKey{}).(*streamHold); ok && streamID != "" && !es.standaloneOnly && h.stream == "" {
		h.session, h.stream = sessionID, streamID
		sl.pending[streamID] = &pendingLog{held: true}
	}
	return nil
}

// claimLocked returns the index of the stream's next event (-1 when this
// process did not open the stream: the store picks the next one) and
// whether the event is a response. A POST stream ends with its response,
// so its counter goes with it.
func (sl *sessionLogs) claimLocked(streamID string, data []byte) (int64, bool) {
	response := streamID != "" && isResponse(data)
	idx, ok := sl.next[streamID]
	if !ok {
		return -1, response
	}
	if response {
		delete(sl.next, streamID)
	} else {
		sl.next[streamID] = idx + 1
	}
	return idx, response
}

// isResponse reports whether an encoded JSON-RPC message is a response
// (it has no method).
func isResponse(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	var m struct {
		Method *string `json:"method"`
	}
	return json.Unmarshal(data, &m) == nil && m.Method == nil
}

// Append implements mcp.EventStore: it queues the event for the stream's
// writer.
func (es *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	if es.standaloneOnly && streamID != "" {
		return nil // go-sdk appends a JSON answer's messages too
	}
	// The client address before es.mu: clientOf takes the replica's
	// session lock, which a restore holds while the SDK opens a stream
	// here (Open takes es.mu).
	client := ""
	if es.clientOf != nil {
		client = es.clientOf(sessionID)
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	sl := es.sessionLocked(sessionID)
	idx, response := sl.claimLocked(streamID, data)
	var request json.RawMessage
	if idx == 0 && streamID != "" {
		request = sl.calls[streamID]
		delete(sl.calls, streamID)
	}
	if pl := sl.pending[streamID]; pl != nil && pl.held {
		pl.queue = append(pl.queue, pendingEvent{idx: idx, data: data, request: request})
		pl.answered = pl.answered || response
		return nil
	}
	es.queueLocked(sessionID, streamID, client, sl, pendingEvent{idx: idx, data: data, request: request})
	return nil
}

// queueLocked counts an event against the event-log quotas and queues it
// for the writer.
func (es *eventStore) queueLocked(sessionID, streamID, client string, sl *sessionLogs, ev pendingEvent) {
	idx, data, request := ev.idx, ev.data, ev.request
	ok, drop, refusal := es.ledger.admit(sessionID, streamID, client, len(data))
	if refusal != "" {
		es.logRefusalLocked(sessionID, refusal)
	}
	if !ok && !drop && request == nil {
		return // the index still counts it: the store sees the gap
	}
	pl := sl.pending[streamID]
	if pl == nil {
		pl = &pendingLog{}
		sl.pending[streamID] = pl
	}
	if !ok && !drop {
		// Refused, the stream's first event: its record is written all
		// the same, for its request.
		pl.queue = append(pl.queue, pendingEvent{idx: 0, request: request, open: true})
		es.dirtyLocked(sessionID, streamID, sl, pl)
		return
	}
	if drop {
		pl.queue, pl.drop = nil, true
		es.dirtyLocked(sessionID, streamID, sl, pl)
		return
	}
	if len(pl.queue) >= maxPendingEvents {
		// etcd is far behind (or down): delivery does not wait for it. The
		// oldest half goes; the index gap makes the store drop what came
		// before, so a resume across it fails instead of skipping events.
		pl.queue = slices.Delete(pl.queue, 0, len(pl.queue)/2)
		if es.logger != nil {
			es.logger.Warn("SSE events dropped before reaching etcd: resuming this stream from before them will fail",
				sessionField(sessionID), zap.Int("dropped", maxPendingEvents/2))
		}
	}
	pl.queue = append(pl.queue, pendingEvent{idx: idx, data: data, request: request})
	es.dirtyLocked(sessionID, streamID, sl, pl)
}

// refusalLogEvery spaces the log lines of streams an event-log quota
// refused, which a client can cause at will.
const refusalLogEvery = 10 * time.Second

// logRefusalLocked logs a stream an event-log quota refused, at most once
// per refusalLogEvery (counting the others).
func (es *eventStore) logRefusalLocked(sessionID, refusal string) {
	now := time.Now()
	if es.logger == nil || now.Sub(es.refusalLogged) < refusalLogEvery {
		es.refusalsUnlogged++
		return
	}
	// The events reach the client; only a resume from them fails.
	es.logger.Info("SSE events of a stream not stored: an event-log quota is full; resuming this stream will fail",
		sessionField(sessionID), zap.String("reason", refusal),
		zap.Int("refused_since_last_line", es.refusalsUnlogged))
	es.refusalLogged, es.refusalsUnlogged = now, 0
}

// dirtyLocked hands a stream with work to the writer.
func (es *eventStore) dirtyLocked(sessionID, streamID string, sl *sessionLogs, pl *pendingLog) {
	if pl.writing {
		return
	}
	pl.writing = true
	es.dirty = append(es.dirty, streamRef{session: sessionID, stream: streamID, sl: sl, pl: pl})
	if !es.writing {
		es.writing = true
		go es.write()
	}
}

// writeLinger is how long the writer waits for more events before each
// round: a unary call's priming event and response, and the streams of
// other calls that end meanwhile, then share one transaction. Only
// durability waits, not delivery.
const writeLinger = 2 * time.Millisecond

// write stores the queued events of every stream, in rounds, until no
// stream has any. One writer serves all streams, so that the events of
// many calls go to etcd together.
func (es *eventStore) write() {
	for {
		time.Sleep(writeLinger)
		es.mu.Lock()
		refs := es.dirty
		es.dirty = nil
		if len(refs) == 0 {
			es.writing = false
			es.mu.Unlock()
			return
		}
		batches := make([][]pendingEvent, len(refs))
		drops := make([]bool, len(refs))
		for i, r := range refs {
			batches[i], r.pl.queue = r.pl.queue, nil
			drops[i], r.pl.drop = r.pl.drop, false
		}
		es.mu.Unlock()
		es.storeBatches(refs, batches)
		es.dropStreams(refs, drops)
		es.mu.Lock()
		for _, r := range refs {
			if len(r.pl.queue) > 0 || r.pl.drop {
				es.dirty = append(es.dirty, r) // still the writer's
				continue
			}
			r.pl.writing = false
			if r.sl.pending[r.stream] == r.pl {
				delete(r.sl.pending, r.stream)
			}
		}
		es.changed.Broadcast()
		es.mu.Unlock()
	}
}

// storeBatches writes the streams' batches together, one run of
// consecutive indices at a time.
func (es *eventStore) storeBatches(refs []streamRef, batches [][]pendingEvent) {
	st, err := es.backend()
	if err != nil {
		for _, r := range refs {
			es.notStored(r.session, err)
		}
		return
	}
	var runs []store.StreamEvents
	var owner []int // runs[i] belongs to refs[owner[i]]
	for k, batch := range batches {
		for i := 0; i < len(batch); {
			j := i + 1
			for j < len(batch) && !batch[i].open && !batch[j].open && (batch[i].idx < 0) == (batch[j].idx < 0) &&
				(batch[i].idx < 0 || batch[j].idx == batch[i].idx+int64(j-i)) {
				j++
			}
			var data [][]byte
			if !batch[i].open {
				data = make([][]byte, 0, j-i)
				for _, ev := range batch[i:j] {
					data = append(data, ev.data)
				}
			}
			runs = append(runs, store.StreamEvents{Session: refs[k].session, Stream: refs[k].stream, First: batch[i].idx, Data: data,
				Request: batch[i].request})
			owner = append(owner, k)
			i = j
		}
	}
	failed := make([]error, len(refs)) // a stream's first failure
	for i, err := range st.AppendStreams(context.Background(), runs, es.limits) {
		if err != nil && failed[owner[i]] == nil {
			failed[owner[i]] = err
		}
	}
	for k, err := range failed {
		if err != nil {
			es.notStored(refs[k].session, err)
		}
	}
}

// dropStreams deletes the stored logs of the streams an event-log quota
// refused once partly stored (after their earlier events were written).
func (es *eventStore) dropStreams(refs []streamRef, drops []bool) {
	for i, r := range refs {
		if !drops[i] {
			continue
		}
		st, err := es.backend()
		if err == nil {
			err = st.DeleteEventStream(context.Background(), r.session, r.stream)
		}
		if err != nil {
			es.notStored(r.session, err)
		}
	}
}

// notStored logs events that reached the client but not the store.
func (es *eventStore) notStored(sessionID string, err error) {
	if es.logger != nil {
		// The events were delivered; only a resumption across them fails.
		es.logger.Warn("SSE events not stored: a client resuming this stream gets an error instead",
			sessionField(sessionID), zap.Error(err))
	}
}

// flushLocked waits until the given streams of sl have no queued or
// in-flight events.
func (es *eventStore) flushLocked(sl *sessionLogs, streams ...string) {
	for {
		busy := false
		for _, id := range streams {
			if pl := sl.pending[id]; pl != nil && pl.busy() {
				busy = true
			}
		}
		if !busy {
			return
		}
		es.changed.Wait()
	}
}

// busyLocked reports whether any of the session's streams has events
// queued or being written (a nil sl: none).
func (sl *sessionLogs) busyLocked() bool {
	if sl == nil {
		return false
	}
	for _, pl := range sl.pending {
		if pl.busy() {
			return true
		}
	}
	return false
}

// busy reports whether the stream has events queued for the writer or
// being written (a held stream's wait for its first write).
func (pl *pendingLog) busy() bool { return pl.writing || len(pl.queue) > 0 && !pl.held }

// awaitStored waits, for at most limit, until what the session's streams
// have queued is stored (or failed to be).
func (es *eventStore) awaitStored(session string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	wake := time.AfterFunc(limit, func() {
		es.mu.Lock()
		es.changed.Broadcast()
		es.mu.Unlock()
	})
	defer wake.Stop()
	es.mu.Lock()
	defer es.mu.Unlock()
	for time.Now().Before(deadline) && es.sessions[session].busyLocked() {
		es.changed.Wait()
	}
}

// After implements mcp.EventStore. It waits for the stream's queued
// events to be stored first. Events the store no longer holds are reported
// as mcp.ErrEventsPurged. A POST stream another replica serves, whose
// stored events the client has all, is held open for its next ones
// (awaitEvents): a call whose replica died, or that stays unanswered, is
// answered with a retryable error instead.
func (es *eventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		es.mu.Lock()
		servedHere := false
		if sl := es.sessions[sessionID]; sl != nil {
			es.flushLocked(sl, streamID)
			_, servedHere = sl.next[streamID]
		}
		es.mu.Unlock()
		st, err := es.backend()
		if err != nil {
			yield(nil, err)
			return
		}
		evs, err := replayRead(ctx, st, sessionID, streamID, int64(index))
		if err == nil && len(evs) == 0 && streamID != "" && index >= 0 && !servedHere {
			evs, err = awaitEvents(ctx, st, sessionID, streamID, int64(index))
		}
		if errors.Is(err, store.ErrEventsPurged) && streamID != "" {
			// The call's answer is lost: answer the call with an error, so
			// the client's session goes on (a failed replay is a 400, on
			// which a client such as go-sdk's ends the session).
			if info, rerr := st.EventStream(ctx, sessionID, streamID); rerr == nil && info.Request != nil {
				yield(interruptedAnswer(info.Request), nil)
				return
			}
		}
		if errors.Is(err, store.ErrEventsPurged) {
			err = fmt.Errorf("%w: %w", mcp.ErrEventsPurged, err)
		}
		if err != nil {
			yield(nil, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// A resume on one replica of a POST stream another serves, from its last
// stored event, waits for the call's next events: ended at once, the
// client would resume again and again (the TypeScript SDK's does, without
// end) while the call runs. It is held for up to answerHold, polling the
// store every answerPoll; if the serving replica is gone (its owner lease
// expired: it died) or the stream was not written for unansweredLimit,
// nothing will answer the call, and the resume answers it with the
// retryable "interrupted" error. A call that runs longer than
// unansweredLimit without a word, resumed on another replica, is thus
// failed for the client to make again.
const (
	answerHold      = 10 * time.Second
	answerPoll      = 250 * time.Millisecond
	unansweredLimit = 20 * time.Second
)

// errUnanswered: the call a stream answers will get no answer (its
// replica is gone or it stalled); the resume answers it as interrupted.
var errUnanswered = fmt.Errorf("%w: the replica serving the stream is gone or its call stalled", store.ErrEventsPurged)

// awaitEvents waits, for at most answerHold, for events after index of a
// stream another replica serves, and returns them (none: the client
// resumes again), or errUnanswered when none will come.
func awaitEvents(ctx context.Context, st eventLogStore, session, stream string, index int64) ([][]byte, error) {
	deadline := time.Now().Add(answerHold)
	for {
		info, err := st.EventStream(ctx, session, stream)
		switch {
		case err != nil || info.Request == nil:
			// The store did not answer (the client resumes again), or the
			// stream answers no call it recorded: nothing to wait for.
			return nil, nil
		case info.Next != uint64(index+1):
			// It moved on (or was opened again elsewhere): replay that.
			evs, err := st.EventsAfter(ctx, session, stream, index)
			if err != nil && !errors.Is(err, store.ErrEventsPurged) {
				return nil, nil
			}
			return evs, err
		case info.Orphaned || info.Idle > unansweredLimit:
			return nil, errUnanswered
		}
		if time.Now().Add(answerPoll).After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(answerPoll):
		}
	}
}

// replayWait bounds how long a replay retries a read the store failed
// retryably (a member that hangs, an election): go-sdk answers a failed
// replay with 400, which ends the client's MCP session, so a replay rides
// out a short etcd outage instead. unstoredWait bounds how long it waits
// for a stream the store has no record of yet: a client that resumes on
// another replica at once may be faster than the writer of the replica
// serving the stream (it stores every few milliseconds, slower under
// load); a stream that expired or died unstored is refused after it.
const (
	replayWait   = 10 * time.Second
	unstoredWait = 3 * time.Second
)

// replayRead reads a stream's events after index, retrying retryable
// store failures for up to replayWait and an unknown stream for up to
// unstoredWait.
func replayRead(ctx context.Context, st eventLogStore, session, stream string, index int64) ([][]byte, error) {
	start := time.Now()
	delay := 100 * time.Millisecond
	for {
		evs, err := st.EventsAfter(ctx, session, stream, index)
		var wait time.Duration
		switch {
		case err == nil:
			return evs, nil
		case store.Retryable(err):
			wait = replayWait
		case errors.Is(err, store.ErrStreamNotStored):
			wait = unstoredWait
		}
		if time.Since(start)+delay > wait {
			return evs, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// SessionClosed implements mcp.EventStore: the session's in-memory state
// goes (queued events are still written). The logs stay until their TTL:
// a session closed here (idle timeout, shutdown) may live on at another
// replica, whose clients may still resume its streams.
func (es *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	es.mu.Lock()
	defer es.mu.Unlock()
	delete(es.sessions, sessionID) // running writers keep their own reference
	return nil
}

// Interface guard.
var _ mcp.EventStore = (*eventStore)(nil)
