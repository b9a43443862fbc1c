package store_test

import (
	"bytes"
	"context"
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

var (
	ws1a1 = store.Scope{WorkspaceID: "ws-1", AgentID: "agent-1"}
	ws1a2 = store.Scope{WorkspaceID: "ws-1", AgentID: "agent-2"}
	ws2a1 = store.Scope{WorkspaceID: "ws-2", AgentID: "agent-1"}
)

func newSession(t *testing.T, st *store.Etcd, mut func(*store.NewStreamSession)) *store.StreamSession {
	t.Helper()
	ns := store.NewStreamSession{
		Scope: ws1a1, OperationID: "logs.follow", Protocol: "rest", Mode: "session",
		IdleTimeout: time.Minute, MaxLifetime: time.Hour,
	}
	if mut != nil {
		mut(&ns)
	}
	s, err := st.CreateStreamSession(ctxT(t), ns)
	if err != nil {
		t.Fatalf("CreateStreamSession: %v", err)
	}
	return s
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func items(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestStreamSessionCreateGet(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	before := time.Now()
	s := newSession(t, st, func(ns *store.NewStreamSession) {
		ns.Cursor = "c0"
		ns.State = json.RawMessage(`{"since":"2026-01-01"}`)
	})
	if !strings.HasPrefix(s.ID, store.StreamSessionIDPrefix) || len(s.ID) < len(store.StreamSessionIDPrefix)+26 {
		t.Errorf("ID %q: want %s + at least 26 base32 characters", s.ID, store.StreamSessionIDPrefix)
	}
	if s.Status != store.StreamSessionActive || s.Cursor != "c0" || s.Owner != "" || s.Revision == 0 {
		t.Errorf("created: %+v", s)
	}
	if s.MaxItems != store.DefaultStreamSessionMaxItems || s.MaxBytes != store.DefaultStreamSessionMaxBytes || s.Retention != store.DefaultStreamSessionRetention {
		t.Errorf("defaults: items %d bytes %d retention %s", s.MaxItems, s.MaxBytes, s.Retention)
	}
	if s.CreatedAt.Before(before.Add(-time.Second)) || !s.ExpiresAt.Equal(s.CreatedAt.Add(time.Minute)) {
		t.Errorf("created %v expires %v", s.CreatedAt, s.ExpiresAt)
	}

	got, err := st.GetStreamSession(ctx, ws1a1, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != s.ID || got.OperationID != "logs.follow" || got.Protocol != "rest" || got.Mode != "session" ||
		string(got.State) != `{"since":"2026-01-01"}` || got.Revision != s.Revision || !got.CreatedAt.Equal(s.CreatedAt) {
		t.Errorf("Get = %+v, created %+v", got, s)
	}

	// The record sits at its documented key, on a bucket lease.
	r, err := cli.Get(ctx, "/crank/v1/stream-sessions/"+s.ID)
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("raw record: %v %v", r, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(r.Kvs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"id", "workspace_id", "agent_id", "operation_id", "protocol", "mode", "status", "cursor",
		"state_json", "expires_at", "created_at", "idle_timeout_ms", "max_lifetime_ms"} {
		if _, ok := rec[f]; !ok {
			t.Errorf("stored record lacks %q: %s", f, r.Kvs[0].Value)
		}
	}

	// IDs that cannot exist are not found without asking etcd.
	for _, id := range []string{"", "nope", "ss_../../x", "job_" + s.ID[3:], s.ID + "/x"} {
		if _, err := st.GetStreamSession(ctx, ws1a1, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q): %v", id, err)
		}
	}
}

func TestStreamSessionCreateValidation(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	base := store.NewStreamSession{Scope: ws1a1, OperationID: "op", IdleTimeout: time.Minute, MaxLifetime: time.Hour}
	for _, tc := range []struct {
		field string
		mut   func(*store.NewStreamSession)
	}{
		{"operation_id", func(ns *store.NewStreamSession) { ns.OperationID = "" }},
		{"idle_timeout", func(ns *store.NewStreamSession) { ns.IdleTimeout = 0 }},
		{"max_session_lifetime", func(ns *store.NewStreamSession) { ns.MaxLifetime = -time.Second }},
		{"retention", func(ns *store.NewStreamSession) { ns.Retention = -1 }},
		{"max_items", func(ns *store.NewStreamSession) { ns.MaxItems = store.MaxStreamSessionItems + 1 }},
		{"max_bytes", func(ns *store.NewStreamSession) { ns.MaxBytes = store.MaxStreamSessionBytes + 1 }},
		{"agent_id", func(ns *store.NewStreamSession) { ns.AgentScoped, ns.Scope.AgentID = true, "" }},
		{"workspace_id", func(ns *store.NewStreamSession) { ns.Scope.WorkspaceID = strings.Repeat("w", 513) }},
		{"state_json", func(ns *store.NewStreamSession) { ns.State = json.RawMessage(`{"a":`) }},
	} {
		ns := base
		tc.mut(&ns)
		_, err := st.CreateStreamSession(ctx, ns)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want ErrInvalid naming the field", tc.field, err)
		}
	}
}

// sessionIn returns a session brought into status from.
func sessionIn(t *testing.T, st *store.Etcd, from store.StreamSessionStatus) *store.StreamSession {
	t.Helper()
	ctx := ctxT(t)
	owned := from == store.StreamSessionStopping
	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = owned })
	var err error
	switch from {
	case store.StreamSessionActive:
		return s
	case store.StreamSessionStopping, store.StreamSessionStopped:
		s, err = st.CloseStreamSession(ctx, ws1a1, s.ID, "test")
	default:
		s, err = st.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: from})
	}
	if err != nil || s.Status != from {
		t.Fatalf("bring session to %s: %+v, %v", from, s, err)
	}
	return s
}

