package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func appendEvents(t *testing.T, st *store.Etcd, session, stream string, lim store.EventLimits, data ...string) {
	t.Helper()
	for _, d := range data {
		if _, err := st.AppendEvents(ctxT(t), session, stream, -1, [][]byte{[]byte(d)}, lim); err != nil {
			t.Fatalf("AppendEvents(%q): %v", d, err)
		}
	}
}

func replay(t *testing.T, st *store.Etcd, session, stream string, index int64) []string {
	t.Helper()
	evs, err := st.EventsAfter(ctxT(t), session, stream, index)
	if err != nil {
		t.Fatalf("EventsAfter(%d): %v", index, err)
	}
	out := []string{}
	for _, e := range evs {
		out = append(out, string(e))
	}
	return out
}

// eventKeys returns the event keys and total value bytes stored for a
// stream, read straight from etcd.
func eventKeys(t *testing.T, st *store.Etcd, session, stream string) (int, int) {
	t.Helper()
	// The IDs used with it need no escaping.
	resp, err := store.EtcdClient(st).Get(ctxT(t), st.Prefix()+"streams/"+session+"/"+stream+"/ev/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, kv := range resp.Kvs {
		size += len(kv.Value)
	}
	return len(resp.Kvs), size
}

func TestEventsAppendReplay(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	lim := store.EventLimits{}

	// Nothing stored yet: a fresh stream replays nothing, a resume from an
	// index cannot be served.
	if got := replay(t, st, "sess-1", "", -1); len(got) != 0 {
		t.Fatalf("empty stream replayed %q", got)
	}
	if _, err := st.EventsAfter(ctx, "sess-1", "S1", 0); err == nil {
		t.Fatal("resume of an unknown stream succeeded")
	} else {
		wantErr(t, "resume unknown stream", err, store.ErrEventsPurged)
		wantErr(t, "resume unknown stream", err, store.ErrStreamNotStored)
	}

	// A priming event (empty data), then messages; indices count from 0.
	idx, err := st.AppendEvents(ctx, "sess-1", "S1", -1, [][]byte{nil}, lim)
	if err != nil || idx != 0 {
		t.Fatalf("prime: %d %v", idx, err)
	}
	appendEvents(t, st, "sess-1", "S1", lim, "a", "b\nc", "ü")
	if got := replay(t, st, "sess-1", "S1", -1); strings.Join(got, "|") != "|a|b\nc|ü" {
		t.Fatalf("replay all: %q", got)
	}
	if got := replay(t, st, "sess-1", "S1", 1); strings.Join(got, "|") != "b\nc|ü" {
		t.Fatalf("replay after 1: %q", got)
	}
	if got := replay(t, st, "sess-1", "S1", 3); len(got) != 0 {
		t.Fatalf("replay after the last: %q", got)
	}
	// Beyond the last: events the client saw that were never stored.
	_, err = st.EventsAfter(ctx, "sess-1", "S1", 99)
	wantErr(t, "replay beyond the last", err, store.ErrStreamNotStored)
	wantErr(t, "replay beyond the last", err, store.ErrEventsPurged)

	// Streams and sessions are separate logs; a session ID with a "/"
	// cannot reach another session's keys.
	appendEvents(t, st, "sess-1", "", lim, "standalone")
	appendEvents(t, st, "sess-1/S1", "", lim, "other")
	if got := replay(t, st, "sess-1", "", -1); strings.Join(got, "|") != "standalone" {
		t.Fatalf("standalone stream: %q", got)
	}
	if got := replay(t, st, "sess-1", "S1", 3); len(got) != 0 {
		t.Fatalf("stream S1 after its last: %q", got)
	}

	// Deleting the session's logs removes them all, and only them.
	if err := st.DeleteEventStreams(ctx, "sess-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventsAfter(ctx, "sess-1", "S1", 0); err == nil {
		t.Fatal("replay after delete succeeded")
	}
	if got := replay(t, st, "sess-1/S1", "", -1); strings.Join(got, "|") != "other" {
		t.Fatalf("other session: %q", got)
	}
	// Appending after a delete starts the log again.
	appendEvents(t, st, "sess-1", "S1", lim, "again")
	if got := replay(t, st, "sess-1", "S1", -1); strings.Join(got, "|") != "again" {
		t.Fatalf("after delete: %q", got)
	}
}

