package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMCPSessionPutGetTouchDelete(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if _, err := st.GetMCPSession(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get absent: err = %v, want ErrNotFound", err)
	}
	if err := st.TouchMCPSession(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch absent: err = %v, want ErrNotFound", err)
	}

	created := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	want := store.MCPSession{
		ID:              "s-1",
		ProtocolVersion: "2025-11-25",
		ClientName:      "inspector",
		ClientVersion:   "1.2.3",
		CreatedAt:       created,
		TTL:             90 * time.Second,
	}
	if err := st.PutMCPSession(ctx, want); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, err := st.GetMCPSession(ctx, "s-1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !got.CreatedAt.Equal(created) {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, created)
	}
	got.CreatedAt = want.CreatedAt
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("Get = %+v, want %+v", *got, want)
	}

	// Overwrite.
	want.ClientVersion = "1.2.4"
	if err := st.PutMCPSession(ctx, want); err != nil {
		t.Fatalf("Put again: %v", err)
	}
	if got, err := st.GetMCPSession(ctx, "s-1"); err != nil || got.ClientVersion != "1.2.4" {
		t.Fatalf("Get after overwrite = %+v, %v", got, err)
	}

	if err := st.TouchMCPSession(ctx, "s-1"); err != nil {
		t.Fatalf("Touch: %v", err)
	}
	if got, err := st.GetMCPSession(ctx, "s-1"); err != nil || got.ClientVersion != "1.2.4" {
		t.Fatalf("Get after touch = %+v, %v", got, err)
	}

	if err := st.DeleteMCPSession(ctx, "s-1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := st.DeleteMCPSession(ctx, "s-1"); err != nil {
		t.Fatalf("Delete again: %v", err)
	}
	if _, err := st.GetMCPSession(ctx, "s-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get deleted: err = %v, want ErrNotFound", err)
	}
	if err := st.TouchMCPSession(ctx, "s-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch deleted: err = %v, want ErrNotFound", err)
	}

	// CreatedAt defaults to now.
	before := time.Now()
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "s-2", TTL: time.Minute}); err != nil {
		t.Fatalf("Put s-2: %v", err)
	}
	if got, err := st.GetMCPSession(ctx, "s-2"); err != nil || got.CreatedAt.Before(before.Add(-time.Second)) {
		t.Fatalf("Get s-2 = %+v, %v", got, err)
	}
}

func TestMCPSessionValidation(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	for _, s := range []store.MCPSession{
		{ID: "", TTL: time.Minute},
		{ID: strings.Repeat("x", 513), TTL: time.Minute},
		{ID: "ok", TTL: 0},
		{ID: "ok", TTL: -time.Second},
	} {
		if err := st.PutMCPSession(ctx, s); err == nil {
			t.Errorf("Put(ID len %d, TTL %s) succeeded, want error", len(s.ID), s.TTL)
		}
	}
	if _, err := st.GetMCPSession(ctx, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get empty ID: %v", err)
	}
	if err := st.DeleteMCPSession(ctx, ""); err != nil {
		t.Errorf("Delete empty ID: %v", err)
	}
}

func TestKeyLayoutAndPrefix(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	// IDs are escaped: "/" cannot reach into another namespace.
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "a/../b c", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	// (The first key is the live-state listing's index entry, named by the
	// ID's digest.)
	if len(keys) != 2 || keys[0] != "/crank/v1/mcp-session-index//"+store.MCPSessionDigest("a/../b c") || keys[1] != "/crank/v1/mcp-sessions/a%2F..%2Fb%20c" {
		t.Fatalf("keys = %q", keys)
	}
	if got, err := st.GetMCPSession(ctx, "a/../b c"); err != nil || got.ID != "a/../b c" {
		t.Fatalf("Get escaped ID = %+v, %v", got, err)
	}

	// Stores with different prefixes on one client do not see each other.
	other := store.NewEtcdFromClient(cli, "/other")
	if other.Prefix() != "/other/" {
		t.Errorf("Prefix = %q", other.Prefix())
	}
	if _, err := other.GetMCPSession(ctx, "a/../b c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other prefix sees the session: %v", err)
	}
	if err := other.PutMCPSession(ctx, store.MCPSession{ID: "x", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetMCPSession(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("default prefix sees other's session: %v", err)
	}
	if r, err := cli.Get(ctx, "/other/mcp-sessions/x"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("raw get under /other/: %v, %v", r, err)
	}
	// Closing a store made from a client leaves the client open.
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping after closing the borrowing store: %v", err)
	}
}