// Every transition of the session status machine, through the store:
// allowed ones happen, the others are refused with ErrIllegalTransition
// naming both ends, and leave the session unchanged.
func TestStreamSessionEveryTransition(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	all := []store.StreamSessionStatus{store.StreamSessionActive, store.StreamSessionStopping, store.StreamSessionStopped, store.StreamSessionCompleted, store.StreamSessionFailed}
	for _, from := range all {
		for _, to := range all[1:] {
			s := sessionIn(t, st, from)
			var got *store.StreamSession
			var err error
			if to == store.StreamSessionStopping {
				if from == store.StreamSessionActive {
					// Only an owned session goes through stopping.
					s = newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = true })
				}
				got, err = st.CloseStreamSession(ctx, ws1a1, s.ID, "why")
			} else {
				got, err = st.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: to, Error: json.RawMessage(`{"e":1}`)})
			}
			if to == store.StreamSessionStopping && (from == store.StreamSessionStopping || from == store.StreamSessionStopped) {
				// Closing again is idempotent: no change, no error.
				if err != nil || got.Status != from || got.Revision != s.Revision {
					t.Errorf("close a %s session again: %+v, %v", from, got, err)
				}
				continue
			}
			if from.CanBecome(to) {
				if err != nil || got.Status != to {
					t.Errorf("%s → %s: %+v, %v", from, to, got, err)
				}
				continue
			}
			var te *store.TransitionError
			if !errors.Is(err, store.ErrIllegalTransition) || !errors.As(err, &te) ||
				!strings.Contains(err.Error(), string(from)) || te.ID != s.ID {
				t.Errorf("%s → %s: err = %v, want a TransitionError naming %s", from, to, err, from)
			}
			if now, err := st.GetStreamSession(ctx, ws1a1, s.ID); err != nil || now.Status != from || now.Revision != s.Revision {
				t.Errorf("%s → %s refused but the session changed: %+v, %v", from, to, now, err)
			}
		}
	}
	// A finish must name a terminal status.
	s := newSession(t, st, nil)
	if _, err := st.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: store.StreamSessionStopping}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("finish as stopping: %v", err)
	}
}

