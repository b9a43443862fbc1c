package store

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestPolicyBounds(t *testing.T) {
	ttls := []time.Duration{
		time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		2 * time.Second, 2500 * time.Millisecond, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 90 * time.Second, 30 * time.Minute, time.Hour,
		24 * time.Hour, 7 * 24 * time.Hour,
	}
	for _, ttl := range ttls {
		p := policyFor(ttl)
		if p.window < minWindow || p.window > maxWindow || p.window%time.Second != 0 {
			t.Errorf("ttl %s: window %s out of range or not whole seconds", ttl, p.window)
		}
		if p.rounded < ttl || p.rounded >= ttl+p.window || p.rounded%p.window != 0 {
			t.Errorf("ttl %s: rounded %s not the next multiple of window %s", ttl, p.rounded, p.window)
		}
		if time.Duration(p.leaseTTL)*time.Second != p.rounded+p.window {
			t.Errorf("ttl %s: lease TTL %ds != rounded %s + window %s", ttl, p.leaseTTL, p.rounded, p.window)
		}
		if p.leaseTTL < 2 {
			t.Errorf("ttl %s: lease TTL %ds below etcd's usual minimum", ttl, p.leaseTTL)
		}
		// Documented upper bound on the overshoot: 2W, with 2W ≈ TTL/5 for
		// TTLs where the clamps do not apply.
		if over := p.rounded + p.window - ttl; over > 2*p.window {
			t.Errorf("ttl %s: overshoot %s > 2W", ttl, over)
		}
		if ttl >= 20*time.Second && ttl <= time.Hour {
			if over := p.rounded + p.window - ttl; over > ttl/5+2*time.Second {
				t.Errorf("ttl %s: overshoot %s well above TTL/5", ttl, over)
			}
		}
	}
}

func TestPolicySameBucket(t *testing.T) {
	if a, b := policyFor(29500*time.Millisecond), policyFor(30*time.Second); a.rounded != b.rounded {
		t.Errorf("29.5s and 30s in different buckets: %s vs %s", a.rounded, b.rounded)
	}
	if a, b := policyFor(30*time.Second), policyFor(60*time.Second); a.rounded == b.rounded {
		t.Errorf("30s and 60s share bucket %s", a.rounded)
	}
}

// startEtcd starts an embedded etcd and a client for the internal tests
// (which cannot use storetest: it imports this package).
// freePorts returns n distinct free loopback ports: each listener stays
// open until all are known.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	// Both listeners stay open until both ports are known, so that the
	// two differ.
	var urls []string
	for _, p := range freePorts(t, 2) {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	e, err := StartEmbedded(EmbeddedConfig{
		DataDir:       t.TempDir(),
		ClientURL:     urls[0],
		PeerURL:       urls[1],
		UnsafeNoFsync: true,
		StartTimeout:  30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	tlsCfg, err := e.ClientTLS().build(e.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fakeClock is a settable clock for the lease manager.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLeaseManagerRotation(t *testing.T) {
	t.Parallel()
	cli := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	clock := &fakeClock{t: time.Now()}
	m := newLeaseManager(cli.Lease)
	m.now = clock.now

	const ttl = 30 * time.Second // window 3s, lease TTL 33s
	p := policyFor(ttl)

	// A burst of concurrent acquires grants a single lease.
	var wg sync.WaitGroup
	ids := make([]clientv3.LeaseID, 50)
	for i := range ids {
		wg.Go(func() {
			id, err := m.acquire(ctx, ttl)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	first := ids[0]
	for _, id := range ids {
		if id != first {
			t.Fatalf("concurrent acquires got leases %x and %x", first, id)
		}
	}
	if ls, err := cli.Leases(ctx); err != nil || len(ls.Leases) != 1 {
		t.Fatalf("leases after a burst: %v, %v", ls, err)
	}
	if r, err := cli.TimeToLive(ctx, first); err != nil || r.GrantedTTL != p.leaseTTL {
		t.Fatalf("granted TTL: %v, %v; want %d", r, err, p.leaseTTL)
	}

	// Same bucket, just inside the window: the same lease.
	clock.advance(p.window - time.Millisecond)
	if id, err := m.acquire(ctx, ttl-time.Second); err != nil || id != first {
		t.Fatalf("inside the window: %x, %v; want %x", id, err, first)
	}
	// Another bucket: another lease.
	other, err := m.acquire(ctx, 2*ttl)
	if err != nil || other == first {
		t.Fatalf("other bucket: %x, %v", other, err)
	}
	// Past the window: a new lease; the old one is left to expire.
	clock.advance(time.Millisecond)
	second, err := m.acquire(ctx, ttl)
	if err != nil || second == first || second == other {
		t.Fatalf("after the window: %x, %v (first %x)", second, err, first)
	}
	if r, err := cli.TimeToLive(ctx, first); err != nil || r.TTL <= 0 {
		t.Fatalf("old lease revoked early: %v, %v", r, err)
	}

	// A lease revoked behind the manager's back is replaced.
	if _, err := cli.Revoke(ctx, second); err != nil {
		t.Fatal(err)
	}
	var used []clientv3.LeaseID
	err = m.withLease(ctx, ttl, func(id clientv3.LeaseID) error {
		used = append(used, id)
		_, err := cli.Put(ctx, "k", "v", clientv3.WithLease(id))
		return err
	})
	if err != nil || len(used) != 2 || used[0] != second || used[1] == second {
		t.Fatalf("withLease after revoke: used %x, err %v", used, err)
	}
}

func TestLeaseManagerWaitHonoursContext(t *testing.T) {
	t.Parallel()
	m := newLeaseManager(nil) // never reaches etcd
	b := m.bucketFor(time.Minute)
	b.sem <- struct{}{} // a grant "in progress"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.acquire(ctx, time.Minute); err != context.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	<-b.sem
}
