package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StreamSessionStatus is the status of a stream session.
//
//	active ──▶ stopping ──▶ stopped | completed | failed
//	   └──────────────────▶ stopped | completed | failed
//
// active: open, items are read and polled. stopping: a stop was requested
// while a runner owns the session; the runner winds the upstream down and
// finishes it. stopped, completed and failed are terminal: stopped on
// request, completed when the upstream ended, failed on an upstream error
// or when the owning replica was lost. Items still buffered in a terminal
// session can be polled until it expires (its retention).
type StreamSessionStatus string

// Stream session statuses.
const (
	StreamSessionActive    StreamSessionStatus = "active"
	StreamSessionStopping  StreamSessionStatus = "stopping"
	StreamSessionStopped   StreamSessionStatus = "stopped"
	StreamSessionCompleted StreamSessionStatus = "completed"
	StreamSessionFailed    StreamSessionStatus = "failed"
)

var streamSessionTransitions = map[StreamSessionStatus][]StreamSessionStatus{
	StreamSessionActive:   {StreamSessionStopping, StreamSessionStopped, StreamSessionCompleted, StreamSessionFailed},
	StreamSessionStopping: {StreamSessionStopped, StreamSessionCompleted, StreamSessionFailed},
}

// Terminal reports whether s is a final status.
func (s StreamSessionStatus) Terminal() bool {
	return s == StreamSessionStopped || s == StreamSessionCompleted || s == StreamSessionFailed
}

// CanBecome reports whether the status machine allows s → t.
func (s StreamSessionStatus) CanBecome(t StreamSessionStatus) bool {
	return slices.Contains(streamSessionTransitions[s], t)
}

// Stream session defaults and bounds.
const (
	// DefaultStreamSessionRetention is how long a closed session stays readable
	// (status and remaining items) when NewStreamSession.Retention is zero.
	DefaultStreamSessionRetention = time.Minute
	// DefaultStreamSessionMaxItems and DefaultStreamSessionMaxBytes bound the item
	// buffer when NewStreamSession leaves them zero.
	DefaultStreamSessionMaxItems = 1000
	DefaultStreamSessionMaxBytes = 1 << 20
	// MaxStreamSessionItems and MaxStreamSessionBytes are the largest buffers
	// the store accepts for one session.
	MaxStreamSessionItems = 100_000
	MaxStreamSessionBytes = 64 << 20
	// maxItemsPerTxn keeps an append within etcd's default limit of 128
	// operations per transaction (the session record is one more).
	maxItemsPerTxn = 100
	// maxLabelLen bounds workspace, agent, operation, protocol and mode
	// names.
	maxLabelLen = 512
)

// Scope is who asks: a session or job is visible only to its workspace,
// and — when it is agent-scoped — only to its agent. A session or job
// outside the caller's scope is reported exactly like a missing one
// (ErrNotFound).
type Scope struct {
	WorkspaceID string
	AgentID     string
}

