package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func TestQuotas(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	q := store.Quota{PerWorkspace: 3, PerAgent: 2}
	open := func(scope store.Scope) (*store.StreamSession, error) {
		return st.CreateStreamSession(ctx, store.NewStreamSession{Scope: scope, OperationID: "op", IdleTimeout: time.Minute,
			MaxLifetime: time.Hour, Owned: true, Quota: q})
	}
	a, err := open(ws1a1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(ws1a1); err != nil {
		t.Fatal(err)
	}
	_, err = open(ws1a1)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, store.ErrQuota) || qe.Quota != "per_agent" || qe.Open != 2 ||
		!strings.Contains(err.Error(), `agent "agent-1" of workspace "ws-1"`) {
		t.Fatalf("third session of an agent: %v", err)
	}
	if _, err := open(ws1a2); err != nil {
		t.Fatal(err)
	}
	if _, err := open(ws1a2); !errors.As(err, &qe) || qe.Quota != "per_workspace" || qe.Limit != 3 {
		t.Fatalf("fourth session of the workspace: %v", err)
	}
	if _, err := open(ws2a1); err != nil { // another workspace counts apart
		t.Fatal(err)
	}
	// A finished session frees its slot.
	if _, err := st.FinishStreamSession(ctx, a.ID, store.StreamSessionEnd{Status: store.StreamSessionCompleted}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountOpen(ctx, ws1a1, false, true); err != nil || n != 1 {
		t.Fatalf("open sessions of agent-1: %d, %v", n, err)
	}
	if _, err := open(ws1a1); err != nil {
		t.Fatalf("after a finish: %v", err)
	}

	// Jobs count apart from sessions; a cancelled queued job frees its slot.
	jq := store.Quota{PerAgent: 1}
	j, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, AgentScoped: true, OperationID: "op", MaxRuntime: time.Hour, Quota: jq})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, AgentScoped: true, OperationID: "op", MaxRuntime: time.Hour, Quota: jq}); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("second job: %v", err)
	}
	if _, err := st.CancelJob(ctx, ws1a1, j.ID, "test"); err != nil {
		t.Fatal(err)
	}
	j2, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, AgentScoped: true, OperationID: "op", MaxRuntime: time.Hour, Quota: jq})
	if err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	// ListJobs: newest first, only the caller's.
	jobs, next, err := st.ListJobs(ctx, ws1a1, "", 0)
	if err != nil || len(jobs) != 2 || jobs[0].ID != j2.ID || jobs[1].ID != j.ID || next != "" {
		t.Fatalf("ListJobs: %v, %q, %v", jobs, next, err)
	}
	if jobs, _, err := st.ListJobs(ctx, ws1a2, "", 0); err != nil || len(jobs) != 0 {
		t.Fatalf("ListJobs of another agent: %v, %v", jobs, err)
	}
}