func TestStreamSessionCloseAndFinish(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	// Without a runner, a stop closes at once and the session is kept for
	// its retention.
	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Retention = 5 * time.Minute })
	c, err := st.CloseStreamSession(ctx, ws1a1, s.ID, "user asked")
	if err != nil || c.Status != store.StreamSessionStopped || c.StopReason != "user asked" || c.ClosedAt.IsZero() ||
		!c.ExpiresAt.Equal(c.ClosedAt.Add(5*time.Minute)) {
		t.Fatalf("close: %+v, %v", c, err)
	}
	again, err := st.CloseStreamSession(ctx, ws1a1, s.ID, "twice")
	if err != nil || again.Status != store.StreamSessionStopped || again.StopReason != "user asked" || again.Revision != c.Revision {
		t.Fatalf("close again is not idempotent: %+v, %v", again, err)
	}
	if _, err := st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "", To: "x"}); !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("advance after stop: %v", err)
	}
	if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("x")}); !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("append after stop: %v", err)
	}

	// With a runner, a stop asks it to stop; the runner finishes.
	o := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = true })
	if o.Owner == "" || o.Owner != st.OwnerID() {
		t.Fatalf("owned session owner %q, store owner %q", o.Owner, st.OwnerID())
	}
	c, err = st.CloseStreamSession(ctx, ws1a1, o.ID, "enough")
	if err != nil || c.Status != store.StreamSessionStopping || c.StopRequestedAt.IsZero() || !c.ClosedAt.IsZero() {
		t.Fatalf("close owned: %+v, %v", c, err)
	}
	f, err := st.FinishStreamSession(ctx, o.ID, store.StreamSessionEnd{Status: store.StreamSessionStopped, State: json.RawMessage(`{"at":7}`)})
	if err != nil || f.Status != store.StreamSessionStopped || string(f.State) != `{"at":7}` || f.ClosedAt.IsZero() {
		t.Fatalf("finish: %+v, %v", f, err)
	}
	// The running index entry went with the finish.
	r, err := store.EtcdClient(st).Get(ctx, "/crank/v1/running/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Fatalf("running index after finish: %v, %v", r, err)
	}
}

func TestStreamSessionAdvance(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Cursor = "p0" })
	time.Sleep(10 * time.Millisecond)
	a, err := st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "p0", To: "p1", State: json.RawMessage(`{"n":1}`)})
	if err != nil || a.Cursor != "p1" || string(a.State) != `{"n":1}` || a.LastPollAt.IsZero() || !a.ExpiresAt.After(s.ExpiresAt) {
		t.Fatalf("advance: %+v, %v", a, err)
	}
	// A second poll that read p0 lost the race: reported, not applied.
	_, err = st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "p0", To: "p1-other"})
	wantErr(t, "advance from a stale cursor", err, store.ErrConflict)
	if !store.Retryable(err) || !strings.Contains(err.Error(), `"p1"`) {
		t.Errorf("stale-cursor error: %v", err)
	}
	// State is kept when not given.
	a, err = st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "p1", To: "p2", Done: true})
	if err != nil || a.Status != store.StreamSessionCompleted || string(a.State) != `{"n":1}` || a.ClosedAt.IsZero() {
		t.Fatalf("advance done: %+v, %v", a, err)
	}
	_, err = st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "p2", To: "p3"})
	wantErr(t, "advance a completed session", err, store.ErrIllegalTransition)
	_, err = st.AdvanceStreamSession(ctx, ws1a1, s.ID, store.Advance{From: "p2", State: json.RawMessage("nope")})
	wantErr(t, "advance with bad state", err, store.ErrInvalid)
}

