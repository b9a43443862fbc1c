package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func clientWithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

func catalogDoc(ops ...string) json.RawMessage {
	var entries []string
	for _, op := range ops {
		entries = append(entries, fmt.Sprintf(`{"name":%q,"adapter":"rest","config":{"url":"{env.BASE}/x"}}`, op))
	}
	return json.RawMessage(`{"version":1,"operations":[` + strings.Join(entries, ",") + `]}`)
}

func putCatalog(t *testing.T, st *store.Etcd, w store.CatalogWrite) *store.CatalogHead {
	t.Helper()
	h, err := st.PutCatalog(ctxT(t), w)
	if err != nil {
		t.Fatalf("PutCatalog %+v: %v", w, err)
	}
	return h
}

// Versions are written with a compare-and-swap on the expected version:
// the loser of two writers who read the same version gets a conflict
// naming the current version, and nothing of its write is kept.
func TestCatalogVersionsCompareAndSwap(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	if _, _, err := st.GetCatalog(ctx, "demo"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("absent catalog: %v", err)
	}
	h := putCatalog(t, st, store.CatalogWrite{Catalog: "demo", Author: "admin", Action: "create", Message: "first",
		Document: catalogDoc("a"), Operations: 1, Changes: []store.CatalogChange{{Operation: "a", Change: "added"}}})
	if h.Version != 1 || h.Oldest != 1 || h.Operations != 1 || h.Author != "admin" {
		t.Fatalf("head: %+v", h)
	}
	if _, err := st.PutCatalog(ctx, store.CatalogWrite{Catalog: "demo", Document: catalogDoc("b")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second create: %v", err)
	}

	// Two writers read version 1; one wins, the other is told version 2.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = st.PutCatalog(ctx, store.CatalogWrite{Catalog: "demo", Expect: 1, Action: "replace",
				Document: catalogDoc("a", fmt.Sprintf("w%d", i)), Operations: 2})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var ce *store.CatalogConflictError
		switch {
		case err == nil:
			won++
		case errors.As(err, &ce) && ce.Current == 2 && ce.Expected == 1 && errors.Is(err, store.ErrConflict):
		default:
			t.Fatalf("concurrent write: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won", won)
	}
	head, cur, err := st.GetCatalog(ctx, "demo")
	if err != nil || head.Version != 2 || cur.Version != 2 || cur.Action != "replace" || !strings.Contains(string(cur.Document), `"w`) {
		t.Fatalf("current: %+v %+v %v", head, cur, err)
	}
	v1, err := st.GetCatalogVersion(ctx, "demo", 1)
	if err != nil || v1.Message != "first" || string(v1.Document) != string(catalogDoc("a")) || len(v1.Changes) != 1 {
		t.Fatalf("version 1: %+v %v", v1, err)
	}
	// Placeholders are kept as written.
	if !strings.Contains(string(v1.Document), "{env.BASE}") {
		t.Fatalf("document: %s", v1.Document)
	}
	if _, err := st.GetCatalogVersion(ctx, "demo", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version 3: %v", err)
	}
}

// A catalog keeps its last Keep versions; etcd compacting its key history
// loses none of them, since each version is a key of its own.
func TestCatalogHistoryBoundedAndSurvivesCompaction(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	for i := int64(0); i < 7; i++ {
		putCatalog(t, st, store.CatalogWrite{Catalog: "c1", Expect: i, Keep: 4, Action: "replace",
			Document: catalogDoc(fmt.Sprintf("op%d", i+1)), Operations: 1})
	}
	head, err := st.GetCatalogHead(ctx, "c1")
	if err != nil || head.Version != 7 || head.Oldest != 4 {
		t.Fatalf("head: %+v %v", head, err)
	}
	if _, err := st.GetCatalogVersion(ctx, "c1", 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pruned version 3: %v", err)
	}
	cli := store.EtcdClient(st)
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatalf("compact: %v", err)
	}
	vs, next, err := st.ListCatalogVersions(ctx, "c1", 0, 3)
	if err != nil || len(vs) != 3 || vs[0].Version != 7 || vs[2].Version != 5 || next != 5 || vs[0].Document != nil {
		t.Fatalf("page 1: %+v next %d %v", vs, next, err)
	}
	vs, next, err = st.ListCatalogVersions(ctx, "c1", next, 3)
	if err != nil || len(vs) != 1 || vs[0].Version != 4 || next != 0 {
		t.Fatalf("page 2: %+v next %d %v", vs, next, err)
	}
	v4, err := st.GetCatalogVersion(ctx, "c1", 4)
	if err != nil || !strings.Contains(string(v4.Document), "op4") {
		t.Fatalf("version 4 after compaction: %+v %v", v4, err)
	}
	// Keys beyond the history are gone from etcd, not just hidden.
	n, err := cli.Get(ctx, store.DefaultPrefix+"catalog-documents/c1/", clientWithPrefixCount()...)
	if err != nil || n.Count != 4 {
		t.Fatalf("documents kept: %d %v", n.Count, err)
	}
}

