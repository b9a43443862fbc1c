package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Owner leases. A replica that runs stream sessions or jobs (a runner
// reading an upstream) registers itself once as an owner: a key
// owners/<owner-id> on a lease of its own that it keeps alive. Every running
// entity names its owner and has an index key running/<kind>/<id>. When the
// replica dies its lease expires, the owner key disappears, and the sweeper
// of any replica marks the entity failed (or lets the runtime adopt it).
// One lease per replica, not per entity.

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
}

// ownerState is this Etcd's registration as an owner.
type ownerState struct {
	id    string
	lease clientv3.LeaseID
	done  chan struct{} // closed when the keep-alive stops (lease lost or Close)
}

func (o *ownerState) alive() bool {
	if o == nil {
		return false
	}
	select {
	case <-o.done:
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
// keep it alive until Close.
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
	err := e.do(ctx, op, func(ctx context.Context) error {
		resp, err := e.cli.Grant(ctx, int64(e.ownerTTL/time.Second))
		if err != nil {
			return err
		}
		lease = resp.ID
		val, _ := json.Marshal(ownerRecord{ID: id, Name: e.replicaName, PID: os.Getpid(), StartedAt: time.Now().UTC()})
		_, err = e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(ownerKey(id)), "=", 0)).
			Then(clientv3.OpPut(ownerKey(id), string(val), clientv3.WithLease(lease))).
			Commit()
		return err
	})
	if err != nil {
		if lease != 0 {
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = e.cli.Revoke(rctx, lease)
			cancel()
		}
		return nil, err
	}
	kctx, cancel := context.WithCancel(e.bgCtx)
	ch, err := e.cli.KeepAlive(kctx, lease)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("store: %s: keep lease alive: %w", op, err)
	}
	o := &ownerState{id: id, lease: lease, done: make(chan struct{})}
	go func() {
		defer cancel()
		defer close(o.done)
		for range ch { // the channel closes when the lease is lost or on Close
		}
	}()
	e.own = o
	return o, nil
}

// releaseOwner revokes the owner lease (on Close): other replicas then see
// this replica's remaining running entities as orphaned at once instead of
// after the owner TTL.
func (e *Etcd) releaseOwner() {
	e.ownerMu.Lock()
	o := e.own
	e.own = nil
	e.ownerMu.Unlock()
	if o == nil || !o.alive() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = e.cli.Revoke(ctx, o.lease)
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