func TestStreamSessionBufferAndPoll(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned, ns.MaxItems, ns.MaxBytes = true, 5, 100 })
	n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("a", "bb", "ccc"), State: json.RawMessage(`{"upstream":"e3"}`)})
	if err != nil || n != 3 {
		t.Fatalf("append: %d, %v", n, err)
	}
	poll := func(cursor string, maxItems int) *store.PollResult {
		t.Helper()
		r, err := st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: cursor, MaxItems: maxItems})
		if err != nil {
			t.Fatalf("poll %q: %v", cursor, err)
		}
		return r
	}
	seqs := func(r *store.PollResult) string {
		var b strings.Builder
		for _, it := range r.Items {
			fmt.Fprintf(&b, "%d:%s ", it.Seq, it.Data)
		}
		return b.String()
	}
	r := poll("", 0)
	if seqs(r) != "1:a 2:bb 3:ccc " || r.Cursor != "3" || r.HasMore || r.StreamSession.BufferedItems != 3 || string(r.StreamSession.State) != `{"upstream":"e3"}` {
		t.Fatalf("first poll: %s cursor %s more %v session %+v", seqs(r), r.Cursor, r.HasMore, r.StreamSession)
	}
	// Not acknowledged yet: the same poll returns the same items.
	if r2 := poll("", 0); seqs(r2) != seqs(r) || r2.Cursor != "3" {
		t.Fatalf("repeated poll: %s", seqs(r2))
	}
	// A page at a time.
	if r2 := poll("", 2); seqs(r2) != "1:a 2:bb " || r2.Cursor != "2" || !r2.HasMore {
		t.Fatalf("page: %s cursor %s more %v", seqs(r2), r2.Cursor, r2.HasMore)
	}
	if r2 := poll("2", 2); seqs(r2) != "3:ccc " || r2.Cursor != "3" || r2.HasMore || r2.StreamSession.BufferedItems != 1 || r2.StreamSession.BufferedBytes != 3 {
		t.Fatalf("after ack 2: %s %+v", seqs(r2), r2.StreamSession)
	}
	// Retrying the acknowledging poll is idempotent too.
	if r2 := poll("2", 2); seqs(r2) != "3:ccc " {
		t.Fatalf("retried ack 2: %s", seqs(r2))
	}
	r = poll("3", 0)
	if len(r.Items) != 0 || r.Cursor != "3" || r.StreamSession.BufferedItems != 0 || r.StreamSession.BufferedBytes != 0 || r.StreamSession.AckedSeq != 3 || r.StreamSession.Cursor != "3" {
		t.Fatalf("after ack 3: %s %+v", seqs(r), r.StreamSession)
	}
	// Acknowledged items are deleted from etcd.
	if k, err := cli.Get(ctx, "/crank/v1/stream-items/"+s.ID+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || k.Count != 0 {
		t.Fatalf("items left after acknowledging all: %v %v", k, err)
	}
	// Bad cursors.
	_, err = st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: "2"})
	wantErr(t, "cursor behind the acknowledged one", err, store.ErrConflict)
	_, err = st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: "4"})
	wantErr(t, "cursor beyond the last item", err, store.ErrInvalid)
	_, err = st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: "x'; drop"})
	wantErr(t, "garbage cursor", err, store.ErrInvalid)

	// The buffer refuses to grow past max_items, and says so.
	n, err = st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("1", "2", "3", "4", "5", "6", "7")})
	var bf *store.BufferFullError
	if n != 5 || !errors.Is(err, store.ErrBufferFull) || !errors.As(err, &bf) || bf.MaxItems != 5 || bf.BufferedItems != 5 {
		t.Fatalf("append past max_items: %d, %v", n, err)
	}
	if !strings.Contains(err.Error(), "5/5 items") {
		t.Errorf("buffer-full error does not give the limit: %v", err)
	}
	r = poll("3", 2)
	r = poll(r.Cursor, 0) // acknowledges 2, leaves 3
	if r.StreamSession.BufferedItems != 3 {
		t.Fatalf("after acknowledging 2 of 5: %+v", r.StreamSession)
	}
	// ... and past max_bytes.
	big := bytes.Repeat([]byte("x"), 60)
	n, err = st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: [][]byte{big, big}})
	if n != 1 || !errors.As(err, &bf) || bf.MaxBytes != 100 || bf.ItemBytes != 60 || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("append past max_bytes: %d, %v", n, err)
	}
	// An item larger than one etcd request is refused outright.
	_, maxItem := store.Limits(st)
	_, err = st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: [][]byte{make([]byte, maxItem+1)}})
	wantErr(t, "item over the request limit", err, store.ErrTooLarge)
	// A state-only append.
	if n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{State: json.RawMessage(`{"upstream":"e9"}`)}); n != 0 || err != nil {
		t.Fatalf("state-only append: %d %v", n, err)
	}
	if g, _ := st.GetStreamSession(ctx, ws1a1, s.ID); string(g.State) != `{"upstream":"e9"}` {
		t.Errorf("state after state-only append: %s", g.State)
	}

	// A completed session can still be drained.
	if _, err := st.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: store.StreamSessionCompleted}); err != nil {
		t.Fatal(err)
	}
	r = poll("", 0)
	if len(r.Items) != 4 || r.StreamSession.Status != store.StreamSessionCompleted {
		t.Fatalf("drain completed: %s %+v", seqs(r), r.StreamSession)
	}
	r = poll(r.Cursor, 0)
	if len(r.Items) != 0 || r.StreamSession.BufferedItems != 0 || r.HasMore {
		t.Fatalf("drained: %s %+v", seqs(r), r.StreamSession)
	}
}

