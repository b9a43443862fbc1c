package store

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdClient exposes the client of an Etcd to the external tests.
func EtcdClient(e *Etcd) *clientv3.Client { return e.cli }

// SetClock replaces the clock the store reads "now" from (expiry checks,
// timestamps). Leases still expire on etcd's clock.
func SetClock(e *Etcd, now func() time.Time) { e.now = now }

// OwnerLease returns the lease of e's owner registration (0 when it has
// none).
func OwnerLease(e *Etcd) clientv3.LeaseID {
	if o := e.currentOwner(); o != nil {
		return o.session.Lease()
	}
	return 0
}

// Crash stops e as a killed process would: its owner keep-alive stops
// without revoking the lease, and its client is closed.
func Crash(e *Etcd) {
	e.closeOnce.Do(func() {
		e.bgCancel()
		if e.ownsClient {
			_ = e.cli.Close()
		}
	})
}

// Limits returns the request limits in effect: the largest record and the
// largest item.
func Limits(e *Etcd) (maxValue, maxItem int) { return e.maxValue, e.maxItem }
