package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A grant is replaced only at the revision read; its refresh lock is held
// by one taker at a time; a consent moves on from pending once.
func TestUpstreamGrants(t *testing.T) {
	t.Parallel()
	_, e := storetest.Embedded(t)
	ctx := context.Background()
	if _, err := e.GetUpstreamGrant(ctx, "ws", "notes", "user:alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("absent grant: %v", err)
	}
	g, err := e.PutUpstreamGrant(ctx, store.UpstreamGrant{WorkspaceID: "ws", Upstream: "notes", User: "user:alice",
		Sealed: []byte(`{"v":1}`), Scope: "notes.read", Expires: time.Now().Add(time.Hour)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutUpstreamGrant(ctx, *g, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a second first grant: %v", err)
	}
	g2, err := e.PutUpstreamGrant(ctx, *g, g.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutUpstreamGrant(ctx, *g, g.Revision); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a replacement of a stale revision: %v", err)
	}
	if _, err := e.PutUpstreamGrant(ctx, store.UpstreamGrant{WorkspaceID: "ws", Upstream: "notes", User: "user:bob", Sealed: []byte("x")}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutUpstreamGrant(ctx, store.UpstreamGrant{WorkspaceID: "ws", Upstream: "files", User: "user:bob", Sealed: []byte("x")}, 0); err != nil {
		t.Fatal(err)
	}
	mine, err := e.ListUpstreamGrants(ctx, "ws", "user:bob")
	if err != nil || len(mine) != 2 || mine[0].Upstream != "files" {
		t.Fatalf("bob's grants: %v %+v", err, mine)
	}
	counts, err := e.CountUpstreamGrants(ctx, "ws")
	if err != nil || counts["notes"] != 2 || counts["files"] != 1 {
		t.Fatalf("counts: %v %v", err, counts)
	}
	unlock, ok, err := e.LockUpstreamGrant(ctx, "ws", "notes", "user:alice", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	if _, ok, _ := e.LockUpstreamGrant(ctx, "ws", "notes", "user:alice", 10*time.Second); ok {
		t.Error("a second refresh took the lock")
	}
	unlock()
	if u, ok, _ := e.LockUpstreamGrant(ctx, "ws", "notes", "user:alice", 10*time.Second); !ok {
		t.Error("the lock was not released")
	} else {
		u()
	}
	if prev, err := e.DeleteUpstreamGrant(ctx, "ws", "notes", "user:alice", g2.Revision); err != nil || prev.User != "user:alice" {
		t.Fatalf("delete: %v %+v", err, prev)
	}

	c, err := e.CreateUpstreamConsent(ctx, store.UpstreamConsent{WorkspaceID: "ws", Upstream: "notes", User: "user:alice",
		Call: "c", RedirectURI: "http://127.0.0.1/mcp/oauth/callback", Sealed: []byte("v"), ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.GetUpstreamConsent(ctx, c.ID)
	if err != nil || got.Status != store.ConsentPending || got.User != "user:alice" {
		t.Fatalf("consent: %v %+v", err, got)
	}
	taken, err := e.SetUpstreamConsent(ctx, got, store.ConsentTaken, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetUpstreamConsent(ctx, got, store.ConsentTaken, ""); !errors.Is(err, store.ErrConsentUsed) {
		t.Errorf("a replayed take: %v", err)
	}
	if _, err := e.SetUpstreamConsent(ctx, taken, store.ConsentDone, ""); err != nil {
		t.Error(err)
	}
	if _, err := e.GetUpstreamConsent(ctx, "uc_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a made-up consent: %v", err)
	}
}
