package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// tinyQuota is the space quota of the NOSPACE tests' etcd: a few hundred
// kilobytes of records fill it.
const tinyQuota = 4 << 20

// fillUntilNoSpace writes large MCP session records (on leases of ttl)
// until etcd refuses one for lack of space, and returns that error and the
// IDs written.
func fillUntilNoSpace(t *testing.T, st *store.Etcd, prefix string, ttl time.Duration) ([]string, error) {
	t.Helper()
	ctx := ctxT(t)
	params := []byte(`{"pad":"` + strings.Repeat("x", 256<<10) + `"}`)
	var ids []string
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		err := st.PutMCPSession(ctx, store.MCPSession{ID: id, InitializeParams: params, TTL: ttl})
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	t.Fatalf("200 records of 256 KiB did not fill a %d-byte quota", tinyQuota)
	return nil, nil
}

// TestNoSpace fills an etcd with a tiny quota: writes fail with ErrNoSpace
// (counted, logged once), reads, deletes and running jobs' reads keep
// working, and RecoverSpace (compact, defragment, disarm) makes writes work
// again.
func TestNoSpace(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	_, st := storetest.EmbeddedWith(t, store.EmbeddedConfig{QuotaBytes: tinyQuota}, store.EtcdConfig{Logger: zap.New(core)})
	ctx := ctxT(t)
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a"}

	job, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Minute, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "kept", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	ids, err := fillUntilNoSpace(t, st, "fill", time.Hour)
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("filling the quota: err = %v, want ErrNoSpace", err)
	}
	if store.Retryable(err) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a NOSPACE refusal is not a transient unavailability: %v", err)
	}
	if !strings.Contains(err.Error(), "out of space (NOSPACE alarm") {
		t.Errorf("error does not say what happened: %v", err)
	}
	sp := st.SpaceStatus()
	if !sp.NoSpace || sp.Refused == 0 || sp.Since.IsZero() {
		t.Errorf("SpaceStatus = %+v, want NoSpace with a refusal counted", sp)
	}
	if raised, err := st.NoSpaceAlarm(ctx); err != nil || !raised {
		t.Errorf("NoSpaceAlarm = %v, %v; want raised", raised, err)
	}

	// Every write is refused now, small ones too, with the same error.
	if _, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Minute}); !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("CreateJob under NOSPACE: err = %v, want ErrNoSpace", err)
	}
	if _, err := st.UpdateJob(ctx, job.ID, store.JobUpdate{Status: store.JobSucceeded, Result: []byte(`{}`)}); !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("UpdateJob under NOSPACE: err = %v, want ErrNoSpace", err)
	}
	if got := st.SpaceStatus().Refused; got < 3 {
		t.Errorf("Refused = %d after three refused writes", got)
	}
	// Reads and deletes keep working.
	if got, err := st.GetJob(ctx, scope, job.ID); err != nil || got.Status != store.JobRunning {
		t.Errorf("GetJob under NOSPACE = %v, %v", got, err)
	}
	if _, err := st.GetMCPSession(ctx, "kept"); err != nil {
		t.Errorf("GetMCPSession under NOSPACE: %v", err)
	}
	if jobs, _, err := st.ListJobs(ctx, scope, "", 10); err != nil || len(jobs) != 1 {
		t.Errorf("ListJobs under NOSPACE = %d jobs, %v", len(jobs), err)
	}
	for _, id := range ids {
		if err := st.DeleteMCPSession(ctx, id); err != nil {
			t.Fatalf("DeleteMCPSession under NOSPACE: %v", err)
		}
	}
	// Freeing space is not enough: the alarm stays until disarmed.
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "small", TTL: time.Hour}); !errors.Is(err, store.ErrNoSpace) {
		t.Errorf("a write after deletes but before recovery: err = %v, want ErrNoSpace", err)
	}
	if n := logs.FilterMessageSnippet("etcd is out of space").Len(); n != 1 {
		t.Errorf("%d NOSPACE log lines for one episode, want 1", n)
	}

	rep, err := st.RecoverSpace(ctx)
	if err != nil {
		t.Fatalf("RecoverSpace: %v", err)
	}
	if rep.Disarmed != 1 || rep.Revision == 0 || rep.DBSizeAfter >= rep.DBSizeBefore {
		t.Errorf("RecoverSpace = %+v, want one alarm disarmed and a smaller database", rep)
	}
	if st.SpaceStatus().NoSpace {
		t.Error("SpaceStatus still NoSpace after recovery")
	}
	if _, err := st.UpdateJob(ctx, job.ID, store.JobUpdate{Status: store.JobSucceeded, Result: []byte(`{}`)}); err != nil {
		t.Errorf("UpdateJob after recovery: %v", err)
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "small", TTL: time.Hour}); err != nil {
		t.Errorf("PutMCPSession after recovery: %v", err)
	}
	if logs.FilterMessageSnippet("etcd space recovered").Len() != 1 {
		t.Error("no log line for the recovery")
	}
}

