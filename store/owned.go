package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/telemetry"
)

// Owned records. Jobs and stream sessions are owned records: entities of a
// workspace (and, agent-scoped, of one agent) with a status machine whose
// final statuses are terminal, that expire (their leases bucketed by TTL,
// never past a hard deadline), and that a replica may own while it runs
// their upstream work. What that means is written once, here: the record
// fields every kind stores (owned), decoding and its checks, visibility to
// a Scope, the compare-and-swap transitions (create, claim by an owner,
// stop, finish), the indexes kept with a record (active/<index>/…,
// running/<index>/<id>, signals/<index>/<id>), the sweep of orphans whose
// owner is gone with its adoption hook (AdoptFunc), and the cleanup of
// expired records. A kind (jobKind, streamSessionKind) is an ownedKind:
// its names, its statuses' roles, and a record type that embeds owned and
// adds what only it has (a job's progress, result and retained quota; a
// session's cursor and items).

// ownedStatus is the status type of an owned kind, a status machine with
// terminal statuses.
type ownedStatus[S any] interface {
	~string
	Terminal() bool
	CanBecome(S) bool
}

// owned is what every owned record stores under the same JSON names. A
// kind's record embeds it; the fields a kind names its own way (when it
// finished, why it was stopped) are the kind's, set through its
// ownedRecord methods.
type owned[S ownedStatus[S]] struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	AgentID     string `json:"agent_id,omitempty"`
	AgentScoped bool   `json:"agent_scoped,omitempty"`
	// ClientID is the client that started it, whose quotas count it
	// (Quota.PerClient, RetainedQuota's per-client bounds); "" for none.
	ClientID    string          `json:"client_id,omitempty"`
	OperationID string          `json:"operation_id"`
	Status      S               `json:"status"`
	Error       json.RawMessage `json:"error_json,omitempty"`
	ExpiresAt   time.Time       `json:"expires_at"`
	CreatedAt   time.Time       `json:"created_at"`
	RetentionMS int64           `json:"retention_ms"`
	// Owner is the owner ID of the replica running it ("" when none).
	Owner string `json:"owner,omitempty"`
}

func (o *owned[S]) visibleTo(s Scope) bool {
	return o.WorkspaceID == s.WorkspaceID && (!o.AgentScoped || o.AgentID == s.AgentID)
}

func (o *owned[S]) retention() time.Duration { return msDur(o.RetentionMS) }

// activeKeys are the record's open-entity index entries: its agent's,
// and its client's when it has one.
func (o *owned[S]) activeKeys(kind string) []string {
	keys := []string{activeKey(kind, o.WorkspaceID, o.AgentID, o.ID)}
	if o.ClientID != "" {
		keys = append(keys, activeClientPrefix(kind, o.WorkspaceID, o.ClientID)+o.ID)
	}
	return keys
}

// ownedRecord is a kind's record (a pointer to it), V its public form.
type ownedRecord[S ownedStatus[S], V any] interface {
	shared() *owned[S]
	// expiry is when the record expires as it stands; hardDeadline the
	// latest it can (its running index entry, signal and items live on
	// leases until then, so they never vanish before it).
	expiry() time.Time
	hardDeadline() time.Time
	// corrupt names what makes a decoded record impossible beyond its key
	// and status ("" when nothing).
	corrupt() string
	// sizes names the sizes of its variable fields, for a record over the
	// size limit.
	sizes() string
	public(rev int64) V
	orphan(dead string, rev int64) Orphan
	// touch is called before every write of the record, closed when it
	// becomes terminal, stopRequested on a stop (or cancel) request.
	touch(now time.Time)
	closed(now time.Time)
	stopRequested(reason string, now time.Time)
	// putMore adds the kind's own keys to a put of the record (size: its
	// encoding's); delMore their deletion to the record's.
	putMore(p *plan, size int, now time.Time, refresh bool) error
	delMore(p *plan)
	// settled runs after a write that left the record terminal.
	settled(ctx context.Context, e *Etcd)
}