// StreamSession is a stream session: a long-lived upstream read
// step by step through start/poll/stop tools.
//
// A session is used in one of two ways. Request/response upstreams keep no
// reader: every poll reads the upstream from Cursor and AdvanceStreamSession
// moves Cursor (and State) forward. Streaming upstreams have a runner on the
// replica that owns the session: it appends items to the session's bounded
// buffer (AppendStreamSessionItems) and PollStreamSession hands them out;
// Cursor is then the sequence number of the last acknowledged item.
type StreamSession struct {
	ID          string
	WorkspaceID string
	AgentID     string
	// AgentScoped: only AgentID (within WorkspaceID) may see the session.
	AgentScoped bool
	OperationID string
	Protocol    string // upstream protocol, e.g. "rest", "grpc"
	Mode        string // execution mode, e.g. "session"
	Status      StreamSessionStatus
	Cursor      string
	State       json.RawMessage // state_json: the runtime's resume state
	Error       json.RawMessage // error_json of a failed session
	// ExpiresAt: the session is gone from this instant on (idle timeout
	// after the last poll, capped by the max lifetime; for a closed session
	// its retention). Reads treat it as absent from then on; etcd deletes
	// it shortly after (lease buckets, see the package documentation).
	ExpiresAt  time.Time
	LastPollAt time.Time // zero until the first poll
	CreatedAt  time.Time
	ClosedAt   time.Time // zero until terminal

	IdleTimeout time.Duration
	MaxLifetime time.Duration
	Retention   time.Duration

	// Owner is the owner ID of the replica whose runner reads the upstream
	// ("" when none). StopReason and StopRequestedAt record a stop request.
	Owner           string
	StopReason      string
	StopRequestedAt time.Time

	// The item buffer: at most MaxItems items and MaxBytes bytes are
	// buffered (appended, not yet acknowledged by a poll). Items are
	// numbered from 1; LastSeq is the last appended, AckedSeq the last
	// acknowledged.
	MaxItems      int
	MaxBytes      int64
	LastSeq       uint64
	AckedSeq      uint64
	BufferedItems int
	BufferedBytes int64

	// Revision is the etcd mod revision of the record as read.
	Revision int64
}

// Expired reports whether the session has expired at now.
func (s *StreamSession) Expired(now time.Time) bool { return !now.Before(s.ExpiresAt) }

// NewStreamSession describes a session to create.
type NewStreamSession struct {
	Scope       Scope
	AgentScoped bool
	OperationID string
	Protocol    string
	Mode        string
	Cursor      string
	State       json.RawMessage
	// IdleTimeout: the session expires this long after its last poll (or
	// its creation). Required.
	IdleTimeout time.Duration
	// MaxLifetime: the session expires this long after its creation, polls
	// or not. Required.
	MaxLifetime time.Duration
	// Retention: a closed session stays readable this long;
	// DefaultStreamSessionRetention when zero.
	Retention time.Duration
	// MaxItems and MaxBytes bound the item buffer; defaults when zero.
	MaxItems int
	MaxBytes int64
	// Owned: this Etcd's replica runs the session's upstream reader and
	// becomes its owner (registering as an owner if needed).
	Owned bool
	// Quota, when set, refuses the session (a *QuotaError) when its
	// workspace, agent or client already has that many open sessions.
	Quota Quota
	// ClientID is the client that starts it ("" for none), whose
	// Quota.PerClient counts it.
	ClientID string
}

// Advance moves a request/response session forward after a poll.
type Advance struct {
	// From must equal the session's current cursor, otherwise another poll
	// advanced it first and the advance fails with ErrConflict.
	From string
	// To is the new cursor.
	To string
	// State replaces state_json when non-nil.
	State json.RawMessage
	// Done: the upstream has no more data; the session becomes completed.
	Done bool
}

// PollRequest reads buffered items.
type PollRequest struct {
	// Cursor is the cursor the previous poll returned: it acknowledges (and
	// deletes) every item up to it, and the poll returns the items after
	// it. Polling again with the same cursor returns the same items, so a
	// retried poll is idempotent. "" polls from the acknowledged position.
	Cursor string
	// MaxItems and MaxBytes bound this poll's items (at least one item is
	// returned when any is buffered); the session's limits when zero.
	MaxItems int
	MaxBytes int64
	// OperationID, when set, must be the session's operation: a session of
	// another operation is ErrNotFound, and nothing is acknowledged.
	OperationID string
}

// Item is one buffered item.
type Item struct {
	Seq  uint64
	Data []byte
}

// PollResult is what a poll returns.
type PollResult struct {
	StreamSession *StreamSession // the session after the poll
	Items         []Item
	// Cursor acknowledges Items when passed to the next poll.
	Cursor string
	// HasMore: more items are buffered than this poll returned.
	HasMore bool
}

