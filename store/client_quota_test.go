package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// TestClientQuotas: a client's own budgets inside its workspace's. One
// client (every job of it from a new agent, as an anonymous client's
// sessions are) fills its budgets of open jobs, finished jobs kept and
// their bytes, and is refused, naming the per_client quota and, for what
// finished jobs keep, when room frees; another client of the workspace
// still starts jobs and stream sessions. A job's expiry frees its
// client's room; the sweeper's cleanup leaves no client index behind.
func TestClientQuotas(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	now := time.Now()
	store.SetClock(st, func() time.Time { return now })
	q := store.Quota{PerWorkspace: 100, PerClient: 2}
	rq := store.RetainedQuota{JobsPerWorkspace: 100, JobsPerClient: 3, BytesPerClient: 1 << 20}
	agent := 0
	start := func(client string) (*store.AsyncJobHandle, error) {
		agent++
		return st.CreateJob(ctx, store.NewJob{Scope: store.Scope{WorkspaceID: "ws", AgentID: "session:" + string(rune('a'+agent))},
			ClientID: client, AgentScoped: true, OperationID: "op", MaxRuntime: time.Minute, Retention: time.Hour,
			Owned: true, Quota: q, Retained: rq})
	}
	quota := func(err error, quota, retained string) *store.QuotaError {
		t.Helper()
		var qe *store.QuotaError
		if !errors.As(err, &qe) || qe.Quota != quota || qe.Retained != retained || qe.Scope != `client "addr:10.0.0.1" of workspace "ws"` {
			t.Fatalf("want quota %s (%s) of the client, got %v", quota, retained, err)
		}
		return qe
	}
	// Open jobs: two run, the third start is refused; another client's is
	// not.
	var open []string
	for range 2 {
		j, err := start("addr:10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, j.ID)
	}
	_, err := start("addr:10.0.0.1")
	if qe := quota(err, "per_client", ""); !qe.FreesAt.IsZero() {
		t.Errorf("an open-jobs refusal says room frees at %s", qe.FreesAt)
	}
	if _, err := start("addr:10.0.0.2"); err != nil {
		t.Fatalf("another client's start: %v", err)
	}
	if _, err := st.CreateStreamSession(ctx, store.NewStreamSession{Scope: store.Scope{WorkspaceID: "ws"}, ClientID: "addr:10.0.0.1",
		OperationID: "op", Protocol: "p", Mode: "m", IdleTimeout: time.Minute, MaxLifetime: time.Hour, Quota: q}); err != nil {
		t.Fatalf("a stream session of the client (its own count): %v", err)
	}
	// Finished jobs kept: finishing frees the open budget; the fourth
	// finished job is past the kept count.
	finish := func(id string) {
		t.Helper()
		now = now.Add(time.Millisecond)
		if _, err := st.UpdateJob(ctx, id, store.JobUpdate{Status: store.JobSucceeded, Result: resultOf(10)}); err != nil {
			t.Fatal(err)
		}
	}
	first := now.Add(time.Millisecond)
	for _, id := range open {
		finish(id)
	}
	j, err := start("addr:10.0.0.1")
	if err != nil {
		t.Fatalf("a start after the open jobs finished: %v", err)
	}
	finish(j.ID)
	_, err = start("addr:10.0.0.1")
	qe := quota(err, "per_client", store.RetainedJobs)
	if want := first.Add(time.Hour).UTC(); !qe.FreesAt.Equal(want) {
		t.Errorf("room frees at %s, want %s (the oldest finished job's expiry)", qe.FreesAt, want)
	}
	if _, err := start("addr:10.0.0.2"); err != nil {
		t.Fatalf("another client's start once the first is full: %v", err)
	}
	// Bytes: a client with room in its count but not in its bytes.
	big := store.RetainedQuota{JobsPerWorkspace: 100, JobsPerClient: 100, BytesPerClient: 100 << 10}
	j, err = st.CreateJob(ctx, store.NewJob{Scope: store.Scope{WorkspaceID: "ws"}, ClientID: "addr:10.0.0.3", OperationID: "op",
		MaxRuntime: time.Minute, Retention: time.Hour, Owned: true, Retained: big})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Millisecond)
	if _, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: resultOf(120 << 10)}); err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateJob(ctx, store.NewJob{Scope: store.Scope{WorkspaceID: "ws"}, ClientID: "addr:10.0.0.3", OperationID: "op",
		MaxRuntime: time.Minute, Retention: time.Hour, Owned: true, Retained: big})
	var be *store.QuotaError
	if !errors.As(err, &be) || be.Quota != "per_client" || be.Retained != store.RetainedBytes || be.FreesAt.IsZero() {
		t.Fatalf("past the client's bytes: %v", err)
	}
	// Expiry frees the client's room, and the cleanup leaves no index.
	now = now.Add(2 * time.Hour)
	if _, err := st.CleanupExpired(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := start("addr:10.0.0.1"); err != nil {
		t.Fatalf("a start after the client's jobs expired: %v", err)
	}
}