// TestNoSpaceRecoversBySweeper: with SweeperConfig.RecoverSpace (the
// embedded etcd's setting), a quota filled by state that expires recovers
// by itself once the state is gone.
func TestNoSpaceRecoversBySweeper(t *testing.T) {
	t.Parallel()
	_, st := storetest.EmbeddedWith(t, store.EmbeddedConfig{QuotaBytes: tinyQuota}, store.EtcdConfig{})
	ctx := ctxT(t)
	runRecoverySweeper(t, st)

	if _, err := fillUntilNoSpace(t, st, "brief", 2*time.Second); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("filling the quota: err = %v, want ErrNoSpace", err)
	}
	// The records expire on their leases (etcd deletes them even under
	// the alarm); the sweeper then compacts, defragments and disarms.
	waitForWrites(t, "the filling state expired", func() error {
		return st.PutMCPSession(ctx, store.MCPSession{ID: "after", TTL: time.Hour})
	})
	if st.SpaceStatus().NoSpace {
		t.Error("SpaceStatus still NoSpace after a write succeeded")
	}
}

// runRecoverySweeper runs st's sweeper with space recovery, as the
// embedded etcd's, every 200ms until the test ends.
func runRecoverySweeper(t *testing.T, st *store.Etcd) {
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.RunSweeper(sctx, store.SweeperConfig{RecoverSpace: true, SpaceRecoveryInterval: 200 * time.Millisecond})
	}()
	t.Cleanup(func() { stop(); <-done })
}

// waitForWrites retries write until etcd accepts it, failing the test on
// any other error than NOSPACE and when 20s pass after since.
func waitForWrites(t *testing.T, since string, write func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := write()
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrNoSpace) {
			t.Fatalf("write while recovering: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still refused 20s after %s: %v", since, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNoSpaceShedsRetained: a quota filled by state that is live for an
// hour — SSE event logs and finished jobs with their results, no
// retention quota in the way — recovers anyway: the space recovery drops
// the oldest of it (the event logs first, then the oldest jobs, which
// read as evicted by it) until writes fit again, and keeps the newest.
func TestNoSpaceShedsRetained(t *testing.T) {
	t.Parallel()
	_, st := storetest.EmbeddedWith(t, store.EmbeddedConfig{QuotaBytes: tinyQuota}, store.EtcdConfig{})
	ctx := ctxT(t)
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a"}
	lim := store.EventLimits{TTL: time.Hour}
	for i := range 3 {
		if _, err := st.AppendEvents(ctx, "sess", fmt.Sprint("s", i), 0, [][]byte{[]byte(strings.Repeat("e", 200<<10))}, lim); err != nil {
			t.Fatal(err)
		}
	}
	var finished []string
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("100 results of 256 KiB did not fill the quota")
		}
		j, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Hour, Retention: time.Hour, Owned: true})
		if err == nil {
			_, err = st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: resultOf(256 << 10)})
		}
		if errors.Is(err, store.ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		finished = append(finished, j.ID)
	}

	runRecoverySweeper(t, st)
	waitForWrites(t, "the quota filled with live state", func() error {
		_, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Hour})
		return err
	})
	if _, err := st.EventsAfter(ctx, "sess", "s0", 0); !errors.Is(err, store.ErrEventsPurged) {
		t.Errorf("the oldest event log after the recovery: %v, want it dropped", err)
	}
	var ee *store.EvictedError
	_, err := st.GetJob(ctx, scope, finished[0])
	for deadline := time.Now().Add(5 * time.Second); !errors.As(err, &ee) && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, err = st.GetJob(ctx, scope, finished[0]) // the markers follow the disarm
	}
	if !errors.As(err, &ee) || ee.Reason != store.EvictedSpaceRecovery {
		t.Errorf("the oldest finished job after the recovery: %v, want evicted by the space recovery", err)
	}
	if j, err := st.GetJobResult(ctx, scope, finished[len(finished)-1]); err != nil || len(j.Result) == 0 {
		t.Errorf("the newest finished job after the recovery: %v", err)
	}
}
