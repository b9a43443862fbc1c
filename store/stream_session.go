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
	// workspace or agent already has that many open sessions.
	Quota Quota
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
	ID              string              `json:"id"`
	WorkspaceID     string              `json:"workspace_id"`
	AgentID         string              `json:"agent_id,omitempty"`
	AgentScoped     bool                `json:"agent_scoped,omitempty"`
	OperationID     string              `json:"operation_id"`
	Protocol        string              `json:"protocol,omitempty"`
	Mode            string              `json:"mode,omitempty"`
	Status          StreamSessionStatus `json:"status"`
	Cursor          string              `json:"cursor,omitempty"`
	State           json.RawMessage     `json:"state_json,omitempty"`
	Error           json.RawMessage     `json:"error_json,omitempty"`
	ExpiresAt       time.Time           `json:"expires_at"`
	LastPollAt      time.Time           `json:"last_poll_at,omitzero"`
	CreatedAt       time.Time           `json:"created_at"`
	ClosedAt        time.Time           `json:"closed_at,omitzero"`
	IdleMS          int64               `json:"idle_timeout_ms"`
	LifetimeMS      int64               `json:"max_lifetime_ms"`
	RetentionMS     int64               `json:"retention_ms"`
	Owner           string              `json:"owner,omitempty"`
	StopReason      string              `json:"stop_reason,omitempty"`
	StopRequestedAt time.Time           `json:"stop_requested_at,omitzero"`
	MaxItems        int                 `json:"max_items"`
	MaxBytes        int64               `json:"max_bytes"`
	LastSeq         uint64              `json:"last_seq,omitempty"`
	AckedSeq        uint64              `json:"acked_seq,omitempty"`
	BufferedItems   int                 `json:"buffered_items,omitempty"`
	BufferedBytes   int64               `json:"buffered_bytes,omitempty"`
	// Taken counts the items sequenced appends stored (Append.First).
	Taken uint64 `json:"taken,omitempty"`
}

const streamSessionKind = "stream session"

func streamSessionKey(id string) string  { return streamSessionsDir + id }
func itemsPrefix(id string) string       { return itemsDir + id + "/" }
func itemKey(id string, n uint64) string { return fmt.Sprintf("%s%020d", itemsPrefix(id), n) }

func (r *streamSessionRecord) idle() time.Duration      { return msDur(r.IdleMS) }
func (r *streamSessionRecord) lifetime() time.Duration  { return msDur(r.LifetimeMS) }
func (r *streamSessionRecord) retention() time.Duration { return msDur(r.RetentionMS) }

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
	end := r.CreatedAt.Add(r.lifetime())
	if end.Before(idle) {
		return end
	}
	return idle
}

// hardDeadline is the latest the session can possibly exist: closed at the
// end of its lifetime, then retained. Items and the running index live on
// leases that last until then, so they never vanish before the session.
func (r *streamSessionRecord) hardDeadline() time.Time {
	return r.CreatedAt.Add(r.lifetime() + r.retention())
}

func (r *streamSessionRecord) visibleTo(s Scope) bool {
	return r.WorkspaceID == s.WorkspaceID && (!r.AgentScoped || r.AgentID == s.AgentID)
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

// decodeStreamSession decodes the record at kv. A value that is not a
// session record — not JSON, another session's ID, an unknown status,
// negative bounds or durations, an acknowledged cursor past the last item
// — is an error naming the key, never a record to act on.
func decodeStreamSession(kv *mvccpb.KeyValue) (*streamSessionRecord, error) {
	var r streamSessionRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return nil, fmt.Errorf("store: decode stream session %s: %w", truncate(string(kv.Key)), err)
	}
	var bad string
	switch {
	case string(kv.Key) != streamSessionKey(r.ID):
		bad = fmt.Sprintf("it names session %q", truncate(r.ID))
	case !knownStreamSessionStatus(r.Status):
		bad = fmt.Sprintf("unknown status %q", truncate(string(r.Status)))
	case r.IdleMS < 0 || r.LifetimeMS < 0 || r.RetentionMS < 0:
		bad = "negative idle_timeout_ms, max_lifetime_ms or retention_ms"
	case r.MaxItems < 0 || r.MaxBytes < 0 || r.BufferedItems < 0 || r.BufferedBytes < 0:
		bad = "negative buffer bounds or counts"
	case r.AckedSeq > r.LastSeq:
		bad = fmt.Sprintf("acked_seq %d is past last_seq %d", r.AckedSeq, r.LastSeq)
	}
	if bad != "" {
		return nil, fmt.Errorf("store: decode stream session %s: corrupt record: %s", truncate(string(kv.Key)), bad)
	}
	return &r, nil
}

func knownStreamSessionStatus(s StreamSessionStatus) bool {
	switch s {
	case StreamSessionActive, StreamSessionStopping, StreamSessionStopped, StreamSessionCompleted, StreamSessionFailed:
		return true
	}
	return false
}