// Appends larger than one transaction (items or bytes) are split, keep
// their order and respect etcd's request limit.
func TestStreamSessionAppendSplitsTransactions(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned, ns.MaxItems, ns.MaxBytes = true, 1000, 8<<20 })
	var batch [][]byte
	for i := range 350 {
		batch = append(batch, fmt.Appendf(nil, `{"i":%d}`, i))
	}
	// 12 items of 300 KiB: about 3.5 MiB, more than two requests' worth.
	for i := range 12 {
		batch = append(batch, append(fmt.Appendf(nil, "%03d", 350+i), bytes.Repeat([]byte("z"), 300<<10)...))
	}
	n, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: batch})
	if err != nil || n != len(batch) {
		t.Fatalf("append %d: %d, %v", len(batch), n, err)
	}
	var got int
	cursor := ""
	for {
		r, err := st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{Cursor: cursor, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range r.Items {
			if it.Seq != uint64(got+1) || !bytes.Equal(it.Data, batch[got]) {
				t.Fatalf("item %d: seq %d, %d bytes", got, it.Seq, len(it.Data))
			}
			got++
		}
		cursor = r.Cursor
		if !r.HasMore {
			break
		}
	}
	if got != len(batch) {
		t.Fatalf("polled %d items, appended %d", got, len(batch))
	}
}

// A session or job outside the caller's workspace (or agent, when agent
// scoped) looks exactly like one that does not exist.
func TestIsolation(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)

	shared := newSession(t, st, nil)                                                         // ws-1, any agent
	private := newSession(t, st, func(ns *store.NewStreamSession) { ns.AgentScoped = true }) // ws-1, agent-1 only
	missing := store.StreamSessionIDPrefix + strings.Repeat("A", 26)                         // well-formed, absent
	sharedJob, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "op", MaxRuntime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	privateJob, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, AgentScoped: true, OperationID: "op", MaxRuntime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	missingJob := store.JobIDPrefix + strings.Repeat("A", 26)

	sessionOps := func(scope store.Scope, id string) []error {
		_, e1 := st.GetStreamSession(ctx, scope, id)
		_, e2 := st.PollStreamSession(ctx, scope, id, store.PollRequest{})
		_, e3 := st.AdvanceStreamSession(ctx, scope, id, store.Advance{})
		_, e4 := st.WatchStreamSession(ctx, scope, id)
		_, e5 := st.CloseStreamSession(ctx, scope, id, "")
		return []error{e1, e2, e3, e4, e5}
	}
	jobOps := func(scope store.Scope, id string) []error {
		_, e1 := st.GetJob(ctx, scope, id)
		_, e2 := st.WatchJob(ctx, scope, id)
		_, e3 := st.CancelJob(ctx, scope, id, "")
		return []error{e1, e2, e3}
	}
	notFound := func(what string, errs []error) {
		t.Helper()
		for i, err := range errs {
			if err != store.ErrNotFound {
				t.Errorf("%s op %d: err = %v, want exactly ErrNotFound", what, i, err)
			}
		}
	}
	notFound("absent session", sessionOps(ws1a1, missing))
	notFound("absent job", jobOps(ws1a1, missingJob))
	for _, sc := range []store.Scope{ws2a1, {WorkspaceID: "", AgentID: "agent-1"}, {WorkspaceID: "WS-1", AgentID: "agent-1"}} {
		notFound("session of another workspace", sessionOps(sc, shared.ID))
		notFound("job of another workspace", jobOps(sc, sharedJob.ID))
	}
	notFound("agent-scoped session, other agent", sessionOps(ws1a2, private.ID))
	notFound("agent-scoped job, other agent", jobOps(ws1a2, privateJob.ID))

	// The rightful callers still see them (nothing above changed them).
	if _, err := st.GetStreamSession(ctx, ws1a2, shared.ID); err != nil {
		t.Errorf("workspace-scoped session, other agent of the workspace: %v", err)
	}
	if g, err := st.GetStreamSession(ctx, ws1a1, private.ID); err != nil || g.Status != store.StreamSessionActive {
		t.Errorf("agent-scoped session, its agent: %+v %v", g, err)
	}
	if g, err := st.GetJob(ctx, ws1a1, privateJob.ID); err != nil || g.Status != store.JobQueued {
		t.Errorf("agent-scoped job, its agent: %+v %v", g, err)
	}
	if _, err := st.GetJob(ctx, ws1a2, sharedJob.ID); err != nil {
		t.Errorf("workspace-scoped job, other agent: %v", err)
	}
}

