package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// etcd stops while traffic runs: every operation fails fast with a
// retryable ErrUnavailable (none hangs, none fails otherwise), and once
// etcd is back the same Etcd serves again on its own — reads, writes,
// watches and the owner registration.
func TestEtcdStopStartDuringTraffic(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	const opTimeout = time.Second
	ctx := ctxT(t)
	st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: srv.Endpoints(), TLS: srv.TLS(), OpTimeout: opTimeout, OwnerTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = true })
	j := newJob(t, st, func(nj *store.NewJob) { nj.Owned = true })
	owner := st.OwnerID()
	jw, err := st.WatchJob(ctx, ws1a1, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job.Status == store.JobRunning })

	var (
		mu          sync.Mutex
		okCount     int
		unavailable int
		slowest     time.Duration
		other       []error
		down        atomic.Bool
		downOK      atomic.Int64 // successes while down: must be none
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				octx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				start := time.Now()
				var err error
				switch (w + i) % 4 {
				case 0:
					_, err = st.GetStreamSession(octx, ws1a1, s.ID)
				case 1:
					_, err = st.PollStreamSession(octx, ws1a1, s.ID, store.PollRequest{})
				case 2:
					_, err = st.AppendStreamSessionItems(octx, s.ID, store.Append{Items: items("t")})
					if errors.Is(err, store.ErrBufferFull) {
						err = nil
					}
				case 3:
					_, err = st.UpdateJob(octx, j.ID, store.JobUpdate{})
				}
				took := time.Since(start)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					okCount++
					if down.Load() {
						downOK.Add(1)
					}
				case errors.Is(err, store.ErrUnavailable):
					unavailable++
					slowest = max(slowest, took)
					if !store.Retryable(err) {
						other = append(other, err)
					}
				default:
					other = append(other, err)
				}
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}

	time.Sleep(500 * time.Millisecond)
	down.Store(true)
	t0 := time.Now()
	srv.Stop()
	stoppedAt := time.Now()
	t.Logf("etcd stopped in %s", stoppedAt.Sub(t0))
	time.Sleep(time.Second) // stopping took a while already (etcd drains watch streams)
	down.Store(false)
	t0 = time.Now()
	srv.Start()
	restarted := time.Now()
	t.Logf("etcd restarted in %s", restarted.Sub(t0))

	// Recovery is automatic: the same Etcd serves again.
	var recovered time.Duration
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		octx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := st.GetJob(octx, ws1a1, j.ID)
		cancel()
		if err == nil {
			recovered = time.Since(restarted)
			break
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("after restart: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recovered 20s after etcd came back: %v", err)
		}
	}
	time.Sleep(300 * time.Millisecond) // some traffic after recovery
	close(stop)
	wg.Wait()

	t.Logf("outage of %s: %d ok, %d unavailable (slowest failure %s, op timeout %s); recovered %s after restart",
		restarted.Sub(stoppedAt), okCount, unavailable, slowest, opTimeout, recovered)
	for _, err := range other {
		t.Errorf("unexpected error during the outage: %v", err)
	}
	if unavailable == 0 {
		t.Error("no operation failed while etcd was down")
	}
	// Fail fast: no operation waited much beyond the operation timeout
	// (the generous slack absorbs a loaded CI machine).
	if slowest > opTimeout+5*time.Second {
		t.Errorf("slowest failure took %s with op timeout %s", slowest, opTimeout)
	}
	if n := downOK.Load(); n > 3 {
		// Operations already in flight when etcd stopped may still
		// complete; a steady stream of successes would be wrong.
		t.Errorf("%d operations succeeded while etcd was down", n)
	}

	// The watch survived the outage, and the owner registration too (etcd
	// renews leases on restart).
	if _, err := st.CancelJob(ctx, ws1a1, j.ID, "after the outage"); err != nil {
		t.Fatal(err)
	}
	nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job != nil && ev.Job.Status == store.JobCanceling })
	if st.OwnerID() != owner {
		t.Errorf("owner registration changed across a short outage: %s -> %s", owner, st.OwnerID())
	}
	if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("after")}); err != nil && !errors.Is(err, store.ErrBufferFull) {
		t.Fatalf("runner write after the outage: %v", err)
	}
}

// Operations on an Etcd whose etcd is gone fail with ErrUnavailable within
// the operation timeout, and MCP session calls do too.
func TestUnavailableFailsFast(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	ctx := ctxT(t)
	st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: srv.Endpoints(), TLS: srv.TLS(), OpTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s := newSession(t, st, nil)
	srv.Stop()

	for name, op := range map[string]func(context.Context) error{
		"get session": func(ctx context.Context) error { _, err := st.GetStreamSession(ctx, ws1a1, s.ID); return err },
		"create session": func(ctx context.Context) error {
			_, err := st.CreateStreamSession(ctx, store.NewStreamSession{Scope: ws1a1, OperationID: "x", IdleTimeout: time.Minute, MaxLifetime: time.Hour})
			return err
		},
		"create job": func(ctx context.Context) error {
			_, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "x", MaxRuntime: time.Minute, Owned: true})
			return err
		},
		"put MCP": func(ctx context.Context) error {
			return st.PutMCPSession(ctx, store.MCPSession{ID: "m", TTL: time.Minute})
		},
		"get MCP": func(ctx context.Context) error { _, err := st.GetMCPSession(ctx, "m"); return err },
		"sweep":   func(ctx context.Context) error { _, err := st.SweepOrphans(ctx, nil); return err },
	} {
		start := time.Now()
		err := op(context.Background()) // no deadline of its own
		took := time.Since(start)
		if !errors.Is(err, store.ErrUnavailable) || !store.Retryable(err) {
			t.Errorf("%s: err = %v, want ErrUnavailable", name, err)
		}
		var ue *store.UnavailableError
		if !errors.As(err, &ue) || ue.Op == "" {
			t.Errorf("%s: no UnavailableError naming the operation: %v", name, err)
		}
		if took > 5*time.Second {
			t.Errorf("%s: failed after %s, op timeout 500ms", name, took)
		}
		t.Logf("%s: %s: %v", name, took, err)
	}
	// The caller's own cancellation is not reported as unavailability.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.GetStreamSession(cctx, ws1a1, s.ID); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("canceled caller: %v", err)
	}
}