// liveStreamSession decodes kv as a session visible to scope (nil: any scope)
// that has not expired at now; anything else is ErrNotFound.
func liveStreamSession(kv *mvccpb.KeyValue, scope *Scope, now time.Time) (*streamSessionRecord, error) {
	if kv == nil {
		return nil, ErrNotFound
	}
	r, err := decodeStreamSession(kv)
	if err != nil {
		return nil, err
	}
	if scope != nil && !r.visibleTo(*scope) {
		return nil, ErrNotFound
	}
	if !now.Before(r.ExpiresAt) {
		return nil, ErrNotFound
	}
	return r, nil
}

// putStreamSession adds the record's put to p: on a bucket lease until its
// expiry when refresh is set, otherwise on the lease it has.
func (e *Etcd) putStreamSession(p *plan, r *streamSessionRecord, now time.Time, refresh bool) error {
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encode stream session %s: %w", r.ID, err)
	}
	if len(val) > e.maxValue {
		return fmt.Errorf("store: stream session %s: %w: record is %d bytes (state_json %d, error_json %d), over the %d-byte limit",
			r.ID, ErrTooLarge, len(val), len(r.State), len(r.Error), e.maxValue)
	}
	return p.putEntity(streamSessionKey(r.ID), val, r.ExpiresAt, now, refresh,
		activeKey(activeStreamSessions, r.WorkspaceID, r.AgentID, r.ID), !r.Status.Terminal())
}

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
	if err := e.checkQuota(ctx, streamSessionKind, openChecks(activeStreamSessions, ns.Scope, ns.Quota)); err != nil {
		return nil, err
	}
	var owner string
	if ns.Owned {
		o, err := e.owner(ctx)
		if err != nil {
			return nil, err
		}
		owner = o.id
	}
	for {
		now := e.now().UTC()
		r := &streamSessionRecord{
			ID: newID(StreamSessionIDPrefix), WorkspaceID: ns.Scope.WorkspaceID, AgentID: ns.Scope.AgentID,
			AgentScoped: ns.AgentScoped, OperationID: ns.OperationID, Protocol: ns.Protocol, Mode: ns.Mode,
			Status: StreamSessionActive, Cursor: ns.Cursor, State: ns.State, CreatedAt: now,
			IdleMS: durMS(ns.IdleTimeout), LifetimeMS: durMS(ns.MaxLifetime), RetentionMS: durMS(ns.Retention),
			Owner: owner, MaxItems: ns.MaxItems, MaxBytes: ns.MaxBytes,
		}
		r.ExpiresAt = r.expiry()
		op := "create stream session " + r.ID
		collision := false
		rev, err := e.cas(ctx, op, streamSessionKey(r.ID), func(kv *mvccpb.KeyValue, p *plan) error {
			if kv != nil {
				collision = true
				return nil
			}
			if err := e.putStreamSession(p, r, now, true); err != nil {
				return err
			}
			if owner != "" {
				return p.put(runningKey(streamSessionsRunning, r.ID), []byte(owner), r.hardDeadline().Sub(now))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if collision {
			continue // 128 random bits collided: practically never
		}
		return r.public(rev), nil
	}
}

func validateNewStreamSession(ns *NewStreamSession) error {
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"workspace_id", ns.Scope.WorkspaceID, false},
		{"agent_id", ns.Scope.AgentID, ns.AgentScoped},
		{"operation_id", ns.OperationID, true},
		{"protocol", ns.Protocol, false},
		{"mode", ns.Mode, false},
		{"cursor", ns.Cursor, false},
	} {
		if err := validLabel(f.name, f.v, f.required); err != nil {
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
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return nil, ErrNotFound
	}
	kv, err := e.get(ctx, "get stream session "+id, streamSessionKey(id))
	if err != nil {
		return nil, err
	}
	r, err := liveStreamSession(kv, &scope, e.now())
	if err != nil {
		return nil, err
	}
	return r.public(kv.ModRevision), nil
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
	var out *streamSessionRecord
	rev, err := e.cas(ctx, "advance stream session "+id, streamSessionKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveStreamSession(kv, &scope, now)
		if err != nil {
			return err
		}
		if r.Status != StreamSessionActive {
			return &TransitionError{Kind: streamSessionKind, ID: id, From: string(r.Status), To: "advance"}
		}
		if r.Cursor != a.From {
			return fmt.Errorf("store: stream session %s: %w: its cursor is %q, not %q (another poll advanced it)", id, ErrConflict, r.Cursor, a.From)
		}
		r.Cursor = a.To
		if a.State != nil {
			r.State = a.State
		}
		r.LastPollAt = now
		if a.Done {
			r.Status, r.ClosedAt = StreamSessionCompleted, now
			if r.Owner != "" {
				p.del(runningKey(streamSessionsRunning, id))
			}
		}
		r.ExpiresAt = r.expiry()
		out = r
		return e.putStreamSession(p, r, now, true)
	})
	if err != nil {
		return nil, err
	}
	return out.public(rev), nil
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
	op := "poll stream session " + id
	var res *PollResult
	var out *streamSessionRecord
	// The items read by an attempt that lost the race to an append serve
	// the next attempt too: appends add items after them, and only a poll
	// (which moves AckedSeq) removes any.
	var read struct {
		from  uint64
		limit int64
		kvs   []*mvccpb.KeyValue
		ok    bool
	}
	var readRev int64
	rev, err := e.cas(ctx, op, streamSessionKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveStreamSession(kv, &scope, now)
		if err != nil {
			return err
		}
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
		readRev = kv.ModRevision
		if ack == r.AckedSeq && r.Cursor == strconv.FormatUint(ack, 10) && now.Sub(r.LastPollAt) < pollTouchEvery(r.idle()) {
			// Nothing to acknowledge and a poll recorded a moment ago: a
			// read, which neither delays the session's writer nor costs
			// etcd a write per poll of a busy poller.
			out = r
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
		out = r
		return e.putStreamSession(p, r, now, open)
	})
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		rev = readRev // nothing written: the record as read
	}
	res.StreamSession = out.public(rev)
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
	if !wellFormedID(id, StreamSessionIDPrefix) {
		return nil, ErrNotFound
	}
	if err := validLabel("reason", reason, false); err != nil {
		return nil, err
	}
	var out *streamSessionRecord
	var outRev int64
	rev, err := e.cas(ctx, "stop stream session "+id, streamSessionKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveStreamSession(kv, &scope, now)
		if err != nil {
			return err
		}
		out, outRev = r, kv.ModRevision
		switch r.Status {
		case StreamSessionStopping, StreamSessionStopped:
			return nil // idempotent
		case StreamSessionActive:
		default:
			return &TransitionError{Kind: streamSessionKind, ID: id, From: string(r.Status), To: "stop"}
		}
		r.StopReason, r.StopRequestedAt = reason, now
		if r.Owner != "" {
			r.Status = StreamSessionStopping
			if err := p.put(signalKey(activeStreamSessions, id), []byte(reason), r.hardDeadline().Sub(now)); err != nil {
				return err
			}
			return e.putStreamSession(p, r, now, false)
		}
		r.Status, r.ClosedAt = StreamSessionStopped, now
		r.ExpiresAt = r.expiry()
		return e.putStreamSession(p, r, now, true)
	})
	if err != nil {
		return nil, err
	}
	if rev != 0 {
		outRev = rev
	}
	return out.public(outRev), nil
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
		_, err := e.cas(ctx, op, streamSessionKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
			took = 0
			now := e.now().UTC()
			r, err := liveStreamSession(kv, nil, now)
			if err != nil {
				return err
			}
			if err := e.checkOwner(streamSessionKind, id, r.Owner); err != nil {
				return err
			}
			if r.Status != StreamSessionActive && r.Status != StreamSessionStopping {
				return &TransitionError{Kind: streamSessionKind, ID: id, From: string(r.Status), To: "append items"}
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
			return e.putStreamSession(p, r, now, false)
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
	var out *streamSessionRecord
	rev, err := e.cas(ctx, "finish stream session "+id, streamSessionKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveStreamSession(kv, nil, now)
		if err != nil {
			return err
		}
		if err := e.checkOwner(streamSessionKind, id, r.Owner); err != nil {
			return err
		}
		if !r.Status.CanBecome(end.Status) {
			return &TransitionError{Kind: streamSessionKind, ID: id, From: string(r.Status), To: "become " + string(end.Status)}
		}
		finishStreamSession(p, r, end, now)
		out = r
		return e.putStreamSession(p, r, now, true)
	})
	if err != nil {
		return nil, err
	}
	return out.public(rev), nil
}

