package catalog_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// served records what a follower serves.
type served struct {
	mu       sync.Mutex
	versions []int64
	names    map[int64][]string
}

func (s *served) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.versions) == 0 {
		return -1
	}
	return s.versions[len(s.versions)-1]
}

func writeDoc(t *testing.T, st *store.Etcd, expect int64, names ...string) {
	t.Helper()
	doc := &catalog.Document{}
	for _, n := range names {
		e, probs := catalog.ParseEntry([]byte(`{"name":"` + n + `","adapter":"rest","config":{}}`))
		if probs != nil {
			t.Fatal(probs)
		}
		doc = doc.With(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.PutCatalog(ctx, store.CatalogWrite{Catalog: "c", Expect: expect, Document: doc.JSON(), Operations: len(names)}); err != nil {
		t.Fatal(err)
	}
}

// A follower on one replica serves each version written through another,
// keeps the previous version serving when a new one fails to build (and
// says why), and serves nothing from the catalog once it is purged.
func TestFollowerAppliesVersions(t *testing.T) {
	t.Parallel()
	emb, writer := storetest.Embedded(t)
	reader := storetest.Open(t, emb, store.EtcdConfig{})
	writeDoc(t, writer, 0, "a")

	s := &served{names: map[int64][]string{}}
	build := func(ctx context.Context, doc *catalog.Document, version int64) (*host.Host, error) {
		var names []string
		if doc != nil {
			names = doc.Names()
		}
		if slices.Contains(names, "bad") {
			return nil, errors.New("the adapter refuses operation \"bad\"")
		}
		h, err := host.New(ctx, host.Options{File: &opsfile.File{}})
		if err == nil {
			s.mu.Lock()
			s.names[version] = names
			s.mu.Unlock()
		}
		return h, err
	}
	serve := func(h *host.Host, version int64) {
		s.mu.Lock()
		s.versions = append(s.versions, version)
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := catalog.Follow(ctx, catalog.FollowOptions{Catalog: "c", Store: reader, Build: build, Serve: serve})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if s.last() != 1 || f.Status().Version != 1 {
		t.Fatalf("first version: %d %+v", s.last(), f.Status())
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (status %+v)", what, f.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	writeDoc(t, writer, 1, "a", "b")
	wait("version 2", func() bool { return s.last() == 2 })
	writeDoc(t, writer, 2, "a", "bad")
	wait("the failure of version 3", func() bool { return f.Status().Failed == 3 })
	if st := f.Status(); st.Version != 2 || !strings.Contains(st.Error, "refuses") || s.last() != 2 {
		t.Fatalf("after a bad version: %+v, serving %d", st, s.last())
	}
	writeDoc(t, writer, 3, "c")
	wait("version 4", func() bool { return s.last() == 4 })
	if st := f.Status(); st.Error != "" || st.Failed != 0 {
		t.Fatalf("a good version did not clear the failure: %+v", st)
	}
	if err := writer.PurgeCatalog(ctx, "c", 4); err != nil {
		t.Fatal(err)
	}
	wait("the purge", func() bool { return s.last() == 0 })
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(s.names[4], []string{"c"}) || s.names[0] != nil {
		t.Fatalf("documents built: %v", s.names)
	}
}

// A first version that does not build fails Follow, as a bad operations
// file fails a config load.
func TestFollowerFirstVersionMustBuild(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	writeDoc(t, st, 0, "bad")
	_, err := catalog.Follow(context.Background(), catalog.FollowOptions{Catalog: "c", Store: st,
		Build: func(context.Context, *catalog.Document, int64) (*host.Host, error) { return nil, errors.New("refused") },
		Serve: func(*host.Host, int64) { t.Fatal("served") }})
	if err == nil || !strings.Contains(err.Error(), "catalog c version 1: refused") {
		t.Fatalf("Follow: %v", err)
	}
}
