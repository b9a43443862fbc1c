package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// The members of a fleet-wide limit are the replicas that joined it: a
// watch sees each join and leave, and a dead replica's membership goes
// with its owner lease. Joining again is free (no write).
func TestLimitMembers(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	ctx := ctxT(t)
	if err := a.JoinLimit(ctx, "a/b"); err == nil || !strings.Contains(err.Error(), "without /") {
		t.Fatalf("a bad id: %v", err)
	}
	var mu sync.Mutex
	var last map[string][]string
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- a.WatchLimitMembers(wctx, func(m map[string][]string) {
			mu.Lock()
			last = m
			mu.Unlock()
		})
	}()
	members := func(id string, want ...string) {
		t.Helper()
		slices.Sort(want)
		waitFor(t, 15*time.Second, "members "+strings.Join(want, ","), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return last != nil && slices.Equal(last[id], want)
		})
	}
	for _, e := range []*store.Etcd{a, b} {
		if err := e.JoinLimit(ctx, "stripe"); err != nil {
			t.Fatal(err)
		}
	}
	members("stripe", a.OwnerID(), b.OwnerID())
	rev := func() int64 {
		rev, err := a.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	before := rev()
	for range 5 {
		if err := a.JoinLimit(ctx, "stripe"); err != nil {
			t.Fatal(err)
		}
	}
	if after := rev(); after != before {
		t.Errorf("joining again wrote to etcd: revision %d → %d", before, after)
	}
	if err := a.LeaveLimit(ctx, "stripe"); err != nil {
		t.Fatal(err)
	}
	members("stripe", b.OwnerID())
	if err := a.JoinLimit(ctx, "stripe"); err != nil {
		t.Fatal(err)
	}
	members("stripe", a.OwnerID(), b.OwnerID())
	store.Crash(b) // its owner lease expires about 2s later, and its membership with it
	members("stripe", a.OwnerID())
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the watch ended with %v", err)
	}
}
