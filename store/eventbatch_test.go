package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func events(data ...string) [][]byte {
	out := make([][]byte, len(data))
	for i, d := range data {
		out[i] = []byte(d)
	}
	return out
}

// revision is etcd's current revision, read straight from it.
func revision(t *testing.T, st *store.Etcd) int64 {
	t.Helper()
	resp, err := store.EtcdClient(st).Get(ctxT(t), "revision-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.GetRevision()
}

// TestAppendStreamsSharesOneTransaction appends many new streams and the
// continuation of one at once: they take a single etcd transaction, and
// each replays exactly as if appended alone.
func TestAppendStreamsSharesOneTransaction(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	lim := store.EventLimits{}
	if _, err := st.AppendEvents(ctx, "s", "long", 0, events("", "a"), lim); err != nil {
		t.Fatal(err)
	}
	var streams []store.StreamEvents
	for i := range 20 {
		streams = append(streams, store.StreamEvents{Session: "s", Stream: fmt.Sprintf("P%d", i), First: 0,
			Data: events("", fmt.Sprintf(`{"id":%d}`, i))})
	}
	streams = append(streams, store.StreamEvents{Session: "s", Stream: "long", First: 2, Data: events("b", "c")},
		store.StreamEvents{Session: "s2", Stream: "", First: -1, Data: events("x")}) // unknown: read first
	before := revision(t, st)
	for i, err := range st.AppendStreams(ctx, streams, lim) {
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	// One transaction for the 21 streams that simply grow, one read-free
	// append for the unknown stream.
	if got := revision(t, st) - before; got != 2 {
		t.Fatalf("the appends took %d revisions, want 2 (one shared transaction)", got)
	}
	for i := range 20 {
		if got := replay(t, st, "s", fmt.Sprintf("P%d", i), -1); !slices.Equal(got, []string{"", fmt.Sprintf(`{"id":%d}`, i)}) {
			t.Fatalf("stream P%d replayed %q", i, got)
		}
	}
	if got := replay(t, st, "s", "long", 0); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("continued stream replayed %q", got)
	}
	if got := replay(t, st, "s2", "", -1); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("unknown stream replayed %q", got)
	}
	// The shared transaction's records are this process's last: the next
	// append to one of them commits without a read, and counts on.
	if idx, err := st.AppendEvents(ctx, "s", "P3", -1, events("more"), lim); err != nil || idx != 2 {
		t.Fatalf("append after the shared transaction: index %d, %v", idx, err)
	}
}

// TestAppendStreamsFallsBack covers the streams that cannot share a
// transaction: one another replica wrote meanwhile (the compare fails), a
// restart at 0, one given twice, one over its bounds, and a bad ID, which
// fails alone.
func TestAppendStreamsFallsBack(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	lim := store.EventLimits{MaxEvents: 5}
	for _, st := range []*store.Etcd{a, b} {
		// Both replicas know the moved stream (each wrote it last once).
		if _, err := st.AppendEvents(ctx, "s", "moved", 0, events("m0"), lim); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AppendEvents(ctx, "s", "again", 0, events("old0", "old1"), lim); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendEvents(ctx, "s", "full", 0, events("f0", "f1", "f2", "f3"), lim); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendEvents(ctx, "s", "moved", -1, events("m1"), lim); err != nil {
		t.Fatal(err)
	}
	// a's record of "moved" is stale now.
	errs := a.AppendStreams(ctx, []store.StreamEvents{
		{Session: "s", Stream: "moved", First: -1, Data: events("m2")},
		{Session: "s", Stream: "again", First: 0, Data: events("new0")},
		{Session: "s", Stream: "twice", First: 0, Data: events("t0")},
		{Session: "s", Stream: "twice", First: 1, Data: events("t1", "t2")},
		{Session: "", Stream: "bad", First: 0, Data: events("x")},
		{Session: "s", Stream: "full", First: 4, Data: events("f4", "f5")},
		{Session: "s", Stream: "fresh", First: 0, Data: events("n0")},
	}, lim)
	for i, err := range errs {
		if i == 4 {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("bad session ID: %v, want ErrInvalid", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		stream string
		want   []string
	}{
		{"moved", []string{"m0", "m1", "m2"}},
		{"again", []string{"new0"}},
		{"twice", []string{"t0", "t1", "t2"}},
		{"fresh", []string{"n0"}},
	} {
		if got := replay(t, a, "s", c.stream, -1); !slices.Equal(got, c.want) {
			t.Fatalf("stream %s replayed %q, want %q", c.stream, got, c.want)
		}
	}
	// Over its bound of 5 the oldest went, as AppendEvents trims.
	if got := replay(t, a, "s", "full", 4); !slices.Equal(got, []string{"f5"}) {
		t.Fatalf("trimmed stream replayed %q after 4", got)
	}
	if _, err := a.EventsAfter(ctx, "s", "full", -1); !errors.Is(err, store.ErrEventsPurged) {
		t.Fatalf("replay of the trimmed stream from its start: %v, want ErrEventsPurged", err)
	}
}