// waitNotFound polls until the session is gone and returns how long after
// start it was first seen gone.
func waitNotFound(t *testing.T, st *store.Etcd, id string, start time.Time, deadline time.Duration) time.Duration {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := st.GetMCPSession(ctx, id)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			return time.Since(start)
		}
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		if time.Since(start) > deadline {
			t.Fatalf("session %s still present %s after put", id, time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMCPSessionExpires(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	const ttl = 2 * time.Second
	start := time.Now()
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "short", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "long", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gone := waitNotFound(t, st, "short", start, 20*time.Second)
	// The lower bound is guaranteed (the upper one depends on scheduling).
	if gone < ttl {
		t.Errorf("session expired after %s, before its TTL %s", gone, ttl)
	}
	t.Logf("2s session observed gone after %s", gone)
	if _, err := st.GetMCPSession(ctx, "long"); err != nil {
		t.Errorf("long-lived session: %v", err)
	}
}

func TestTouchExtendsExpiry(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	const ttl = 2 * time.Second // lease TTL 3s, window 1s
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "t", TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// Keep it alive well past its lease TTL.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		time.Sleep(400 * time.Millisecond)
		if err := st.TouchMCPSession(ctx, "t"); err != nil {
			t.Fatalf("Touch: %v", err)
		}
	}
	lastTouch := time.Now()
	if _, err := st.GetMCPSession(ctx, "t"); err != nil {
		t.Fatalf("Get after touching: %v", err)
	}
	if gone := waitNotFound(t, st, "t", lastTouch, 20*time.Second); gone < ttl-500*time.Millisecond {
		// lastTouch is taken after the last Touch returned, hence the slack.
		t.Errorf("expired %s after the last touch, TTL %s", gone, ttl)
	}
}

func TestTouchWithinWindowDoesNotWrite(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "w", TTL: 5 * time.Minute}); err != nil { // window 30s
		t.Fatal(err)
	}
	before, err := cli.Get(ctx, "/crank/v1/mcp-sessions/w")
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", before, err)
	}
	for range 5 {
		if err := st.TouchMCPSession(ctx, "w"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := cli.Get(ctx, "/crank/v1/mcp-sessions/w")
	if err != nil || len(after.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", after, err)
	}
	if a, b := after.Kvs[0].ModRevision, before.Kvs[0].ModRevision; a != b {
		t.Errorf("touch within the lease window wrote: mod revision %d -> %d", b, a)
	}
}

func TestLeaseSharing(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	put := func(prefix string, n int, ttl time.Duration) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				errs <- st.PutMCPSession(ctx, store.MCPSession{ID: fmt.Sprintf("%s-%d", prefix, i), TTL: ttl})
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// 30s and 29.5s share a bucket (window 3s); 60s is another bucket.
	put("a", 100, 30*time.Second)
	put("b", 50, 29500*time.Millisecond)
	put("c", 50, time.Minute)

	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One lease per bucket; allow one rotation per bucket on a slow machine.
	if n := len(leases.Leases); n < 2 || n > 4 {
		t.Fatalf("200 sessions in 2 TTL buckets use %d leases, want 2 (at most 4)", n)
	}

	resp, err := cli.Get(ctx, "/crank/v1/mcp-sessions/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 200 {
		t.Fatalf("%d sessions stored, want 200", len(resp.Kvs))
	}
	byPrefix := map[string]map[int64]bool{"a": {}, "b": {}, "c": {}}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			t.Fatalf("%s has no lease", kv.Key)
		}
		p := strings.TrimPrefix(string(kv.Key), "/crank/v1/mcp-sessions/")[:1]
		byPrefix[p][kv.Lease] = true
	}
	for p, ls := range byPrefix {
		if len(ls) > 2 {
			t.Errorf("sessions %s-* are on %d leases", p, len(ls))
		}
	}
	for id := range byPrefix["c"] {
		if byPrefix["a"][id] {
			t.Errorf("30s and 60s sessions share lease %x", id)
		}
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil {
			t.Fatal(err)
		}
		if ttl.GrantedTTL != 66 { // 60s rounded to the 6s window + 6s
			t.Errorf("60s bucket lease granted TTL %ds, want 66s", ttl.GrantedTTL)
		}
	}
}

func TestLeaseRevokedIsReplaced(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "r1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r, err := cli.Get(ctx, "/crank/v1/mcp-sessions/r1")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", r, err)
	}
	old := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetMCPSession(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after revoke: %v", err)
	}
	// The manager still holds the revoked lease; the put must recover.
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "r2", TTL: time.Minute}); err != nil {
		t.Fatalf("Put after revoke: %v", err)
	}
	r, err = cli.Get(ctx, "/crank/v1/mcp-sessions/r2")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("raw get: %v %v", r, err)
	}
	if clientv3.LeaseID(r.Kvs[0].Lease) == old {
		t.Fatal("r2 stored on the revoked lease")
	}

	// Revoke the replacement too (the current 1m bucket lease): its session
	// is gone for Touch, and the next put in that bucket recovers again.
	// r3 lives in another bucket and is unaffected.
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "r3", TTL: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	cur := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if err := st.TouchMCPSession(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch of a session whose lease was revoked: %v", err)
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "r4", TTL: time.Minute}); err != nil {
		t.Fatalf("Put after second revoke: %v", err)
	}
	if err := st.TouchMCPSession(ctx, "r3"); err != nil {
		t.Fatalf("Touch r3: %v", err)
	}
}

func TestConcurrentOperations(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				id := fmt.Sprintf("c-%d", (w+i)%5)
				var err error
				switch i % 4 {
				case 0:
					err = st.PutMCPSession(ctx, store.MCPSession{ID: id, TTL: time.Duration(10+w) * time.Second})
				case 1:
					_, err = st.GetMCPSession(ctx, id)
				case 2:
					err = st.TouchMCPSession(ctx, id)
				case 3:
					err = st.DeleteMCPSession(ctx, id)
				}
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