// ownedKind is one kind of owned record, with S its status, P its record
// and V its public form.
type ownedKind[S ownedStatus[S], P ownedRecord[S, V], V any] struct {
	name   string // "job", "stream session": errors, operation names, quotas
	label  string // "job", "session": a record naming another, metrics
	prefix string // ID prefix
	dir    string // records: <dir><id>
	// index names the kind in the active/, running/ and signals/
	// directories.
	index    string
	statuses []S
	// running: the status its owner runs it in, which a claim starts and
	// in which an orphan may be adopted.
	running S
	// stopVerb, stopping and stopped: a stop request ("stop", "cancel")
	// makes a record its owner runs stopping (the owner finishes it) and
	// one nobody runs stopped.
	stopVerb          string
	stopping, stopped S
	// failed: what an orphan becomes, lostStopping one being stopped.
	failed, lostStopping S
	new                  func() P
}

func (k *ownedKind[S, P, V]) key(id string) string { return k.dir + id }

// decode decodes the record at kv. A value that is not a record of this
// kind — not JSON, another record's ID, an unknown status, what corrupt
// names — is an error naming the key, never a record to act on.
func (k *ownedKind[S, P, V]) decode(kv *mvccpb.KeyValue) (P, error) {
	var zero P
	r := k.new()
	if err := decodeRecord(k.name+" "+truncate(string(kv.Key)), kv.Value, r); err != nil {
		return zero, err
	}
	o := r.shared()
	var bad string
	switch {
	case string(kv.Key) != k.key(o.ID):
		bad = fmt.Sprintf("it names %s %q", k.label, truncate(o.ID))
	case !k.known(o.Status):
		bad = fmt.Sprintf("unknown status %q", truncate(string(o.Status)))
	default:
		bad = r.corrupt()
	}
	if bad != "" {
		return zero, fmt.Errorf("store: decode %s %s: corrupt record: %s", k.name, truncate(string(kv.Key)), bad)
	}
	return r, nil
}

func (k *ownedKind[S, P, V]) known(s S) bool { return slices.Contains(k.statuses, s) }

// live decodes kv as a record visible to scope (nil: any scope) that has
// not expired at now; anything else is ErrNotFound.
func (k *ownedKind[S, P, V]) live(kv *mvccpb.KeyValue, scope *Scope, now time.Time) (P, error) {
	var zero P
	if kv == nil {
		return zero, ErrNotFound
	}
	r, err := k.decode(kv)
	if err != nil {
		return zero, err
	}
	if o := r.shared(); scope != nil && !o.visibleTo(*scope) || !now.Before(o.ExpiresAt) {
		return zero, ErrNotFound
	}
	return r, nil
}

// put adds the record's put to p — on a bucket lease until its expiry when
// refresh is set, otherwise on the lease it has — with its open-entity
// index entry and the kind's own keys.
func (k *ownedKind[S, P, V]) put(e *Etcd, p *plan, r P, now time.Time, refresh bool) error {
	o := r.shared()
	r.touch(now)
	val, err := e.encodeRecord(r)
	if err != nil {
		return fmt.Errorf("store: encode %s %s: %w", k.name, o.ID, err)
	}
	if len(val) > e.maxValue {
		return fmt.Errorf("store: %s %s: %w: record is %d bytes (%s), over the %d-byte limit",
			k.name, o.ID, ErrTooLarge, len(val), r.sizes(), e.maxValue)
	}
	if err := p.putEntity(k.key(o.ID), val, o.ExpiresAt, now, refresh, o.activeKeys(k.index), !o.Status.Terminal()); err != nil {
		return err
	}
	return r.putMore(p, len(val), now, refresh)
}

// validIdentity checks what every create names: who a new record belongs
// to and what it runs.
func validIdentity(scope Scope, client string, agentScoped bool, operationID string) error {
	if err := validLabel("workspace_id", scope.WorkspaceID, false); err != nil {
		return err
	}
	if err := validLabel("agent_id", scope.AgentID, agentScoped); err != nil {
		return err
	}
	if err := validLabel("client_id", client, false); err != nil {
		return err
	}
	return validLabel("operation_id", operationID, true)
}

