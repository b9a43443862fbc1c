package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// sweepLeaderLease returns the lease of the sweep-leader lock's holder:
// the oldest key under sweep-leader/ (a replica that finds the lock taken
// puts its key and takes it back), 0 when nobody holds it.
func sweepLeaderLease(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	r, err := cli.Get(context.Background(), "/crank/v1/sweep-leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(r.Kvs[0].Lease)
}

// waitFor polls cond every 50ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// When etcd ends a replica's owner lease while the replica lives on (it
// could not renew it for longer than the owner TTL), the replica notices:
// it owns nothing any more, its runners' writes fail with ErrNotOwner, any
// sweeper marks its entities failed, and the next entity it runs registers
// a new owner.
func TestOwnerLeaseLost(t *testing.T) {
	t.Parallel()
	emb, b := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 3 * time.Second})
	ctx := ctxT(t)

	job := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	old := a.OwnerID()
	lease := store.OwnerLease(a)
	if old == "" || lease == 0 || job.Owner != old {
		t.Fatalf("owner %q, lease %x, job owner %q", old, lease, job.Owner)
	}
	var rec struct {
		Lease string `json:"lease"`
	}
	r, err := store.EtcdClient(b).Get(ctx, "/crank/v1/owners/"+old)
	if err != nil || len(r.Kvs) != 1 || clientv3.LeaseID(r.Kvs[0].Lease) != lease ||
		json.Unmarshal(r.Kvs[0].Value, &rec) != nil || rec.Lease != fmt.Sprintf("%x", lease) {
		t.Fatalf("owner record: %v, %v", r, err)
	}

	if _, err := store.EtcdClient(b).Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	// The keep-alive (every third of the TTL) learns that the lease is gone.
	waitFor(t, 10*time.Second, "A gives up its owner registration", func() bool { return a.OwnerID() == "" })

	_, err = a.UpdateJob(ctx, job.ID, store.JobUpdate{Progress: json.RawMessage(`{"n":1}`)})
	wantErr(t, "progress from A after its lease ended", err, store.ErrNotOwner)
	rep, err := b.SweepOrphans(ctx, nil)
	if err != nil || rep.Failed != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	if j, err := b.GetJob(ctx, ws1a1, job.ID); err != nil || j.Status != store.JobFailed || !strings.Contains(string(j.Error), "owner_lost") {
		t.Fatalf("A's job after the sweep: %+v, %v", j, err)
	}

	next := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	if id := a.OwnerID(); id == "" || id == old || next.Owner != id || store.OwnerLease(a) == lease {
		t.Fatalf("new owner %q (old %q), job owner %q, lease %x (old %x)", id, old, next.Owner, store.OwnerLease(a), lease)
	}
	if _, err := a.UpdateJob(ctx, next.ID, store.JobUpdate{Progress: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatalf("progress under the new owner: %v", err)
	}
}

// The sweep-leader lock lives on the leader's owner lease: while the
// leader lives the others leave cleanups to it, and when it dies another
// replica takes the lock and cleans up. A key of the earlier single-key
// layout (sweep-leader, held by a replica not yet upgraded) does not stop
// them: during a rolling upgrade an old and a new leader may both clean
// up, which is safe, as every cleanup delete is a compare-and-swap.
func TestSweepLeaderMovesWithOwnerLease(t *testing.T) {
	t.Parallel()
	emb, b := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	cli := store.EtcdClient(b)
	ctx := ctxT(t)

	legacy, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/crank/v1/sweep-leader", "own_NOTUPGRADED", clientv3.WithLease(legacy.ID)); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, b, nil)
	j := newJob(t, b, nil)
	// Only B's clock says they expired long ago: A, while it leads, has
	// nothing to clean up.
	store.SetClock(b, func() time.Time { return time.Now().Add(3 * time.Hour) })
	left := func() int {
		r, err := cli.Get(ctx, "/crank/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, kv := range r.Kvs {
			if k := string(kv.Key); strings.Contains(k, s.ID) || strings.Contains(k, j.ID) {
				n++
			}
		}
		return n
	}

	cfg := store.SweeperConfig{Interval: time.Hour, CleanupInterval: 100 * time.Millisecond}
	sweeper(t, a, cfg)
	waitFor(t, 10*time.Second, "A takes the sweep-leader lock", func() bool {
		return store.OwnerLease(a) != 0 && sweepLeaderLease(t, cli) == store.OwnerLease(a)
	})
	sweeper(t, b, cfg)
	time.Sleep(time.Second) // B's cleanups find the lock taken
	if l := sweepLeaderLease(t, cli); l != store.OwnerLease(a) || store.OwnerLease(b) == 0 {
		t.Fatalf("leader lease %x, want A's %x (B's %x)", l, store.OwnerLease(a), store.OwnerLease(b))
	}
	if n := left(); n == 0 {
		t.Fatal("expired entities cleaned up while A, whose clock says they live, leads")
	}

	store.Crash(a) // its lease expires about 2s later, and its lock key with it
	waitFor(t, 15*time.Second, "B takes the lock and cleans up", func() bool {
		return sweepLeaderLease(t, cli) == store.OwnerLease(b) && left() == 0
	})
	if r, err := cli.Get(ctx, "/crank/v1/sweep-leader"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the earlier layout's key: %v, %v", r, err)
	}
}
