package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// Duties. A duty is work that exactly one replica of a fleet does at a
// time — the expiry cleanups of the sweep leader, an endpoint's
// registration with an mcp-mesh registry — whichever replica it is. It
// is a lock (an etcd concurrency.Mutex) whose key, <prefix><lock>/<owner
// lease in hex>, lives on the replica's owner lease: when the replica
// stops, releases the duty or loses its lease (unreachable for longer
// than the owner TTL), the key goes and the next replica to ask takes the
// duty. A replica that does not hold it takes its key back at once
// (TryLock), so there is no queue to wait in, and asking again while it
// holds the duty is cheap.

// dutiesDir holds the locks of the duties named through HoldDuty; the
// sweep-leader lock keeps its own key for the replicas of older versions.
const dutiesDir = "duties/"

// dutyName is what a duty's name may be: a key segment.
var dutyName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// HoldDuty reports whether this replica holds the duty named duty,
// taking it when no live replica does. An error is etcd's (this replica
// may hold the duty or not: it should act as if it did not).
func (e *Etcd) HoldDuty(ctx context.Context, duty string) (bool, error) {
	if !dutyName.MatchString(duty) {
		return false, fmt.Errorf("store: duty %q: must be 1 to 200 letters, digits or . _ : -", duty)
	}
	return e.holdLock(ctx, dutiesDir+duty)
}

// ReleaseDuty gives the duty up if this replica holds it, so that another
// replica takes it at once instead of after the owner TTL.
func (e *Etcd) ReleaseDuty(ctx context.Context, duty string) error {
	o := e.currentOwner()
	if o == nil {
		return nil
	}
	o.leaderMu.Lock()
	defer o.leaderMu.Unlock()
	m := o.locks[dutiesDir+duty]
	if m == nil {
		return nil
	}
	delete(o.locks, dutiesDir+duty)
	return e.do(ctx, "release duty", func(ctx context.Context) error { return m.Unlock(ctx) })
}

// holdLock reports whether this replica holds (or just took) the lock
// named lock on its owner lease.
func (e *Etcd) holdLock(ctx context.Context, lock string) (bool, error) {
	o, err := e.owner(ctx)
	if err != nil {
		return false, err
	}
	o.leaderMu.Lock()
	defer o.leaderMu.Unlock()
	m := o.locks[lock]
	if m == nil {
		m = concurrency.NewMutex(o.session, e.prefix+lock)
		o.locks[lock] = m
	}
	var held bool
	err = e.do(ctx, "hold "+lock, func(ctx context.Context) error {
		err := m.TryLock(ctx)
		if errors.Is(err, concurrency.ErrLocked) {
			return nil
		}
		held = err == nil
		return err
	})
	return err == nil && held, err
}