func TestEventsRetention(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	// By count: never more than MaxEvents events; the newest survive, a
	// resume from before them fails instead of skipping events.
	lim := store.EventLimits{MaxEvents: 10}
	for i := range 35 {
		appendEvents(t, st, "s", "count", lim, fmt.Sprintf("e%d", i))
		if n, _ := eventKeys(t, st, "s", "count"); n > 10 {
			t.Fatalf("after event %d: %d events stored, max 10", i, n)
		}
	}
	if got := replay(t, st, "s", "count", 29); strings.Join(got, ",") != "e30,e31,e32,e33,e34" {
		t.Fatalf("replay after 29: %q", got)
	}
	_, err := st.EventsAfter(ctx, "s", "count", 5)
	wantErr(t, "resume from a trimmed event", err, store.ErrEventsPurged)
	if errors.Is(err, store.ErrStreamNotStored) {
		t.Fatalf("a trimmed stream's replay says the stream is not stored: %v", err)
	}

	// By bytes: never more than MaxBytes bytes.
	if err := st.DeleteEventStreams(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	lim = store.EventLimits{MaxBytes: 100}
	for i := range 20 {
		appendEvents(t, st, "s", "bytes", lim, fmt.Sprintf("%029d", i)) // 29 bytes
		if _, size := eventKeys(t, st, "s", "bytes"); size > 100 {
			t.Fatalf("after event %d: %d bytes stored, max 100", i, size)
		}
	}
	if got := replay(t, st, "s", "bytes", 18); len(got) != 1 || got[0] != fmt.Sprintf("%029d", 19) {
		t.Fatalf("replay after 18: %q", got)
	}
	// An event larger than the whole log is refused.
	_, err = st.AppendEvents(ctx, "s", "bytes", -1, [][]byte{make([]byte, 101)}, lim)
	wantErr(t, "event over max_bytes", err, store.ErrTooLarge)
}

func TestEventsExplicitIndex(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	lim := store.EventLimits{}
	for i := range 3 {
		if idx, err := st.AppendEvents(ctx, "s", "x", int64(i), [][]byte{{'a' + byte(i)}}, lim); err != nil || idx != uint64(i) {
			t.Fatalf("append %d: %d %v", i, idx, err)
		}
	}
	// Event 3 and 4 were delivered but not stored (say etcd was down):
	// appending 5 drops what came before, so no replay skips them.
	if _, err := st.AppendEvents(ctx, "s", "x", 5, [][]byte{[]byte("f")}, lim); err != nil {
		t.Fatal(err)
	}
	_, err := st.EventsAfter(ctx, "s", "x", 1)
	wantErr(t, "replay across a gap", err, store.ErrEventsPurged)
	if got := replay(t, st, "s", "x", 4); strings.Join(got, "") != "f" {
		t.Fatalf("replay after the gap: %q", got)
	}
	// Indices never go back...
	_, err = st.AppendEvents(ctx, "s", "x", 5, [][]byte{[]byte("again")}, lim)
	wantErr(t, "append a stored index", err, store.ErrConflict)
	// ...except to 0: the stream was opened again, its old events go.
	if _, err := st.AppendEvents(ctx, "s", "x", 0, [][]byte{[]byte("new")}, lim); err != nil {
		t.Fatal(err)
	}
	if got := replay(t, st, "s", "x", -1); strings.Join(got, "|") != "new" {
		t.Fatalf("replay after a restart: %q", got)
	}
	if n, _ := eventKeys(t, st, "s", "x"); n != 1 {
		t.Fatalf("%d events stored after a restart, want 1", n)
	}
}

func TestEventsBatch(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	// A batch lands in one go, numbered from first.
	if idx, err := st.AppendEvents(ctx, "s", "x", 0, [][]byte{nil, []byte("a"), []byte("b")}, store.EventLimits{}); err != nil || idx != 0 {
		t.Fatalf("batch: %d %v", idx, err)
	}
	if idx, err := st.AppendEvents(ctx, "s", "x", -1, [][]byte{[]byte("c"), []byte("d")}, store.EventLimits{}); err != nil || idx != 3 {
		t.Fatalf("second batch: %d %v", idx, err)
	}
	if got := replay(t, st, "s", "x", 0); strings.Join(got, "") != "abcd" {
		t.Fatalf("replay: %q", got)
	}
	// A batch beyond the bounds keeps its newest events; a resume from
	// before them fails.
	var big [][]byte
	for i := range 250 {
		big = append(big, []byte(fmt.Sprint(i)))
	}
	if _, err := st.AppendEvents(ctx, "s", "y", 0, big, store.EventLimits{MaxEvents: 20}); err != nil {
		t.Fatal(err)
	}
	if got := replay(t, st, "s", "y", 229); len(got) != 20 || got[0] != "230" || got[19] != "249" {
		t.Fatalf("replay of a cut batch: %q", got)
	}
	_, err := st.EventsAfter(ctx, "s", "y", 100)
	wantErr(t, "resume from before a cut batch", err, store.ErrEventsPurged)
	if n, _ := eventKeys(t, st, "s", "y"); n > 20 {
		t.Fatalf("%d events stored, max 20", n)
	}
}

// A POST stream records the request it answers when it opens, with its
// first events or — when none is stored — alone.
func TestEventStreamRequest(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	errs := st.AppendStreams(ctx, []store.StreamEvents{
		{Session: "s", Stream: "with", First: 0, Data: [][]byte{nil}, Request: json.RawMessage(`7`)},
		{Session: "s", Stream: "alone", First: 0, Request: json.RawMessage(`"call-8"`)},
	}, store.EventLimits{})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for stream, want := range map[string]string{"with": `7`, "alone": `"call-8"`, "none": ``} {
		if info, err := st.EventStream(ctx, "s", stream); err != nil || string(info.Request) != want || info.Orphaned {
			t.Errorf("%s: %+v, %v; want request %s, not orphaned", stream, info, err, want)
		}
	}
	// The request stays with the stream as it grows; a stream with none of
	// its events stored refuses a replay from one the client saw.
	if _, err := st.AppendEvents(ctx, "s", "with", 1, [][]byte{[]byte("x")}, store.EventLimits{}); err != nil {
		t.Fatal(err)
	}
	if info, err := st.EventStream(ctx, "s", "with"); err != nil || string(info.Request) != `7` || info.Next != 2 {
		t.Errorf("after an append: %+v, %v", info, err)
	}
	_, err := st.EventsAfter(ctx, "s", "alone", 0)
	wantErr(t, "replay of a stream whose events were refused", err, store.ErrEventsPurged)
}

// A stream names the replica that opened it: once that replica is gone
// (its owner lease revoked as it closes, or expired as it dies), another
// replica's read of the stream says it is orphaned — its answer will
// never come — while a stream of a live replica is not.
func TestEventStreamOrphaned(t *testing.T) {
	t.Parallel()
	emb, b := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{ReplicaName: "a"})
	ctx := ctxT(t)
	for _, st := range []*store.Etcd{a, b} {
		name := "of-b"
		if st == a {
			name = "of-a"
		}
		errs := st.AppendStreams(ctx, []store.StreamEvents{{Session: "s", Stream: name, First: 0, Data: [][]byte{[]byte("prime")}, Request: json.RawMessage(`1`)}}, store.EventLimits{})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.AppendEvents(ctx, "s", "one-by-one", 0, [][]byte{[]byte("prime")}, store.EventLimits{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"of-a", "of-b"} {
		if info, err := b.EventStream(ctx, "s", s); err != nil || info.Orphaned || info.Next != 1 || info.Idle > time.Minute {
			t.Errorf("%s while a lives: %+v, %v", s, info, err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := b.EventStream(ctx, "s", "of-a"); err != nil || !info.Orphaned || string(info.Request) != `1` {
		t.Errorf("of-a after a closed: %+v, %v; want orphaned", info, err)
	}
	if info, err := b.EventStream(ctx, "s", "of-b"); err != nil || info.Orphaned {
		t.Errorf("of-b after a closed: %+v, %v", info, err)
	}
	// A stream opened without a request names no replica.
	if info, err := b.EventStream(ctx, "s", "one-by-one"); err != nil || info.Orphaned || info.Request != nil {
		t.Errorf("a stream without request: %+v, %v", info, err)
	}
}

func TestEventsTwoReplicas(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{})
	lim := store.EventLimits{}
	// a appends (and caches the stream's revision), b appends behind its
	// back, a appends again: its stale cache costs a retry, not an event.
	appendEvents(t, a, "s", "x", lim, "1")
	appendEvents(t, b, "s", "x", lim, "2")
	appendEvents(t, a, "s", "x", lim, "3")
	if got := replay(t, b, "s", "x", -1); strings.Join(got, "") != "123" {
		t.Fatalf("replay on b: %q", got)
	}
}

func TestEventsInvalid(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"empty session", func() error {
			_, err := st.AppendEvents(ctx, "", "x", -1, [][]byte{nil}, store.EventLimits{})
			return err
		}(), "session ID"},
		{"long stream", func() error {
			_, err := st.EventsAfter(ctx, "s", strings.Repeat("x", 600), -1)
			return err
		}(), "stream ID"},
		{"max_events", func() error {
			_, err := st.AppendEvents(ctx, "s", "x", -1, [][]byte{nil}, store.EventLimits{MaxEvents: -1})
			return err
		}(), "max_events"},
		{"max_bytes", func() error {
			_, err := st.AppendEvents(ctx, "s", "x", -1, [][]byte{nil}, store.EventLimits{MaxBytes: store.MaxEventLogBytes + 1})
			return err
		}(), "max_bytes"},
		{"index", func() error {
			_, err := st.EventsAfter(ctx, "s", "x", -2)
			return err
		}(), "index"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", c.name, c.err, c.want)
		}
		wantErr(t, c.name, c.err, store.ErrInvalid)
	}
}