func finishStreamSession(p *plan, r *streamSessionRecord, end StreamSessionEnd, now time.Time) {
	r.Status, r.ClosedAt = end.Status, now
	if end.Error != nil {
		r.Error = end.Error
	}
	if end.State != nil {
		r.State = end.State
	}
	r.ExpiresAt = r.expiry()
	if r.Owner != "" {
		p.del(runningKey(streamSessionsRunning, r.ID))
		p.del(signalKey(activeStreamSessions, r.ID))
	}
}

// deleteStreamSession removes a session with its items and index entry when
// it is still at revision rev.
func (e *Etcd) deleteStreamSession(ctx context.Context, r *streamSessionRecord, rev int64) (bool, error) {
	id := r.ID
	var ok bool
	err := e.do(ctx, "delete stream session "+id, func(ctx context.Context) error {
		resp, err := e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(streamSessionKey(id)), "=", rev)).
			Then(
				clientv3.OpDelete(streamSessionKey(id)),
				clientv3.OpDelete(itemsPrefix(id), clientv3.WithPrefix()),
				clientv3.OpDelete(runningKey(streamSessionsRunning, id)),
				clientv3.OpDelete(activeKey(activeStreamSessions, r.WorkspaceID, r.AgentID, id)),
				clientv3.OpDelete(signalKey(activeStreamSessions, id)),
			).Commit()
		if err != nil {
			return err
		}
		ok = resp.Succeeded
		return nil
	})
	return ok, err
}
