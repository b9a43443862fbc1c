package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// resultOf is a job result of about n bytes.
func resultOf(n int) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", n)})
	return b
}

// TestRetainedJobs: what finished jobs keep. Past its count an agent's
// oldest finished jobs are evicted — its own only, each read then says
// so, another agent sees a plain "not found" — while the bytes its jobs
// wrote stay counted (evicted ones too) and a start past them is refused,
// as is one past the workspace's count; expiry frees both.
func TestRetainedJobs(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	now := time.Now()
	store.SetClock(st, func() time.Time { return now })
	q := store.RetainedQuota{JobsPerAgent: 2, BytesPerAgent: 300 << 10}
	start := func(scope store.Scope, q store.RetainedQuota) (*store.AsyncJobHandle, error) {
		return st.CreateJob(ctx, store.NewJob{Scope: scope, AgentScoped: true, OperationID: "op", MaxRuntime: time.Minute,
			Retention: time.Minute, Owned: true, Retained: q})
	}
	finish := func(scope store.Scope, n int) string {
		t.Helper()
		j, err := start(scope, q)
		if err != nil {
			t.Fatalf("start a job of %s: %v", scope.AgentID, err)
		}
		now = now.Add(time.Millisecond) // finish times order the jobs
		if _, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: resultOf(n)}); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}

	other := finish(ws1a2, 10)
	a1, a2, a3 := finish(ws1a1, 10), finish(ws1a1, 10), finish(ws1a1, 10)
	var ee *store.EvictedError
	if _, err := st.GetJob(ctx, ws1a1, a1); !errors.As(err, &ee) || !errors.Is(err, store.ErrNotFound) ||
		ee.Reason != store.EvictedAgentQuota || ee.Limit != 2 || ee.ID != a1 {
		t.Fatalf("the agent's oldest job past its count: %v", err)
	}
	if _, err := st.GetJobResult(ctx, ws1a1, a1); !errors.As(err, &ee) {
		t.Errorf("its result: %v", err)
	}
	if _, err := st.CancelJob(ctx, ws1a1, a1, "x"); !errors.As(err, &ee) {
		t.Errorf("cancelling it: %v", err)
	}
	if _, err := st.GetJob(ctx, ws1a2, a1); errors.As(err, &ee) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another agent reading it: %v, want a plain not found", err)
	}
	for _, id := range []string{a2, a3} {
		if j, err := st.GetJobResult(ctx, ws1a1, id); err != nil || len(j.Result) == 0 {
			t.Errorf("the agent's newer job %s: %v", id, err)
		}
	}
	if j, err := st.GetJobResult(ctx, ws1a2, other); err != nil || len(j.Result) == 0 {
		t.Errorf("another agent's job after the eviction: %v", err)
	}
	if jobs, _, err := st.ListJobs(ctx, ws1a1, "", 0); err != nil || len(jobs) != 2 {
		t.Errorf("ListJobs after the eviction: %d jobs, %v", len(jobs), err)
	}

	// Bytes: two results of 200 KiB take agent-1 past 300 KiB, evicted
	// or not; its next start is refused, agent-2's is not.
	finish(ws1a1, 200<<10)
	finish(ws1a1, 200<<10)
	_, err := start(ws1a1, q)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, store.ErrQuota) || qe.Retained != store.RetainedBytes || qe.Quota != "per_agent" ||
		qe.Limit != 300<<10 || qe.Open < 400<<10 || !strings.Contains(err.Error(), `agent "agent-1" of workspace "ws-1"`) {
		t.Fatalf("a start past the agent's bytes: %v", err)
	}
	if _, err := start(ws1a2, q); err != nil {
		t.Errorf("another agent's start: %v", err)
	}
	// The workspace's count refuses, it does not evict.
	if _, err := start(ws1a2, store.RetainedQuota{JobsPerWorkspace: 3}); !errors.As(err, &qe) ||
		qe.Retained != store.RetainedJobs || qe.Quota != "per_workspace" || qe.Open != 3 {
		t.Errorf("a start past the workspace's count: %v", err)
	}
	if _, err := start(ws2a1, store.RetainedQuota{JobsPerWorkspace: 3}); err != nil {
		t.Errorf("a start in another workspace: %v", err)
	}
	if _, err := start(ws1a1, store.RetainedQuota{JobsPerAgent: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a negative quota: %v", err)
	}

	// Past their retention the jobs, the markers and the bytes go.
	now = now.Add(3 * time.Minute)
	if _, err := st.CleanupExpired(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetJob(ctx, ws1a1, a1); errors.As(err, &ee) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an evicted job past its retention: %v", err)
	}
	if _, err := start(ws1a1, q); err != nil {
		t.Errorf("a start once the results expired: %v", err)
	}
}