// create writes r, a new record in its initial status, under a new ID —
// running and owned by this replica with ownHere — and returns it.
func (k *ownedKind[S, P, V]) create(ctx context.Context, e *Etcd, r P, ownHere bool) (V, error) {
	var zero V
	o := r.shared()
	if ownHere {
		self, err := e.owner(ctx)
		if err != nil {
			return zero, err
		}
		o.Status, o.Owner = k.running, self.id
	}
	for {
		now := e.now().UTC()
		o.ID, o.CreatedAt = newID(k.prefix), now
		o.ExpiresAt = r.expiry()
		collision := false
		rev, err := e.cas(ctx, "create "+k.name+" "+o.ID, k.key(o.ID), func(kv *mvccpb.KeyValue, p *plan) error {
			if kv != nil {
				collision = true
				return nil
			}
			if err := k.put(e, p, r, now, true); err != nil {
				return err
			}
			if o.Owner != "" {
				return p.put(runningKey(k.index, o.ID), []byte(o.Owner), r.hardDeadline().Sub(now))
			}
			return nil
		})
		if err != nil {
			return zero, err
		}
		if !collision { // 128 random bits collided: practically never
			return r.public(rev), nil
		}
	}
}

// read returns the live record id: visible to scope (a client's read), or
// with scope nil any of workspace (an operator's).
func (k *ownedKind[S, P, V]) read(ctx context.Context, e *Etcd, scope *Scope, workspace, id string) (V, error) {
	var zero V
	if !wellFormedID(id, k.prefix) {
		return zero, ErrNotFound
	}
	kv, err := e.get(ctx, "get "+k.name+" "+id, k.key(id))
	if err != nil {
		return zero, err
	}
	r, err := k.live(kv, scope, e.now())
	if err != nil {
		return zero, err
	}
	if scope == nil && r.shared().WorkspaceID != workspace {
		return zero, ErrNotFound
	}
	return r.public(kv.ModRevision), nil
}

// listOpen returns a page of a workspace's open records (of every agent)
// in the order of the open-entity index after the position after, and the
// next position ("" at the end).
func (k *ownedKind[S, P, V]) listOpen(ctx context.Context, e *Etcd, workspace, after string, limit int) ([]V, string, error) {
	ids, next, err := e.openIDs(ctx, k.index, workspace, after, limit)
	if err != nil {
		return nil, "", err
	}
	keys := make([]string, 0, len(ids))
	for _, id := range ids {
		if wellFormedID(id, k.prefix) {
			keys = append(keys, k.key(id))
		}
	}
	kvs, err := e.getKeys(ctx, "list open "+k.name+"s", keys)
	if err != nil {
		return nil, "", err
	}
	now := e.now()
	out := make([]V, 0, len(kvs))
	for _, kv := range kvs {
		if r, err := k.live(kv, nil, now); err == nil && r.shared().WorkspaceID == workspace {
			out = append(out, r.public(kv.ModRevision))
		}
	}
	return out, next, nil
}

// watchOwned reports the changes of the record id visible to scope as events
// (see WatchStreamSession).
func watchOwned[S ownedStatus[S], P ownedRecord[S, V], V, T any](ctx context.Context, e *Etcd, k *ownedKind[S, P, V],
	scope Scope, id string, event func(V) T, gone T,
) (<-chan T, error) {
	if !wellFormedID(id, k.prefix) {
		return nil, ErrNotFound
	}
	op := "watch " + k.name + " " + id
	kv, rev, err := e.getRev(ctx, op, k.key(id))
	if err != nil {
		return nil, err
	}
	if _, err := k.live(kv, &scope, e.now()); err != nil {
		return nil, err
	}
	conv := func(kv *mvccpb.KeyValue) (T, bool) {
		r, err := k.decode(kv)
		if err != nil {
			return gone, false
		}
		return event(r.public(kv.ModRevision)), true
	}
	return watchKey(e, ctx, op, k.key(id), kv, rev, conv, gone), nil
}

