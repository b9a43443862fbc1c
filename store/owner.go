package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Owner leases. A replica that runs stream sessions or jobs (a runner
// reading an upstream) registers itself once as an owner: a key
// owners/<owner-id> on a lease that a concurrency.Session keeps alive. Every
// running entity names its owner and has an index key running/<kind>/<id>.
// When the replica dies its lease expires, the owner key disappears, and the
// sweeper of any replica marks the entity failed (or lets the runtime adopt
// it). One lease per replica, not per entity; the sweep-leader lock lives on
// the same lease, as are the locks of other duties (duty.go).

// DefaultOwnerTTL is the owner lease TTL when EtcdConfig.OwnerTTL is zero.
// A dead replica's running entities are marked failed about this long after
// its last keep-alive.
const DefaultOwnerTTL = 10 * time.Second

// MinOwnerTTL is etcd's practical minimum lease TTL.
const MinOwnerTTL = 2 * time.Second

// ownerRecord is the value of owners/<id>.
type ownerRecord struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// Lease is the owner lease's ID in hex, as it appears in the key of
	// the sweep-leader lock while this replica holds it.
	Lease string `json:"lease,omitempty"`
	// Reads is the newest record format the replica reads (format.go);
	// absent (0) in the records of releases that read format 1 only.
	Reads int `json:"reads,omitempty"`
}

// ownerState is this Etcd's registration as an owner: the session that
// keeps its lease alive, and the sweep-leader lock on that lease.
type ownerState struct {
	id      string
	session *concurrency.Session

	// leaderMu guards locks, whose mutexes are not safe for concurrent
	// use: the locks of this owner's duties by name (duty.go), the
	// sweep-leader lock among them.
	leaderMu sync.Mutex
	locks    map[string]*concurrency.Mutex
	// limits are the fleet-wide rate limits this owner joined (limits.go),
	// also under leaderMu.
	limits map[string]bool
}

// alive reports whether the owner lease is still kept alive: its session
// ends when etcd lets the lease expire (unreachable for longer than the
// owner TTL), on Close, or when the process stops.
func (o *ownerState) alive() bool {
	if o == nil {
		return false
	}
	select {
	case <-o.session.Done():
		return false
	default:
		return true
	}
}

func ownerKey(id string) string { return ownersDir + id }

// OwnerID returns the ID under which this Etcd currently owns running
// entities, or "" when it owns none (never registered, or its owner lease
// was lost; the next operation that needs an owner registers a new one).
func (e *Etcd) OwnerID() string {
	e.ownerMu.Lock()
	defer e.ownerMu.Unlock()
	if e.own.alive() {
		return e.own.id
	}
	return ""
}

// currentOwner returns the live owner registration, or nil.
func (e *Etcd) currentOwner() *ownerState {
	e.ownerMu.Lock()
	defer e.ownerMu.Unlock()
	if e.own.alive() {
		return e.own
	}
	return nil
}

// owner returns this Etcd's owner registration, registering (again) when
// there is none: grant a lease of the owner TTL, put owners/<id> on it and
// keep it alive with a concurrency.Session until Close.
func (e *Etcd) owner(ctx context.Context) (*ownerState, error) {
	e.ownerMu.Lock()
	defer e.ownerMu.Unlock()
	if e.own.alive() {
		return e.own, nil
	}
	if e.bgCtx.Err() != nil {
		return nil, errors.New("store: closed")
	}
	const op = "register owner"
	id := newID(ownerIDPrefix)
	var lease clientv3.LeaseID
	// The grant runs under the operation timeout, so an unreachable etcd
	// fails it fast; the session then only keeps the lease alive.
	err := e.do(ctx, op, func(ctx context.Context) error {
		resp, err := e.cli.Grant(ctx, int64(e.ownerTTL/time.Second))
		if err != nil {
			return err
		}
		lease = resp.ID
		val, _ := e.encodeRecord(ownerRecord{ID: id, Lease: fmt.Sprintf("%x", lease), Name: e.replicaName,
			PID: os.Getpid(), StartedAt: time.Now().UTC(), Reads: FormatVersion})
		_, err = e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(ownerKey(id)), "=", 0)).
			Then(clientv3.OpPut(ownerKey(id), string(val), clientv3.WithLease(lease))).
			Commit()
		return err
	})
	if err == nil {
		var sess *concurrency.Session
		sess, err = concurrency.NewSession(e.cli, concurrency.WithLease(lease),
			concurrency.WithTTL(int(e.ownerTTL/time.Second)), concurrency.WithContext(e.bgCtx))
		if err == nil {
			e.own = &ownerState{id: id, session: sess, locks: map[string]*concurrency.Mutex{}, limits: map[string]bool{}}
			return e.own, nil
		}
		err = fmt.Errorf("store: %s: keep lease alive: %w", op, err)
	}
	if lease != 0 {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = e.cli.Revoke(rctx, lease)
		cancel()
	}
	return nil, err
}

// releaseOwner ends the owner session and revokes its lease (on Close):
// other replicas then see this replica's remaining running entities as
// orphaned at once instead of after the owner TTL, and the sweep-leader
// lock passes on.
func (e *Etcd) releaseOwner() {
	e.ownerMu.Lock()
	o := e.own
	e.own = nil
	e.ownerMu.Unlock()
	if o == nil {
		return
	}
	alive := o.alive()
	o.session.Orphan() // stops the keep-alives; Session.Close would wait up to the TTL to revoke
	if !alive {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = e.cli.Revoke(ctx, o.session.Lease())
}

// checkOwner returns nil when the record's owner is this Etcd's live owner
// registration, or when the record has no owner; ErrNotOwner otherwise.
func (e *Etcd) checkOwner(kind, id, recOwner string) error {
	if recOwner == "" {
		return nil
	}
	if o := e.currentOwner(); o != nil && o.id == recOwner {
		return nil
	}
	return fmt.Errorf("store: %s %s: %w: it is owned by %s, this replica's owner registration is %q",
		kind, id, ErrNotOwner, recOwner, e.OwnerID())
}
