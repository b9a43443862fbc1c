package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// Stop and cancel requests made through one Etcd reach another Etcd's
// single signal watch: pending ones first, then new ones; a finished
// entity's request is gone.
func TestWatchSignals(t *testing.T) {
	t.Parallel()
	emb, runner := storetest.Embedded(t)
	client := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)

	newOwned := func() *store.StreamSession {
		return newSession(t, runner, func(ns *store.NewStreamSession) { ns.Owned = true })
	}
	pending := newOwned()
	if _, err := client.CloseStreamSession(ctx, ws1a1, pending.ID, "before the watch"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs, err := runner.WatchSignals(wctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() store.Signal {
		t.Helper()
		select {
		case s := <-sigs:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no signal")
			return store.Signal{}
		}
	}
	if s := next(); s != (store.Signal{ID: pending.ID}) {
		t.Fatalf("pending signal: %+v", s)
	}

	later := newOwned()
	if _, err := client.CloseStreamSession(ctx, ws1a1, later.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if s := next(); s != (store.Signal{ID: later.ID}) {
		t.Fatalf("stop signal: %+v", s)
	}
	job, err := runner.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "op", MaxRuntime: time.Hour, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CancelJob(ctx, ws1a1, job.ID, "cancel"); err != nil {
		t.Fatal(err)
	}
	if s := next(); s != (store.Signal{Job: true, ID: job.ID}) {
		t.Fatalf("cancel signal: %+v", s)
	}
	// An unowned session stops at once: there is no runner to signal.
	free := newSession(t, runner, nil)
	if _, err := client.CloseStreamSession(ctx, ws1a1, free.ID, "stop"); err != nil {
		t.Fatal(err)
	}

	// Finishing removes the requests: a new watch lists none of them.
	for _, id := range []string{pending.ID, later.ID} {
		if _, err := runner.FinishStreamSession(ctx, id, store.StreamSessionEnd{Status: store.StreamSessionStopped}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := runner.UpdateJob(ctx, job.ID, store.JobUpdate{Status: store.JobCanceled}); err != nil {
		t.Fatal(err)
	}
	again, err := runner.WatchSignals(wctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-again:
		t.Fatalf("a finished entity's signal is still pending: %+v", s)
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case s := <-sigs:
		t.Fatalf("unexpected signal: %+v", s)
	default:
	}
}