// change runs a compare-and-swap on the record id (verb names it in
// errors): step sees the live record — visible to scope (nil: any), and
// with byOwner owned by this replica or by none — and adds what to write
// to p (nothing: the record stays as read). It returns the record as step
// left it, and the revision written (or read, when nothing was); after a
// write that left it terminal, its settled hook runs.
func (k *ownedKind[S, P, V]) change(ctx context.Context, e *Etcd, verb, id string, scope *Scope, byOwner bool,
	step func(p *plan, r P, now time.Time) error,
) (P, int64, error) {
	var out, zero P
	var read int64
	rev, err := e.cas(ctx, verb+" "+k.name+" "+id, k.key(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := k.live(kv, scope, now)
		if err != nil {
			return err
		}
		if byOwner {
			if err := e.checkOwner(k.name, id, r.shared().Owner); err != nil {
				return err
			}
		}
		out, read = r, kv.ModRevision
		return step(p, r, now)
	})
	if err != nil {
		return zero, 0, err
	}
	if rev == 0 {
		return out, read, nil
	}
	if out.shared().Status.Terminal() {
		out.settled(ctx, e)
	}
	return out, rev, nil
}

// claim makes owner the owner of r, which its owner runs from now on: a
// claim of a queued job, the adoption of an orphan.
func (k *ownedKind[S, P, V]) claim(e *Etcd, p *plan, r P, owner string, now time.Time) error {
	o := r.shared()
	o.Status, o.Owner = k.running, owner
	if err := k.put(e, p, r, now, false); err != nil {
		return err
	}
	return p.put(runningKey(k.index, o.ID), []byte(owner), r.hardDeadline().Sub(now))
}

// finish makes r terminal (to) at now: it expires after its retention
// from then on, and its running index entry and signal go.
func (k *ownedKind[S, P, V]) finish(p *plan, r P, to S, now time.Time) {
	o := r.shared()
	o.Status = to
	r.closed(now)
	o.ExpiresAt = r.expiry()
	if o.Owner != "" {
		p.del(runningKey(k.index, o.ID))
		p.del(signalKey(k.index, o.ID))
	}
}

// end finishes the record id as to, a status its machine allows from the
// current one, for its owner (this replica, or none); apply sets what the
// owner reports with it.
func (k *ownedKind[S, P, V]) end(ctx context.Context, e *Etcd, id string, to S, apply func(P)) (P, int64, error) {
	return k.change(ctx, e, "finish", id, nil, true, func(p *plan, r P, now time.Time) error {
		if from := r.shared().Status; !from.CanBecome(to) {
			return &TransitionError{Kind: k.name, ID: id, From: string(from), To: "become " + string(to)}
		}
		apply(r)
		k.finish(p, r, to, now)
		return k.put(e, p, r, now, true)
	})
}

// stop requests a stop (a cancel) of the record id visible to scope. A
// record its owner runs becomes stopping, and the owner learns it from
// the signal key (WatchSignals) and finishes it; one nobody runs is
// stopped at once. A stopping or stopped record is returned unchanged; one
// that can no longer be stopped fails with ErrIllegalTransition.
func (k *ownedKind[S, P, V]) stop(ctx context.Context, e *Etcd, scope Scope, id, reason string) (V, error) {
	var zero V
	if !wellFormedID(id, k.prefix) {
		return zero, ErrNotFound
	}
	if err := validLabel("reason", reason, false); err != nil {
		return zero, err
	}
	r, rev, err := k.change(ctx, e, k.stopVerb, id, &scope, false, func(p *plan, r P, now time.Time) error {
		o := r.shared()
		switch {
		case o.Status == k.stopping || o.Status == k.stopped:
			return nil // idempotent
		case !o.Status.CanBecome(k.stopped):
			return &TransitionError{Kind: k.name, ID: id, From: string(o.Status), To: k.stopVerb}
		}
		r.stopRequested(reason, now)
		if o.Status == k.running && o.Owner != "" {
			o.Status = k.stopping
			if err := p.put(signalKey(k.index, id), []byte(reason), r.hardDeadline().Sub(now)); err != nil {
				return err
			}
			return k.put(e, p, r, now, false)
		}
		k.finish(p, r, k.stopped, now)
		return k.put(e, p, r, now, true)
	})
	if err != nil {
		return zero, err
	}
	return r.public(rev), nil
}

