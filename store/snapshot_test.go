package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// A snapshot of a live store restored into a new cluster: MCP sessions
// resume, a finished job keeps its result, a running job whose replica is
// gone is adopted by a replica of the new cluster once its owner lease
// (granted again by the restore) expires, and catalogs keep their
// versions and history; the shared keys are the same, so cursors sealed
// before still open.
func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	emb, _ := storetest.Embedded(t)
	st := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: store.MinOwnerTTL})
	ctx := ctxT(t)
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a"}

	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "sess-1", ProtocolVersion: "2025-11-25", WorkspaceID: "ws", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	done, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "export", MaxRuntime: time.Hour, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateJob(ctx, done.ID, store.JobUpdate{Status: store.JobSucceeded, Result: []byte(`{"rows":3}`)}); err != nil {
		t.Fatal(err)
	}
	running, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "export", MaxRuntime: time.Hour, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	putCatalog(t, st, store.CatalogWrite{Catalog: "demo", Author: "alice", Message: "first", Document: catalogDoc("a"), Operations: 1})
	putCatalog(t, st, store.CatalogWrite{Catalog: "demo", Expect: 1, Author: "bob", Message: "second", Document: catalogDoc("a", "b"), Operations: 2})
	key, err := st.SharedKey(ctx, "cursors")
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "crank.snapshot")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.SaveSnapshot(ctx, f)
	if cerr := f.Close(); err != nil || cerr != nil || n == 0 {
		t.Fatalf("save: %d bytes, %v %v", n, err, cerr)
	}

	_, dst := storetest.Embedded(t)
	rep, err := dst.RestoreSnapshot(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored %d keys on %d leases from a %d-byte snapshot at revision %d", rep.Keys, rep.Leases, n, rep.Revision)

	s, err := dst.GetMCPSession(ctx, "sess-1")
	if err != nil || s.ProtocolVersion != "2025-11-25" {
		t.Fatalf("the MCP session after the restore: %+v, %v", s, err)
	}
	if err := dst.TouchMCPSession(ctx, "sess-1"); err != nil {
		t.Fatalf("the MCP session resumes: %v", err)
	}
	r, err := dst.GetJobResult(ctx, scope, done.ID)
	if err != nil || r.Status != store.JobSucceeded || !bytes.Equal(r.Result, []byte(`{"rows":3}`)) {
		t.Fatalf("the finished job after the restore: %+v, %v", r, err)
	}
	h, v, err := dst.GetCatalog(ctx, "demo")
	if err != nil || h.Version != 2 || h.Oldest != 1 || v.Author != "bob" || !bytes.Equal(v.Document, catalogDoc("a", "b")) {
		t.Fatalf("the catalog after the restore: %+v %+v, %v", h, v, err)
	}
	if v1, err := dst.GetCatalogVersion(ctx, "demo", 1); err != nil || v1.Message != "first" || !bytes.Equal(v1.Document, catalogDoc("a")) {
		t.Fatalf("the catalog's first version after the restore: %+v, %v", v1, err)
	}
	if k, err := dst.SharedKey(ctx, "cursors"); err != nil || !bytes.Equal(k, key) {
		t.Fatalf("the cursor key after the restore: %v", err)
	}

	// The running job's replica is not in the new cluster: once its
	// restored owner lease expires, a sweeper there adopts the job.
	adopted := make(chan string, 1)
	adopt := func(_ context.Context, o store.Orphan) error {
		if o.Job != nil {
			adopted <- o.Job.ID
		}
		return nil
	}
	waitFor(t, 30*time.Second, "the running job to be adopted in the new cluster", func() bool {
		rep, err := dst.SweepOrphans(ctx, adopt)
		return err == nil && rep.Adopted == 1
	})
	if id := <-adopted; id != running.ID {
		t.Fatalf("adopted %s, want %s", id, running.ID)
	}
	j, err := dst.GetJob(ctx, scope, running.ID)
	if err != nil || j.Status != store.JobRunning {
		t.Fatalf("the adopted job: %+v, %v", j, err)
	}

	// A file that is not a whole snapshot is refused.
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	_, fresh := storetest.Embedded(t)
	if _, err := fresh.RestoreSnapshot(ctx, path); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("a cut snapshot: %v", err)
	}
	// A restore over live state is refused.
	if _, err := dst.RestoreSnapshot(ctx, path); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "new cluster") {
		t.Fatalf("a restore over live state: %v", err)
	}
}
