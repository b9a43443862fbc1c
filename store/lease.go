package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/telemetry"
)

// Lease-bucket policy; see the package documentation for the bounds.
const (
	// windowFraction: a bucket lease is reused for TTL/windowFraction.
	windowFraction = 10
	minWindow      = time.Second
	maxWindow      = 10 * time.Minute
	// maxIdleBuckets is the map size above which buckets whose lease can no
	// longer be reused are dropped.
	maxIdleBuckets = 64
)

// bucketPolicy describes the shared lease used for entities of one TTL
// bucket.
type bucketPolicy struct {
	// rounded is the requested TTL rounded up to a multiple of window; it
	// is the bucket's key.
	rounded time.Duration
	// window is how long after its grant a bucket lease is handed out.
	window time.Duration
	// leaseTTL is the TTL requested from etcd: rounded + window, in seconds.
	leaseTTL int64
}

// policyFor returns the bucket policy for an entity TTL (which must be > 0).
//
// window W = clamp(ceil_s(ttl/10), 1s, 10m); rounded R = ceil(ttl / W) * W;
// lease TTL = R + W. An entity put at time t on a lease granted at g, with
// g <= t < g+W, expires at or after g+R+W > t+R >= t+ttl, and at the latest
// at about t+R+W < t+ttl+2W.
func policyFor(ttl time.Duration) bucketPolicy {
	w := ceilSeconds(ttl / windowFraction)
	w = max(minWindow, min(w, maxWindow))
	r := (ttl + w - 1) / w * w
	return bucketPolicy{rounded: r, window: w, leaseTTL: int64((r + w) / time.Second)}
}

// KeyLifetime is the longest a key put with a TTL of ttl (> 0) may live
// on its bucket lease: its TTL rounded up to the bucket, plus the lease's
// window twice (see policyFor).
func KeyLifetime(ttl time.Duration) time.Duration {
	p := policyFor(ttl)
	return p.rounded + 2*p.window
}

func ceilSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1) / time.Second * time.Second
}

// bucket is the state of one TTL bucket. sem (capacity 1) guards id and
// reuseUntil and serialises grants, so concurrent callers wait for one grant
// instead of each granting a lease; waiting honours the caller's context.
type bucket struct {
	policy     bucketPolicy
	sem        chan struct{}
	id         clientv3.LeaseID
	reuseUntil time.Time
}

// leaseManager hands out leases shared per TTL bucket instead of one lease
// per entity. Old bucket leases are never revoked: they expire by themselves
// together with the entities still attached to them.
type leaseManager struct {
	lease clientv3.Lease
	now   func() time.Time

	mu      sync.Mutex
	buckets map[time.Duration]*bucket
}

func newLeaseManager(l clientv3.Lease) *leaseManager {
	return &leaseManager{lease: l, now: time.Now, buckets: make(map[time.Duration]*bucket)}
}

func (m *leaseManager) bucketFor(ttl time.Duration) *bucket {
	p := policyFor(ttl)
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.buckets[p.rounded]; ok {
		return b
	}
	if len(m.buckets) >= maxIdleBuckets {
		now := m.now()
		for k, b := range m.buckets {
			select {
			case b.sem <- struct{}{}:
				if !now.Before(b.reuseUntil) {
					delete(m.buckets, k)
				}
				<-b.sem
			default: // in use
			}
		}
	}
	b := &bucket{policy: p, sem: make(chan struct{}, 1)}
	m.buckets[p.rounded] = b
	return b
}

// acquire returns a lease that keeps an entity put now alive for at least
// ttl (and, by the policy, less than ttl + 2 windows).
func (m *leaseManager) acquire(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("store: TTL must be positive, got %s", ttl)
	}
	b := m.bucketFor(ttl)
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-b.sem }()

	if b.id != 0 && m.now().Before(b.reuseUntil) {
		return b.id, nil
	}
	// Measure before the request: the server starts the lease's countdown
	// after this instant, so reuseUntil errs on the safe side.
	start := m.now()
	resp, err := m.lease.Grant(ctx, b.policy.leaseTTL)
	if err != nil {
		return 0, fmt.Errorf("store: grant lease (TTL %ds): %w", b.policy.leaseTTL, err)
	}
	// etcd may raise the TTL to its minimum; use what was granted. An entity
	// put before reuseUntil lives at least granted-rounded >= its TTL.
	granted := time.Duration(resp.TTL) * time.Second
	if granted <= b.policy.rounded {
		// Never expected (etcd does not lower TTLs); do not cache the lease.
		return 0, fmt.Errorf("store: etcd granted lease TTL %s, need more than %s", granted, b.policy.rounded)
	}
	b.id = resp.ID
	b.reuseUntil = start.Add(granted - b.policy.rounded)
	telemetry.LeaseGranted(granted)
	return b.id, nil
}

// invalidate forgets lease id if it is still the bucket lease for ttl, so
// the next acquire grants a fresh one. Used when etcd reports the lease as
// not found (revoked or expired behind our back).
func (m *leaseManager) invalidate(ctx context.Context, ttl time.Duration, id clientv3.LeaseID) {
	b := m.bucketFor(ttl)
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return // the caller's next acquire fails on ctx as well
	}
	if b.id == id {
		b.id = 0
		b.reuseUntil = time.Time{}
	}
	<-b.sem
}

// withLease runs op with a bucket lease for ttl. If etcd reports the lease
// as gone, it grants a fresh one and runs op once more.
func (m *leaseManager) withLease(ctx context.Context, ttl time.Duration, op func(clientv3.LeaseID) error) error {
	for attempt := 0; ; attempt++ {
		id, err := m.acquire(ctx, ttl)
		if err != nil {
			return err
		}
		err = op(id)
		if attempt == 0 && isLeaseNotFound(err) {
			m.invalidate(ctx, ttl, id)
			continue
		}
		return err
	}
}

func isLeaseNotFound(err error) bool {
	return err != nil && errors.Is(err, rpctypes.ErrLeaseNotFound)
}