// A deletion is a version (history kept, rollback possible); a create
// over it continues the numbering; a purge removes everything.
func TestCatalogDeleteAndPurge(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	putCatalog(t, st, store.CatalogWrite{Catalog: "x", Document: catalogDoc("a"), Operations: 1})
	h := putCatalog(t, st, store.CatalogWrite{Catalog: "x", Expect: 1, Deleted: true, Action: "delete", Document: catalogDoc()})
	if !h.Deleted || h.Version != 2 {
		t.Fatalf("deleted head: %+v", h)
	}
	h = putCatalog(t, st, store.CatalogWrite{Catalog: "x", Expect: 0, Action: "create", Document: catalogDoc("b"), Operations: 1})
	if h.Deleted || h.Version != 3 {
		t.Fatalf("recreated head: %+v", h)
	}
	heads, next, err := st.ListCatalogs(ctx, "", 10)
	if err != nil || len(heads) != 1 || heads[0].Catalog != "x" || next != "" {
		t.Fatalf("list: %+v %q %v", heads, next, err)
	}
	if err := st.PurgeCatalog(ctx, "x", 2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("purge of a stale version: %v", err)
	}
	if err := st.PurgeCatalog(ctx, "x", 3); err != nil {
		t.Fatal(err)
	}
	n, err := store.EtcdClient(st).Get(ctx, store.DefaultPrefix+"catalog", clientWithPrefixCount()...)
	if err != nil || n.Count != 0 {
		t.Fatalf("keys left after purge: %d %v", n.Count, err)
	}
	if err := st.PurgeCatalog(ctx, "x", store.AnyVersion); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purge of an absent catalog: %v", err)
	}
}

func TestCatalogRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	for _, w := range []store.CatalogWrite{
		{Catalog: "../x", Document: catalogDoc()},
		{Catalog: "", Document: catalogDoc()},
		{Catalog: "ok", Document: json.RawMessage(`{`)},
		{Catalog: "ok", Document: catalogDoc(), Keep: store.MaxCatalogHistory + 1},
	} {
		if _, err := st.PutCatalog(ctx, w); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", w, err)
		}
	}
	maxValue, _ := store.Limits(st)
	big := json.RawMessage(`"` + strings.Repeat("x", maxValue) + `"`)
	if _, err := st.PutCatalog(ctx, store.CatalogWrite{Catalog: "big", Document: big}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := st.GetCatalogHead(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused write left a catalog: %v", err)
	}
}

// A watch on one replica sees the changes written through another: the
// current head first, then each version, a purge, and a re-creation.
func TestWatchCatalogAcrossReplicas(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	ch, err := b.WatchCatalog(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	next := func(want int64) {
		t.Helper()
		for {
			select {
			case ev := <-ch:
				got := int64(0)
				if ev.Head != nil {
					got = ev.Head.Version
				}
				if got == want {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no event for version %d", want)
			}
		}
	}
	next(0)
	putCatalog(t, a, store.CatalogWrite{Catalog: "live", Document: catalogDoc("a")})
	next(1)
	putCatalog(t, a, store.CatalogWrite{Catalog: "live", Expect: 1, Document: catalogDoc("a", "b")})
	next(2)
	if err := a.PurgeCatalog(ctx, "live", 2); err != nil {
		t.Fatal(err)
	}
	next(0)
	putCatalog(t, a, store.CatalogWrite{Catalog: "live", Document: catalogDoc("c")})
	next(1)
}