// Append is a runner's batch of items.
type Append struct {
	Items [][]byte
	// Sequenced makes the append exactly-once across retries: First is
	// the runner's index of Items[0] among all the items it appended to
	// this session (0 for its first), and items the session holds already
	// (a retry after a write whose outcome was unknown, e.g. etcd lost its
	// leader as it committed) are counted as taken, not stored again. A
	// First beyond what the session took fails with ErrInvalid.
	Sequenced bool
	First     uint64
	// State replaces state_json when non-nil, together with the last
	// item (e.g. the upstream position to resume from).
	State json.RawMessage
}

// StreamSessionEnd finishes a session.
type StreamSessionEnd struct {
	Status StreamSessionStatus // stopped, completed or failed
	Error  json.RawMessage
	State  json.RawMessage // replaces state_json when non-nil
}

// streamSessionRecord is the stored JSON form of a StreamSession.
type streamSessionRecord struct {
	owned[StreamSessionStatus]
	Protocol        string          `json:"protocol,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	Cursor          string          `json:"cursor,omitempty"`
	State           json.RawMessage `json:"state_json,omitempty"`
	LastPollAt      time.Time       `json:"last_poll_at,omitzero"`
	ClosedAt        time.Time       `json:"closed_at,omitzero"`
	IdleMS          int64           `json:"idle_timeout_ms"`
	LifetimeMS      int64           `json:"max_lifetime_ms"`
	StopReason      string          `json:"stop_reason,omitempty"`
	StopRequestedAt time.Time       `json:"stop_requested_at,omitzero"`
	MaxItems        int             `json:"max_items"`
	MaxBytes        int64           `json:"max_bytes"`
	LastSeq         uint64          `json:"last_seq,omitempty"`
	AckedSeq        uint64          `json:"acked_seq,omitempty"`
	BufferedItems   int             `json:"buffered_items,omitempty"`
	BufferedBytes   int64           `json:"buffered_bytes,omitempty"`
	// Taken counts the items sequenced appends stored (Append.First).
	Taken uint64 `json:"taken,omitempty"`
}

var streamSessionKind = &ownedKind[StreamSessionStatus, *streamSessionRecord, *StreamSession]{
	name: "stream session", label: "session", prefix: StreamSessionIDPrefix, dir: streamSessionsDir, index: "sessions",
	statuses: []StreamSessionStatus{StreamSessionActive, StreamSessionStopping, StreamSessionStopped, StreamSessionCompleted, StreamSessionFailed},
	running:  StreamSessionActive, stopVerb: "stop", stopping: StreamSessionStopping, stopped: StreamSessionStopped,
	// A stopping orphan's stop has happened: nothing reads the upstream
	// any more.
	failed: StreamSessionFailed, lostStopping: StreamSessionStopped,
	new: func() *streamSessionRecord { return new(streamSessionRecord) },
}

func itemsPrefix(id string) string       { return itemsDir + id + "/" }
func itemKey(id string, n uint64) string { return fmt.Sprintf("%s%020d", itemsPrefix(id), n) }

func (r *streamSessionRecord) shared() *owned[StreamSessionStatus] { return &r.owned }

func (r *streamSessionRecord) idle() time.Duration     { return msDur(r.IdleMS) }
func (r *streamSessionRecord) lifetime() time.Duration { return msDur(r.LifetimeMS) }

// expiry computes when the session expires: for an open session the idle
// timeout after the last poll (or creation), capped by the max lifetime;
// for a closed one its retention after closing.
func (r *streamSessionRecord) expiry() time.Time {
	if r.Status.Terminal() {
		return r.ClosedAt.Add(r.retention())
	}
	last := r.CreatedAt
	if r.LastPollAt.After(last) {
		last = r.LastPollAt
	}
	idle := last.Add(r.idle())
	end := r.CreatedAt.Add(r.lifetime() + lifetimeCloseGrace)
	if end.Before(idle) {
		return end
	}
	return idle
}

// lifetimeCloseGrace is how long an open session stays readable past its
// max lifetime: its reader closes it at that instant, and until the close
// is stored (a moment later, longer on a loaded replica) a poll sees it
// as it was rather than not at all. Polls keep no session longer.
const lifetimeCloseGrace = 2 * time.Second

// hardDeadline is the latest the session can possibly exist: closed at the
// end of its lifetime (at the latest its grace later), then retained.
func (r *streamSessionRecord) hardDeadline() time.Time {
	return r.CreatedAt.Add(r.lifetime() + lifetimeCloseGrace + r.retention())
}

// corrupt: negative bounds or durations, an acknowledged cursor past the
// last item.
func (r *streamSessionRecord) corrupt() string {
	switch {
	case r.IdleMS < 0 || r.LifetimeMS < 0 || r.RetentionMS < 0:
		return "negative idle_timeout_ms, max_lifetime_ms or retention_ms"
	case r.MaxItems < 0 || r.MaxBytes < 0 || r.BufferedItems < 0 || r.BufferedBytes < 0:
		return "negative buffer bounds or counts"
	case r.AckedSeq > r.LastSeq:
		return fmt.Sprintf("acked_seq %d is past last_seq %d", r.AckedSeq, r.LastSeq)
	}
	return ""
}

func (r *streamSessionRecord) sizes() string {
	return fmt.Sprintf("state_json %d, error_json %d", len(r.State), len(r.Error))
}

func (r *streamSessionRecord) public(rev int64) *StreamSession {
	return &StreamSession{
		ID: r.ID, WorkspaceID: r.WorkspaceID, AgentID: r.AgentID, AgentScoped: r.AgentScoped,
		OperationID: r.OperationID, Protocol: r.Protocol, Mode: r.Mode, Status: r.Status,
		Cursor: r.Cursor, State: r.State, Error: r.Error,
		ExpiresAt: r.ExpiresAt, LastPollAt: r.LastPollAt, CreatedAt: r.CreatedAt, ClosedAt: r.ClosedAt,
		IdleTimeout: r.idle(), MaxLifetime: r.lifetime(), Retention: r.retention(),
		Owner: r.Owner, StopReason: r.StopReason, StopRequestedAt: r.StopRequestedAt,
		MaxItems: r.MaxItems, MaxBytes: r.MaxBytes, LastSeq: r.LastSeq, AckedSeq: r.AckedSeq,
		BufferedItems: r.BufferedItems, BufferedBytes: r.BufferedBytes,
		Revision: rev,
	}
}

func (r *streamSessionRecord) orphan(dead string, rev int64) Orphan {
	return Orphan{DeadOwner: dead, StreamSession: r.public(rev)}
}

func (r *streamSessionRecord) touch(time.Time)                {}
func (r *streamSessionRecord) closed(now time.Time)           { r.ClosedAt = now }
func (r *streamSessionRecord) settled(context.Context, *Etcd) {}

func (r *streamSessionRecord) stopRequested(reason string, now time.Time) {
	r.StopReason, r.StopRequestedAt = reason, now
}

func (r *streamSessionRecord) putMore(*plan, int, time.Time, bool) error { return nil }
func (r *streamSessionRecord) delMore(p *plan)                           { p.del(itemsPrefix(r.ID), clientv3.WithPrefix()) }

func validJSONField(field string, v json.RawMessage) error {
	if v != nil && !json.Valid(v) {
		return fmt.Errorf("store: %w: %s is not valid JSON", ErrInvalid, field)
	}
	return nil
}

func validLabel(field, v string, required bool) error {
	if required && v == "" {
		return fmt.Errorf("store: %w: %s is required", ErrInvalid, field)
	}
	if len(v) > maxLabelLen {
		return fmt.Errorf("store: %w: %s is %d bytes, over the %d-byte limit", ErrInvalid, field, len(v), maxLabelLen)
	}
	return nil
}

func msDur(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func durMS(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// CreateStreamSession creates a stream session in status active and returns it
// with its new ID. With ns.Owned, this Etcd's replica becomes its owner.
func (e *Etcd) CreateStreamSession(ctx context.Context, ns NewStreamSession) (*StreamSession, error) {
	if err := validateNewStreamSession(&ns); err != nil {
		return nil, err
	}
	if err := e.checkQuota(ctx, streamSessionKind.name, openChecks(streamSessionKind.index, ns.Scope, ns.ClientID, ns.Quota)); err != nil {
		return nil, err
	}
	return streamSessionKind.create(ctx, e, &streamSessionRecord{
		owned: owned[StreamSessionStatus]{WorkspaceID: ns.Scope.WorkspaceID, AgentID: ns.Scope.AgentID, AgentScoped: ns.AgentScoped,
			ClientID: ns.ClientID, OperationID: ns.OperationID, Status: StreamSessionActive, RetentionMS: durMS(ns.Retention)},
		Protocol: ns.Protocol, Mode: ns.Mode, Cursor: ns.Cursor, State: ns.State,
		IdleMS: durMS(ns.IdleTimeout), LifetimeMS: durMS(ns.MaxLifetime), MaxItems: ns.MaxItems, MaxBytes: ns.MaxBytes,
	}, ns.Owned)
}

func validateNewStreamSession(ns *NewStreamSession) error {
	if err := validIdentity(ns.Scope, ns.ClientID, ns.AgentScoped, ns.OperationID); err != nil {
		return err
	}
	for _, f := range [][2]string{{"protocol", ns.Protocol}, {"mode", ns.Mode}, {"cursor", ns.Cursor}} {
		if err := validLabel(f[0], f[1], false); err != nil {
			return err
		}
	}
	if ns.IdleTimeout < time.Millisecond {
		return fmt.Errorf("store: %w: idle_timeout must be at least 1ms, got %s", ErrInvalid, ns.IdleTimeout)
	}
	if ns.MaxLifetime < time.Millisecond {
		return fmt.Errorf("store: %w: max_session_lifetime must be at least 1ms, got %s", ErrInvalid, ns.MaxLifetime)
	}
	if ns.Retention < 0 {
		return fmt.Errorf("store: %w: retention must not be negative, got %s", ErrInvalid, ns.Retention)
	}
	if ns.Retention == 0 {
		ns.Retention = DefaultStreamSessionRetention
	}
	if ns.MaxItems == 0 {
		ns.MaxItems = DefaultStreamSessionMaxItems
	}
	if ns.MaxBytes == 0 {
		ns.MaxBytes = DefaultStreamSessionMaxBytes
	}
	if ns.MaxItems < 0 || ns.MaxItems > MaxStreamSessionItems {
		return fmt.Errorf("store: %w: max_items %d is out of range (1-%d)", ErrInvalid, ns.MaxItems, MaxStreamSessionItems)
	}
	if ns.MaxBytes < 0 || ns.MaxBytes > MaxStreamSessionBytes {
		return fmt.Errorf("store: %w: max_bytes %d is out of range (1-%d)", ErrInvalid, ns.MaxBytes, MaxStreamSessionBytes)
	}
	return validJSONField("state_json", ns.State)
}

// GetStreamSession returns the session, or ErrNotFound when it does not
// exist, has expired or is outside scope.
func (e *Etcd) GetStreamSession(ctx context.Context, scope Scope, id string) (*StreamSession, error) {
	return streamSessionKind.read(ctx, e, &scope, "", id)
}

// AdvanceStreamSession moves a request/response session's cursor (and state)
// after a poll and refreshes its idle timeout. The session must be active
// and its cursor must still be a.From: of two concurrent polls from the
// same cursor, one advances and the other gets ErrConflict.
func (e *Etcd) AdvanceStreamSession(ctx context.Context, scope Scope, id string, a Advance) (*StreamSession, error) {
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return nil, ErrNotFound
	}
	if err := validLabel("cursor", a.To, false); err != nil {
		return nil, err
	}
	if err := validJSONField("state_json", a.State); err != nil {
		return nil, err
	}
	r, rev, err := streamSessionKind.change(ctx, e, "advance", id, &scope, false, func(p *plan, r *streamSessionRecord, now time.Time) error {
		if r.Status != StreamSessionActive {
			return &TransitionError{Kind: streamSessionKind.name, ID: id, From: string(r.Status), To: "advance"}
		}
		if r.Cursor != a.From {
			return fmt.Errorf("store: stream session %s: %w: its cursor is %q, not %q (another poll advanced it)", id, ErrConflict, r.Cursor, a.From)
		}
		r.Cursor = a.To
		if a.State != nil {
			r.State = a.State
		}
		r.LastPollAt = now
		r.ExpiresAt = r.expiry()
		if a.Done {
			streamSessionKind.finish(p, r, StreamSessionCompleted, now)
		}
		return streamSessionKind.put(e, p, r, now, true)
	})
	if err != nil {
		return nil, err
	}
	return r.public(rev), nil
}

// PollStreamSession acknowledges the items up to req.Cursor, returns the items
// after it and refreshes the idle timeout of an open session. Terminal
// sessions can be polled (drained) until they expire. A cursor behind the
// acknowledged one fails with ErrConflict (another poll consumed those
// items); one beyond the last item fails with ErrInvalid.
func (e *Etcd) PollStreamSession(ctx context.Context, scope Scope, id string, req PollRequest) (*PollResult, error) {
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return nil, ErrNotFound
	}
	if req.MaxItems < 0 || req.MaxBytes < 0 {
		return nil, fmt.Errorf("store: %w: poll limits must not be negative (max_items %d, max_bytes %d)", ErrInvalid, req.MaxItems, req.MaxBytes)
	}
	var res *PollResult
	// The items read by an attempt that lost the race to an append serve
	// the next attempt too: appends add items after them, and only a poll
	// (which moves AckedSeq) removes any.
	var read struct {
		from  uint64
		limit int64
		kvs   []*mvccpb.KeyValue
		ok    bool
	}
	r, rev, err := streamSessionKind.change(ctx, e, "poll", id, &scope, false, func(p *plan, r *streamSessionRecord, now time.Time) error {
		if req.OperationID != "" && r.OperationID != req.OperationID {
			return ErrNotFound
		}
		ack := r.AckedSeq
		if req.Cursor != "" {
			n, err := strconv.ParseUint(req.Cursor, 10, 64)
			if err != nil {
				return fmt.Errorf("store: stream session %s: %w: cursor %q is not a cursor of this session", id, ErrInvalid, truncate(req.Cursor))
			}
			if n > r.LastSeq {
				return fmt.Errorf("store: stream session %s: %w: cursor %d is beyond the last item %d", id, ErrInvalid, n, r.LastSeq)
			}
			if n < r.AckedSeq {
				return fmt.Errorf("store: stream session %s: %w: cursor %d is behind the acknowledged cursor %d (another poll consumed those items)", id, ErrConflict, n, r.AckedSeq)
			}
			ack = n
		}
		maxItems, maxBytes := req.MaxItems, req.MaxBytes
		if maxItems == 0 {
			maxItems = r.MaxItems
		}
		if maxBytes == 0 {
			maxBytes = r.MaxBytes
		}
		res = &PollResult{}
		var ackedBytes int64
		if r.LastSeq > r.AckedSeq {
			// Items from the old acknowledgement on: those up to ack are
			// being acknowledged now (their sizes leave the buffer), the
			// rest are candidates for this poll.
			limit := int64(ack-r.AckedSeq) + int64(maxItems) + 1
			if !read.ok || read.from != r.AckedSeq || read.limit != limit {
				resp, err := e.kv.Get(p.ctx, itemKey(id, r.AckedSeq+1),
					clientv3.WithRange(clientv3.GetPrefixRangeEnd(itemsPrefix(id))), clientv3.WithLimit(limit))
				if err != nil {
					return err
				}
				read.from, read.limit, read.kvs, read.ok = r.AckedSeq, limit, resp.Kvs, true
			}
			var size int64
			for _, ikv := range read.kvs {
				seq, err := strconv.ParseUint(string(ikv.Key[len(itemsPrefix(id)):]), 10, 64)
				if err != nil {
					return fmt.Errorf("store: stream session %s: bad item key %q", id, ikv.Key)
				}
				if seq <= ack {
					ackedBytes += int64(len(ikv.Value))
					continue
				}
				if len(res.Items) >= maxItems || (len(res.Items) > 0 && size+int64(len(ikv.Value)) > maxBytes) {
					break
				}
				size += int64(len(ikv.Value))
				res.Items = append(res.Items, Item{Seq: seq, Data: ikv.Value})
			}
		}
		last := ack
		if n := len(res.Items); n > 0 {
			last = res.Items[n-1].Seq
		}
		res.Cursor = strconv.FormatUint(last, 10)
		res.HasMore = r.LastSeq > last
		if ack == r.AckedSeq && r.Cursor == strconv.FormatUint(ack, 10) && now.Sub(r.LastPollAt) < pollTouchEvery(r.idle()) {
			// Nothing to acknowledge and a poll recorded a moment ago: a
			// read, which neither delays the session's writer nor costs
			// etcd a write per poll of a busy poller.
			return nil
		}
		if ack > r.AckedSeq {
			p.del(itemKey(id, r.AckedSeq+1), clientv3.WithRange(itemKey(id, ack+1)))
			r.BufferedItems = max(0, r.BufferedItems-int(ack-r.AckedSeq))
			r.BufferedBytes = max(0, r.BufferedBytes-ackedBytes)
			r.AckedSeq = ack
		}
		r.Cursor = strconv.FormatUint(ack, 10)
		r.LastPollAt = now
		open := !r.Status.Terminal()
		if open {
			r.ExpiresAt = r.expiry()
		}
		return streamSessionKind.put(e, p, r, now, open)
	})
	if err != nil {
		return nil, err
	}
	res.StreamSession = r.public(rev) // rev: as read, when nothing was written
	return res, nil
}

// pollTouchEvery is how often polls that acknowledge nothing record
// themselves (LastPollAt, which moves the idle expiry): a tenth of the
// idle timeout, at most 5s. So a session idles out at most that much
// before idle timeout after its last poll, never later.
func pollTouchEvery(idle time.Duration) time.Duration {
	return min(idle/10, 5*time.Second)
}

// CloseStreamSession stops a session on request. An active session owned by a
// runner becomes stopping (the runner sees it through WatchStreamSession, winds
// the upstream down and finishes it); one without a runner becomes stopped
// at once. Closing a stopping or stopped session again returns it unchanged;
// a completed or failed one fails with ErrIllegalTransition.
func (e *Etcd) CloseStreamSession(ctx context.Context, scope Scope, id, reason string) (*StreamSession, error) {
	return streamSessionKind.stop(ctx, e, scope, id, reason)
}

// AppendStreamSessionItems adds a runner's items to the session's buffer and
// returns how many it took. The session must be active or stopping, and
// owned by this replica (or by none). When the buffer cannot take every
// item it takes what fits, in order, and fails with a *BufferFullError
// (ErrBufferFull); an item larger than one etcd request fails with
// ErrTooLarge. Items go to etcd in transactions of at most 100 items and
// about one request's worth of bytes.
func (e *Etcd) AppendStreamSessionItems(ctx context.Context, id string, a Append) (int, error) {
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return 0, ErrNotFound
	}
	if err := validJSONField("state_json", a.State); err != nil {
		return 0, err
	}
	for i, it := range a.Items {
		if len(it) > e.maxItem {
			return 0, fmt.Errorf("store: stream session %s: %w: item %d is %d bytes, over the %d-byte item limit (etcd request size)", id, ErrTooLarge, i, len(it), e.maxItem)
		}
	}
	op := "append to stream session " + id
	done := 0
	for first := true; first || done < len(a.Items); first = false {
		var took int
		_, err := e.cas(ctx, op, streamSessionKind.key(id), func(kv *mvccpb.KeyValue, p *plan) error {
			took = 0
			now := e.now().UTC()
			r, err := streamSessionKind.live(kv, nil, now)
			if err != nil {
				return err
			}
			if err := e.checkOwner(streamSessionKind.name, id, r.Owner); err != nil {
				return err
			}
			if r.Status != StreamSessionActive && r.Status != StreamSessionStopping {
				return &TransitionError{Kind: streamSessionKind.name, ID: id, From: string(r.Status), To: "append items"}
			}
			itemTTL := r.hardDeadline().Sub(now)
			budget := e.maxValue - len(kv.Value) - len(a.State) - 1024
			skip := 0
			if a.Sequenced {
				next := a.First + uint64(done)
				if next > r.Taken {
					return fmt.Errorf("store: stream session %s: %w: items from %d would leave a hole after the %d taken", id, ErrInvalid, next, r.Taken)
				}
				skip = int(min(r.Taken-next, uint64(len(a.Items)-done)))
			}
			for _, it := range a.Items[done+skip:] {
				if took == maxItemsPerTxn || (took > 0 && len(it)+64 > budget) {
					break
				}
				if r.BufferedItems+1 > r.MaxItems || r.BufferedBytes+int64(len(it)) > r.MaxBytes {
					if took == 0 {
						return &BufferFullError{ID: id, MaxItems: r.MaxItems, MaxBytes: r.MaxBytes,
							BufferedItems: r.BufferedItems, BufferedBytes: r.BufferedBytes, ItemBytes: len(it)}
					}
					break
				}
				r.LastSeq++
				r.BufferedItems++
				r.BufferedBytes += int64(len(it))
				if err := p.put(itemKey(id, r.LastSeq), it, itemTTL); err != nil {
					return err
				}
				budget -= len(it) + 64
				took++
			}
			if a.Sequenced {
				r.Taken += uint64(took)
			}
			took += skip
			if done+took == len(a.Items) && a.State != nil {
				r.State = a.State
			}
			if took == skip && a.State == nil {
				return nil // nothing to append
			}
			return streamSessionKind.put(e, p, r, now, false)
		})
		if err != nil {
			// The items of a failed transaction are not taken (a
			// sequenced retry skips them if they were stored after all).
			return done, err
		}
		done += took
		if took == 0 {
			break
		}
	}
	return done, nil
}

// FinishStreamSession ends a session with a terminal status: the runner (owner)
// reports the upstream's end (completed), its failure (failed) or the end of
// a requested stop (stopped). Transitions the status machine does not allow
// fail with ErrIllegalTransition. The session then stays readable for its
// retention.
func (e *Etcd) FinishStreamSession(ctx context.Context, id string, end StreamSessionEnd) (*StreamSession, error) {
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return nil, ErrNotFound
	}
	if !end.Status.Terminal() {
		return nil, fmt.Errorf("store: %w: a session finishes as stopped, completed or failed, not %q", ErrInvalid, end.Status)
	}
	if err := validJSONField("error_json", end.Error); err != nil {
		return nil, err
	}
	if err := validJSONField("state_json", end.State); err != nil {
		return nil, err
	}
	r, rev, err := streamSessionKind.end(ctx, e, id, end.Status, func(r *streamSessionRecord) {
		if end.Error != nil {
			r.Error = end.Error
		}
		if end.State != nil {
			r.State = end.State
		}
	})
	if err != nil {
		return nil, err
	}
	return r.public(rev), nil
}