// sweep takes over the record id from its dead owner: with adopt, a
// running orphan is claimed by this replica and offered to adopt, which
// resumes it or has it failed; any other orphan fails (or, being stopped,
// becomes lostStopping). A record that is not dead's running orphan any
// more is errNotOrphan.
func (k *ownedKind[S, P, V]) sweep(ctx context.Context, e *Etcd, id, dead string, adopt AdoptFunc) (sweepResult, error) {
	var self *ownerState
	if adopt != nil {
		o, err := e.owner(ctx)
		if err != nil {
			return sweptNone, err
		}
		self = o
	}
	var out P
	adopted := false
	rev, err := e.cas(ctx, "sweep orphaned "+k.name+" "+id, k.key(id), func(kv *mvccpb.KeyValue, p *plan) error {
		adopted = false
		now := e.now().UTC()
		r, err := k.live(kv, nil, now)
		if err != nil || r.shared().Owner != dead || r.shared().Status.Terminal() {
			return errNotOrphan
		}
		out = r
		o := r.shared()
		if self != nil && o.Status == k.running {
			adopted = true
			return k.claim(e, p, r, self.id, now)
		}
		to := k.failed
		if o.Status == k.stopping {
			to = k.lostStopping
		}
		o.Error = ownerLostError(dead, nil)
		k.finish(p, r, to, now)
		return k.put(e, p, r, now, true)
	})
	if err != nil {
		return sweptNone, err
	}
	if !adopted {
		out.settled(ctx, e)
	} else if refused := adopt(ctx, out.orphan(dead, rev)); refused == nil {
		telemetry.OwnerLost(k.label, "adopted")
		return sweptAdopted, nil
	} else { // refused: this replica owns it now, and fails it
		if _, _, err := k.end(ctx, e, id, k.failed, func(r P) { r.shared().Error = ownerLostError(dead, refused) }); err != nil {
			return sweptNone, err
		}
	}
	telemetry.OwnerLost(k.label, "failed")
	return sweptFailed, nil
}

// cleanup deletes the records that expired before now, with their index
// entries and the kind's own keys, and returns how many.
func (k *ownedKind[S, P, V]) cleanup(ctx context.Context, e *Etcd, now time.Time) (int, error) {
	n := 0
	err := e.scan(ctx, k.dir, false, func(kv *mvccpb.KeyValue) error {
		r, err := k.decode(kv)
		if err != nil || now.Before(r.shared().ExpiresAt) {
			return nil
		}
		o := r.shared()
		p := e.newPlan(ctx)
		p.del(k.key(o.ID))
		p.del(runningKey(k.index, o.ID))
		for _, a := range o.activeKeys(k.index) {
			p.del(a)
		}
		p.del(signalKey(k.index, o.ID))
		r.delMore(p)
		ok, err := e.deleteAt(ctx, "delete "+k.name+" "+o.ID, k.key(o.ID), kv.ModRevision, p.ops...)
		if ok {
			n++
		}
		return err
	})
	return n, err
}

// deleteAt commits ops if key is still at revision rev, and reports
// whether it did.
func (e *Etcd) deleteAt(ctx context.Context, op, key string, rev int64, ops ...clientv3.Op) (bool, error) {
	var ok bool
	err := e.do(ctx, op, func(ctx context.Context) error {
		resp, err := e.kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(ops...).Commit()
		if err != nil {
			return err
		}
		ok = resp.Succeeded
		return nil
	})
	return ok, err
}

// ownedKinds are the owned kinds by their index name, for what walks the
// running and open-entity indexes.
var ownedKinds = map[string]interface {
	key(id string) string
	sweep(ctx context.Context, e *Etcd, id, dead string, adopt AdoptFunc) (sweepResult, error)
}{jobKind.index: jobKind, streamSessionKind.index: streamSessionKind}