// waitGone polls until get reports ErrNotFound, returning when.
func waitGone(t *testing.T, get func(context.Context) error, deadline time.Time) time.Time {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := get(ctx)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			return time.Now()
		}
		if err != nil {
			t.Fatalf("while waiting for expiry: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still present at the deadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawGone polls etcd directly until key is deleted (by its lease).
func rawGone(t *testing.T, cli *clientv3.Client, key string, deadline time.Time) time.Time {
	t.Helper()
	for {
		r, err := cli.Get(context.Background(), key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still in etcd at the deadline", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Idle expiry: a session not polled for its idle timeout is gone exactly at
// its ExpiresAt for readers, and deleted from etcd by its bucket lease
// shortly after; polls push the expiry.
func TestStreamSessionIdleExpiry(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)
	const idle = 2 * time.Second // lease bucket: window 1s, lease 3s

	idleS := newSession(t, st, func(ns *store.NewStreamSession) { ns.IdleTimeout = idle })
	polled := newSession(t, st, func(ns *store.NewStreamSession) { ns.IdleTimeout = idle })

	// Keep one alive by polling, well past its idle timeout.
	var last *store.PollResult
	// (past its first bucket lease's 3s TTL: the polls moved it.)
	for end := time.Now().Add(idle + 1500*time.Millisecond); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		r, err := st.PollStreamSession(ctx, ws1a1, polled.ID, store.PollRequest{})
		if err != nil {
			t.Fatalf("poll kept alive: %v", err)
		}
		last = r
	}
	// The idle one expired on time: present before ExpiresAt, absent after.
	gone := waitGone(t, func(ctx context.Context) error { _, err := st.GetStreamSession(ctx, ws1a1, idleS.ID); return err },
		time.Now().Add(10*time.Second))
	if gone.Before(idleS.ExpiresAt) {
		t.Errorf("idle session gone at %s, before its ExpiresAt", gone.Sub(idleS.CreatedAt))
	}
	t.Logf("idle session: expires %s after creation, seen gone at %s", idleS.ExpiresAt.Sub(idleS.CreatedAt), gone.Sub(idleS.CreatedAt))
	// Physically deleted by the lease within TTL + 2 windows + etcd's scan.
	del := rawGone(t, cli, "/crank/v1/stream-sessions/"+idleS.ID, idleS.ExpiresAt.Add(2*time.Second+2*time.Second))
	t.Logf("idle session deleted from etcd %s after its ExpiresAt", del.Sub(idleS.ExpiresAt))

	// The polled one lives idle after its last poll, then goes.
	if last.StreamSession.Expired(time.Now()) {
		t.Fatalf("polled session expired while polled: %+v", last.StreamSession)
	}
	gone = waitGone(t, func(ctx context.Context) error { _, err := st.GetStreamSession(ctx, ws1a1, polled.ID); return err },
		time.Now().Add(10*time.Second))
	if gone.Before(last.StreamSession.LastPollAt.Add(idle)) {
		t.Errorf("polled session gone %s after its last poll, idle timeout %s", gone.Sub(last.StreamSession.LastPollAt), idle)
	}
}

// Lifetime expiry: polls do not keep a session past its max lifetime.
func TestStreamSessionLifetimeExpiry(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	s := newSession(t, st, func(ns *store.NewStreamSession) {
		ns.IdleTimeout, ns.MaxLifetime, ns.Owned = 2*time.Second, 3*time.Second, true
	})
	end := s.CreatedAt.Add(3 * time.Second)
	// Readable for a moment past it, until its reader's close is stored
	// (lifetimeCloseGrace, 2s): no longer.
	var err error
	for {
		_, err = st.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{})
		if err != nil {
			break
		}
		if time.Now().After(end.Add(7 * time.Second)) {
			t.Fatal("session outlived its max lifetime and its close grace by 5s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	wantErr(t, "poll after the max lifetime", err, store.ErrNotFound)
	if now := time.Now(); now.Before(end) {
		t.Errorf("gone %s after creation, before its 3s lifetime", now.Sub(s.CreatedAt))
	}
	// The runner learns it the same way.
	_, err = st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("late")})
	wantErr(t, "append after the max lifetime", err, store.ErrNotFound)
	del := rawGone(t, cli, "/crank/v1/stream-sessions/"+s.ID, end.Add(5*time.Second))
	t.Logf("deleted from etcd %s after the end of its lifetime", del.Sub(end))
}

func TestCleanupExpired(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	var mu sync.Mutex
	offset := time.Duration(0)
	store.SetClock(st, func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset) })

	var ids []string
	for i := range 3 {
		s := newSession(t, st, func(ns *store.NewStreamSession) { ns.Owned = i == 0; ns.IdleTimeout = time.Duration(i+1) * time.Minute })
		if _, err := st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("a", "b")}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	keep := newSession(t, st, func(ns *store.NewStreamSession) { ns.IdleTimeout, ns.MaxLifetime = 24*time.Hour, 48*time.Hour })
	job, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "op", MaxRuntime: time.Minute, Retention: time.Minute, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	// An orphaned item set (its session deleted behind the store's back)
	// and a stale index entry (its job deleted likewise).
	orphan := newSession(t, st, func(ns *store.NewStreamSession) { ns.IdleTimeout, ns.MaxLifetime = 24*time.Hour, 48*time.Hour })
	if _, err := st.AppendStreamSessionItems(ctx, orphan.ID, store.Append{Items: items("x")}); err != nil {
		t.Fatal(err)
	}
	ghost, err := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "op", MaxRuntime: 24 * time.Hour, Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"stream-sessions/" + orphan.ID, "jobs/" + ghost.ID} {
		if _, err := cli.Delete(ctx, "/crank/v1/"+k); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing has expired yet.
	rep, err := st.CleanupExpired(ctx)
	// Stale index entries: the job's running entry, its list entry, and
	// the open-entity entries (quota index) of the job and the session.
	if err != nil || rep.StreamSessions != 0 || rep.Jobs != 0 || rep.ItemSets != 1 || rep.StaleIndex != 4 {
		t.Fatalf("cleanup now: %+v, %v", rep, err)
	}
	// Two hours later every short-lived session and the job have expired
	// logically (their leases are still running on etcd's clock).
	mu.Lock()
	offset = 2 * time.Hour
	mu.Unlock()
	for _, id := range ids {
		if _, err := st.GetStreamSession(ctx, ws1a1, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired session %s still readable: %v", id, err)
		}
	}
	rep, err = st.CleanupExpired(ctx)
	if err != nil || rep.StreamSessions != 3 || rep.Jobs != 1 || rep.ItemSets != 0 || rep.StaleIndex != 0 {
		t.Fatalf("cleanup later: %+v, %v", rep, err)
	}
	if rep, err := st.CleanupExpired(ctx); err != nil || rep != (store.CleanupReport{}) {
		t.Fatalf("second cleanup: %+v, %v", rep, err)
	}
	// Left in etcd: the long-lived session with its open-entity entry, and
	// the owner registration.
	r, err := cli.Get(ctx, "/crank/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, kv := range r.Kvs {
		left = append(left, strings.TrimPrefix(string(kv.Key), "/crank/v1/"))
	}
	if len(left) != 3 || left[0] != "active/sessions/ws-1/agent-1/"+keep.ID || left[1] != "owners/"+st.OwnerID() || left[2] != "stream-sessions/"+keep.ID {
		t.Fatalf("left after cleanup: %q", left)
	}
	_ = job
}

// Sessions, their items and index entries share bucket leases: a burst of
// sessions costs a handful of leases, not one each.
func TestStreamSessionLeaseSharing(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			s, err := st.CreateStreamSession(ctx, store.NewStreamSession{Scope: ws1a1, OperationID: "op", IdleTimeout: 5 * time.Minute, MaxLifetime: time.Hour, Owned: true})
			if err == nil {
				_, err = st.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("a", "b")})
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r, err := cli.Get(ctx, "/crank/v1/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]int{}
	for _, kv := range r.Kvs {
		if kv.Lease == 0 {
			t.Fatalf("%s has no lease", kv.Key)
		}
		leases[kv.Lease]++
	}
	// Records and their open-entity entries on the 5m bucket, items and
	// the running index on the ~1h bucket, the owner key on the owner
	// lease; a bucket may rotate once.
	if len(r.Kvs) != 100+100+200+100+1 || len(leases) > 5 {
		t.Fatalf("%d keys on %d leases: %v", len(r.Kvs), len(leases), leases)
	}
	t.Logf("%d keys on %d leases", len(r.Kvs), len(leases))
}
