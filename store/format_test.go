package store_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func TestRecordFormat(t *testing.T) {
	t.Parallel()
	for val, want := range map[string]int{
		`{"id":"x"}`:       1,
		`{}`:               1,
		`{"v":2,"id":"x"}`: 2,
		`{"v":2}`:          2,
		`{"v":17,"a":1}`:   17,
		`{"v":0,"a":1}`:    0,
		`{"v":"2","a":1}`:  0,
		`{"v":-1}`:         0,
	} {
		if got := store.RecordFormat([]byte(val)); got != want {
			t.Errorf("RecordFormat(%s) = %d, want %d", val, got, want)
		}
	}
}

// raw reads the value stored at key (under st's prefix).
func raw(t *testing.T, st *store.Etcd, key string) []byte {
	t.Helper()
	resp, err := store.EtcdClient(st).Get(ctxT(t), st.Prefix()+key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value
}

func putRaw(t *testing.T, st *store.Etcd, key string, val []byte, opts ...clientv3.OpOption) {
	t.Helper()
	if _, err := store.EtcdClient(st).Put(ctxT(t), st.Prefix()+key, string(val), opts...); err != nil {
		t.Fatal(err)
	}
}

// asFormat1 is a format-2 record as the previous release wrote it: the
// same fields without the leading "v".
func asFormat1(t *testing.T, val []byte) []byte {
	t.Helper()
	out, ok := bytes.CutPrefix(val, []byte(`{"v":2,`))
	if !ok {
		t.Fatalf("not a format-2 record: %s", val)
	}
	return append([]byte("{"), out...)
}

// A record the previous release wrote (format 1: no "v") reads as one
// this release wrote; one of a format newer than this release reads is
// an error naming both formats, never a record acted on.
func TestReadsPreviousFormat(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	waitFor(t, 10*time.Second, "the fleet of one to write format 2", func() bool { return st.WriteFormat() == store.FormatVersion })

	scope := store.Scope{WorkspaceID: "ws", AgentID: "a"}
	j, err := st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "sess-1", ProtocolVersion: "2025-06-18", WorkspaceID: "ws", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	putCatalog(t, st, store.CatalogWrite{Catalog: "demo", Author: "admin", Document: catalogDoc("a"), Operations: 1})

	keys := []string{"jobs/" + j.ID, "mcp-sessions/sess-1", "catalogs/demo", "catalog-versions/demo/00000000000000000001"}
	for _, k := range keys {
		v2 := raw(t, st, k)
		if store.RecordFormat(v2) != 2 {
			t.Fatalf("%s: written as format %d: %s", k, store.RecordFormat(v2), v2)
		}
		resp, _ := store.EtcdClient(st).Get(ctx, st.Prefix()+k)
		putRaw(t, st, k, asFormat1(t, v2), clientv3.WithLease(clientv3.LeaseID(resp.Kvs[0].Lease)))
	}
	got, err := st.GetJob(ctx, scope, j.ID)
	if err != nil || got.ID != j.ID || got.OperationID != "op" || got.Status != j.Status {
		t.Fatalf("format-1 job: %+v, %v", got, err)
	}
	s, err := st.GetMCPSession(ctx, "sess-1")
	if err != nil || s.ProtocolVersion != "2025-06-18" || s.WorkspaceID != "ws" {
		t.Fatalf("format-1 MCP session: %+v, %v", s, err)
	}
	h, cv, err := st.GetCatalog(ctx, "demo")
	if err != nil || h.Version != 1 || h.Author != "admin" || cv.Version != 1 || !bytes.Equal(cv.Document, catalogDoc("a")) {
		t.Fatalf("format-1 catalog: %+v %+v, %v", h, cv, err)
	}
	vs, _, err := st.ListCatalogVersions(ctx, "demo", 0, 10)
	if err != nil || len(vs) != 1 || vs[0].Version != 1 {
		t.Fatalf("format-1 catalog versions: %+v, %v", vs, err)
	}
	// A write moves the record to the format the fleet reads.
	if _, err := st.CancelJob(ctx, scope, j.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if f := store.RecordFormat(raw(t, st, "jobs/"+j.ID)); f != 2 {
		t.Fatalf("the job rewritten as format %d", f)
	}

	// A record of a later release's format.
	putRaw(t, st, "mcp-sessions/sess-2", []byte(`{"v":3,"id":"sess-2","ttl_ms":60000}`))
	if _, err := st.GetMCPSession(ctx, "sess-2"); err == nil || !strings.Contains(err.Error(), "format 3, newer than this release reads (1-2)") {
		t.Fatalf("format-3 record: %v", err)
	}
}

// While a replica of the previous release (an owner record without
// "reads") lives, every replica writes format 1, which it reads; once it
// is gone the fleet moves up to format 2, and down again when one comes
// back (a rollback).
func TestWriteFormatFollowsOldestReplica(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	cli := store.EtcdClient(a)
	for _, st := range []*store.Etcd{a, b} {
		go func() { _ = st.RunSweeper(ctx, store.SweeperConfig{}) }() // registers, as a replica does
	}
	both := func(f int) func() bool {
		return func() bool { return a.WriteFormat() == f && b.WriteFormat() == f }
	}
	waitFor(t, 10*time.Second, "two replicas of this release to write format 2", both(2))

	old := func() clientv3.LeaseID {
		l, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		putRaw(t, a, "owners/own_old", []byte(`{"id":"own_old","name":"r-old","pid":1,"started_at":"2026-01-01T00:00:00Z","lease":"1"}`),
			clientv3.WithLease(l.ID))
		return l.ID
	}
	lease := old()
	waitFor(t, 10*time.Second, "a replica of the previous release to bring the fleet to format 1", both(1))
	scope := store.Scope{WorkspaceID: "ws"}
	j, err := a.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: "op", MaxRuntime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutMCPSession(ctx, store.MCPSession{ID: "sess-1", WorkspaceID: "ws", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"jobs/" + j.ID, "mcp-sessions/sess-1"} {
		if v := raw(t, a, k); store.RecordFormat(v) != 1 || bytes.Contains(v, []byte(`"v":`)) {
			t.Fatalf("%s written beside an old replica: %s", k, v)
		}
	}
	if _, err := b.GetJob(ctx, scope, j.ID); err != nil {
		t.Fatal(err)
	}

	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the fleet to move up to format 2 once the old replica left", both(2))
	if _, err := a.CancelJob(ctx, scope, j.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if f := store.RecordFormat(raw(t, a, "jobs/"+j.ID)); f != 2 {
		t.Fatalf("job written as format %d once the fleet is of this release", f)
	}

	// A rollback: an old replica joins again.
	old()
	waitFor(t, 10*time.Second, "a rolled-back replica to bring the fleet back to format 1", both(1))
	c := storetest.Open(t, emb, store.EtcdConfig{})
	if f := c.WriteFormat(); f != 1 {
		t.Fatalf("a replica that has not read the fleet writes format %d", f)
	}
}
