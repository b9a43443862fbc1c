package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// nextSession waits for a session event matching ok.
func nextSession(t *testing.T, ch <-chan store.StreamSessionEvent, ok func(store.StreamSessionEvent) bool) store.StreamSessionEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatal("session watch closed")
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching session event within 10s")
		}
	}
}

func nextJob(t *testing.T, ch <-chan store.JobEvent, ok func(store.JobEvent) bool) store.JobEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-ch:
			if !open {
				t.Fatal("job watch closed")
			}
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching job event within 10s")
		}
	}
}

// Two replicas (two Stores, each with its own etcd client) share one etcd:
// what one creates the other serves, and a stop or cancel requested on one
// reaches the runner watching on the other.
func TestTwoReplicas(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{ReplicaName: "replica-b"})
	ctx := ctxT(t)

	// An MCP session initialized on A is accepted on B, with everything
	// needed to rebuild it.
	mcp := store.MCPSession{
		ID: "mcp-abc", ProtocolVersion: "2025-11-25", ClientName: "inspector", ClientVersion: "0.9", ClientTitle: "Inspector",
		ClientCapabilities: json.RawMessage(`{"roots":{"listChanged":true},"sampling":{}}`),
		InitializeParams:   json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"inspector","version":"0.9"}}`),
		Initialized:        true, LogLevel: "info", WorkspaceID: "ws-1", AgentID: "agent-1",
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond), TTL: 10 * time.Minute,
	}
	if err := a.PutMCPSession(ctx, mcp); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetMCPSession(ctx, "mcp-abc")
	if err != nil || !reflect.DeepEqual(*got, mcp) {
		t.Fatalf("MCP session on B: %+v, %v\nwant %+v", got, err, mcp)
	}

	// A stream session run by A, polled and stopped on B.
	s := newSession(t, a, func(ns *store.NewStreamSession) { ns.Owned = true })
	watch, err := a.WatchStreamSession(ctx, ws1a1, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	nextSession(t, watch, func(ev store.StreamSessionEvent) bool { return ev.StreamSession.Status == store.StreamSessionActive })
	if _, err := a.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("x1", "x2")}); err != nil {
		t.Fatal(err)
	}
	r, err := b.PollStreamSession(ctx, ws1a1, s.ID, store.PollRequest{})
	if err != nil || len(r.Items) != 2 || string(r.Items[1].Data) != "x2" {
		t.Fatalf("poll on B: %+v, %v", r, err)
	}
	// B is not the owner: it cannot feed or finish A's session.
	_, err = b.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("forged")})
	wantErr(t, "append from B", err, store.ErrNotOwner)
	_, err = b.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: store.StreamSessionCompleted})
	wantErr(t, "finish from B", err, store.ErrNotOwner)

	if _, err := b.CloseStreamSession(ctx, ws1a1, s.ID, "from B"); err != nil {
		t.Fatal(err)
	}
	ev := nextSession(t, watch, func(ev store.StreamSessionEvent) bool { return ev.StreamSession.Status == store.StreamSessionStopping })
	if ev.StreamSession.StopReason != "from B" {
		t.Fatalf("stop reached A as %+v", ev.StreamSession)
	}
	if _, err := a.FinishStreamSession(ctx, s.ID, store.StreamSessionEnd{Status: store.StreamSessionStopped}); err != nil {
		t.Fatal(err)
	}
	if g, err := b.GetStreamSession(ctx, ws1a1, s.ID); err != nil || g.Status != store.StreamSessionStopped {
		t.Fatalf("B sees %+v, %v", g, err)
	}

	// A job run by A, cancelled on B.
	j := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true })
	jw, err := a.WatchJob(ctx, ws1a1, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.UpdateJob(ctx, j.ID, store.JobUpdate{Progress: json.RawMessage(`{"pct":10}`)}); err != nil {
		t.Fatal(err)
	}
	if g, err := b.GetJob(ctx, ws1a1, j.ID); err != nil || string(g.Progress) != `{"pct":10}` {
		t.Fatalf("progress on B: %+v, %v", g, err)
	}
	if _, err := b.CancelJob(ctx, ws1a1, j.ID, "from B"); err != nil {
		t.Fatal(err)
	}
	nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job != nil && ev.Job.Status == store.JobCanceling })
	if _, err := a.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobCanceled}); err != nil {
		t.Fatal(err)
	}
	nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job != nil && ev.Job.Status == store.JobCanceled })

	// A queued job is claimed by whichever replica takes it.
	q := newJob(t, a, nil)
	c, err := b.ClaimJob(ctx, q.ID)
	if err != nil || c.Owner != b.OwnerID() || b.OwnerID() == a.OwnerID() {
		t.Fatalf("claim on B: %+v, %v", c, err)
	}

	// A watch ends with Gone when its entity is deleted.
	gone := newSession(t, a, nil)
	gw, err := b.WatchStreamSession(ctx, ws1a1, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.EtcdClient(a).Delete(ctx, "/crank/v1/stream-sessions/"+gone.ID); err != nil {
		t.Fatal(err)
	}
	nextSession(t, gw, func(ev store.StreamSessionEvent) bool { return ev.Gone })
	if _, open := <-gw; open {
		t.Fatal("watch open after Gone")
	}
}

// sweeper runs RunSweeper on st until the test ends.
func sweeper(t *testing.T, st *store.Etcd, cfg store.SweeperConfig) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.RunSweeper(ctx, cfg)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// When a replica dies (its owner lease is not renewed), the sweeper on
// another replica marks its running entities failed — stopping sessions
// stopped — within about the owner TTL, without waiting for their own
// expiry.
func TestOwnerLostMarksFailed(t *testing.T) {
	t.Parallel()
	emb, _ := storetest.Embedded(t)
	const ownerTTL = 2 * time.Second
	a := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: ownerTTL})
	b := storetest.Open(t, emb, store.EtcdConfig{}) // the survivor: default owner TTL
	ctx := ctxT(t)

	running := newSession(t, a, func(ns *store.NewStreamSession) { ns.Owned = true; ns.IdleTimeout = time.Hour })
	stopping := newSession(t, a, func(ns *store.NewStreamSession) { ns.Owned = true; ns.IdleTimeout = time.Hour })
	if _, err := b.CloseStreamSession(ctx, ws1a1, stopping.ID, "bye"); err != nil {
		t.Fatal(err)
	}
	job := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	bJob := newJob(t, b, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	jw, err := b.WatchJob(ctx, ws1a1, job.ID)
	if err != nil {
		t.Fatal(err)
	}

	var sweeps sync.Map
	// A long interval: the owner watch must do the work.
	sweeper(t, b, store.SweeperConfig{Interval: time.Hour, OnSweep: func(r store.SweepReport, err error) {
		if r.Failed > 0 {
			sweeps.Store(time.Now(), r)
		}
	}})
	time.Sleep(200 * time.Millisecond) // let the first sweep find nothing
	crashed := time.Now()
	store.Crash(a) // like kill -9: no revoke, no more keep-alives

	ev := nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job != nil && ev.Job.Status == store.JobFailed })
	took := time.Since(crashed)
	t.Logf("A's job marked failed %s after A crashed (owner TTL %s)", took, ownerTTL)
	if took > ownerTTL+5*time.Second {
		t.Errorf("marking took %s, owner TTL %s", took, ownerTTL)
	}
	var e struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	}
	if err := json.Unmarshal(ev.Job.Error, &e); err != nil || e.Code != "owner_lost" || !e.Retryable {
		t.Errorf("error_json %s", ev.Job.Error)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err1 := b.GetStreamSession(ctx, ws1a1, running.ID)
		s, err2 := b.GetStreamSession(ctx, ws1a1, stopping.ID)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if r.Status == store.StreamSessionFailed && s.Status == store.StreamSessionStopped {
			if !strings.Contains(string(r.Error), "owner_lost") {
				t.Errorf("session error_json %s", r.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions not swept: %s, %s", r.Status, s.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// B's own job is untouched.
	if g, err := b.GetJob(ctx, ws1a1, bJob.ID); err != nil || g.Status != store.JobRunning {
		t.Fatalf("B's job: %+v, %v", g, err)
	}
	// A sweep now finds nothing left.
	if rep, err := b.SweepOrphans(ctx, nil); err != nil || rep != (store.SweepReport{}) {
		t.Fatalf("sweep after: %+v, %v", rep, err)
	}
}

// With an Adopt hook, a surviving replica takes an orphan over instead —
// or marks it failed when the hook declines.
func TestOwnerLostAdopt(t *testing.T) {
	t.Parallel()
	emb, _ := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)

	resumable := newSession(t, a, func(ns *store.NewStreamSession) {
		ns.Owned = true
		ns.State = json.RawMessage(`{"last_event_id":"41"}`)
	})
	notResumable := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true })
	resumableJob := newJob(t, a, func(nj *store.NewJob) { nj.Owned = true })
	// Its runner recorded the upstream's ticket, which the adopter follows.
	if _, err := a.UpdateJob(ctx, resumableJob.ID, store.JobUpdate{Follow: json.RawMessage(`{"ticket":"T-1"}`)}); err != nil {
		t.Fatal(err)
	}
	// A graceful Close revokes the owner lease: orphans are visible at once.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var offered []store.Orphan
	adopt := func(_ context.Context, o store.Orphan) error {
		offered = append(offered, o)
		if o.StreamSession != nil {
			return nil
		}
		if o.Job.ID == resumableJob.ID {
			if string(o.Job.Follow) != `{"ticket":"T-1"}` {
				return fmt.Errorf("follow_json %s", o.Job.Follow)
			}
			return nil
		}
		return errors.New("its runner needs the caller's token")
	}
	var rep store.SweepReport
	var err error
	for deadline := time.Now().Add(10 * time.Second); rep.Adopted+rep.Failed < 3; {
		var r store.SweepReport
		r, err = b.SweepOrphans(ctx, adopt)
		rep.Adopted, rep.Failed = rep.Adopted+r.Adopted, rep.Failed+r.Failed
		if time.Now().After(deadline) {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
	}
	if err != nil || rep.Adopted != 2 || rep.Failed != 1 || len(offered) != 3 {
		t.Fatalf("sweep: %+v, %v, offered %d", rep, err, len(offered))
	}
	s, err := b.GetStreamSession(ctx, ws1a1, resumable.ID)
	if err != nil || s.Owner != b.OwnerID() || s.Status != store.StreamSessionActive || string(s.State) != `{"last_event_id":"41"}` {
		t.Fatalf("adopted session: %+v, %v", s, err)
	}
	// The new owner runs it.
	if _, err := b.AppendStreamSessionItems(ctx, s.ID, store.Append{Items: items("resumed")}); err != nil {
		t.Fatal(err)
	}
	if j, err := b.GetJob(ctx, ws1a1, notResumable.ID); err != nil || j.Status != store.JobFailed ||
		!strings.Contains(string(j.Error), "owner_lost") || !strings.Contains(string(j.Error), "needs the caller's token") {
		t.Fatalf("declined job: %+v, %v", j, err)
	}
	if j, err := b.GetJob(ctx, ws1a1, resumableJob.ID); err != nil || j.Status != store.JobRunning || j.Owner != b.OwnerID() {
		t.Fatalf("adopted job: %+v, %v", j, err)
	}
}

// The kill -9 case with a real process: a helper process (this test binary)
// registers as an owner, starts a job and a session, and is killed with
// SIGKILL; the sweeper here marks both failed within a bounded time.
func TestReplicaKilled(t *testing.T) {
	t.Parallel()
	emb, st := storetest.Embedded(t)
	ctx := ctxT(t)

	cmd := exec.Command(os.Args[0], "-test.run=^TestReplicaHelperProcess$")
	creds, _ := json.Marshal(emb.ClientTLS())
	cmd.Env = append(os.Environ(), "CRANK_STORE_HELPER="+strings.Join(emb.Endpoints(), ","), "CRANK_STORE_HELPER_TLS="+string(creds))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var ids struct{ Job, Session, Owner string }
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "IDS "); ok {
			if err := json.Unmarshal([]byte(line), &ids); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if ids.Job == "" {
		t.Fatalf("helper gave no IDs: %v", sc.Err())
	}
	if j, err := st.GetJob(ctx, ws1a1, ids.Job); err != nil || j.Status != store.JobRunning || j.Owner != ids.Owner {
		t.Fatalf("helper's job: %+v, %v", j, err)
	}
	sweeper(t, st, store.SweeperConfig{Interval: time.Hour})
	jw, err := st.WatchJob(ctx, ws1a1, ids.Job)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	nextJob(t, jw, func(ev store.JobEvent) bool { return ev.Job != nil && ev.Job.Status == store.JobFailed })
	t.Logf("killed replica's job marked failed %s after SIGKILL (owner TTL 2s)", time.Since(killed))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := st.GetStreamSession(ctx, ws1a1, ids.Session)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == store.StreamSessionFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed replica's session still %s", s.Status)
		}
	}
}

// TestReplicaHelperProcess is the replica TestReplicaKilled kills; it does
// nothing when run normally.
func TestReplicaHelperProcess(t *testing.T) {
	eps := os.Getenv("CRANK_STORE_HELPER")
	if eps == "" {
		t.Skip("helper process for TestReplicaKilled")
	}
	ctx := context.Background()
	var creds store.TLSConfig
	_ = json.Unmarshal([]byte(os.Getenv("CRANK_STORE_HELPER_TLS")), &creds)
	st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: strings.Split(eps, ","), TLS: &creds, OwnerTTL: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	j, err1 := st.CreateJob(ctx, store.NewJob{Scope: ws1a1, OperationID: "export", MaxRuntime: time.Hour, Owned: true})
	s, err2 := st.CreateStreamSession(ctx, store.NewStreamSession{Scope: ws1a1, OperationID: "follow", IdleTimeout: time.Hour, MaxLifetime: time.Hour, Owned: true})
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	b, _ := json.Marshal(map[string]string{"Job": j.ID, "Session": s.ID, "Owner": st.OwnerID()})
	fmt.Printf("IDS %s\n", b)
	select {} // until killed
}

// The sweepers of several replicas elect one leader for expiry cleanups,
// which deletes expired entities ahead of their leases.
func TestSweeperCleanupLeader(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	cli := store.EtcdClient(a)

	later := func() time.Time { return time.Now().Add(3 * time.Hour) }
	var ids []string
	for range 3 {
		ids = append(ids, newSession(t, a, nil).ID)
	}
	j := newJob(t, b, func(nj *store.NewJob) { nj.Owned = true })
	// Both replicas' clocks say the entities expired long ago (their leases,
	// on etcd's clock, run for another hour).
	store.SetClock(a, later)
	store.SetClock(b, later)
	for _, st := range []*store.Etcd{a, b} {
		sweeper(t, st, store.SweeperConfig{Interval: time.Hour, CleanupInterval: 100 * time.Millisecond})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := cli.Get(ctx, "/crank/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var entities int
		for _, kv := range r.Kvs {
			k := string(kv.Key)
			if strings.Contains(k, "/stream-sessions/") || strings.Contains(k, "/jobs/") || strings.Contains(k, "/running/") {
				entities++
			}
		}
		if entities == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d expired entity keys left: %v, %v", entities, ids, j.ID)
		}
	}
	if l := sweepLeaderLease(t, cli); l != store.OwnerLease(a) && l != store.OwnerLease(b) {
		t.Fatalf("leader lease %x is neither replica's owner lease (%x, %x)", l, store.OwnerLease(a), store.OwnerLease(b))
	}
}

// The sweep reads the running index a page at a time: a dead replica's
// orphans beyond one page are all marked failed, a live replica's left
// alone, wherever they fall in the pages.
func TestSweepOrphansPages(t *testing.T) {
	t.Parallel()
	emb, _ := storetest.Embedded(t)
	a := storetest.Open(t, emb, store.EtcdConfig{})
	b := storetest.Open(t, emb, store.EtcdConfig{})
	ctx := ctxT(t)
	const n = 300 // more than one page of 256
	for i := range n {
		st := a
		if i%10 == 0 {
			st = b
		}
		newJob(t, st, func(nj *store.NewJob) { nj.Owned = true; nj.MaxRuntime = time.Hour })
	}
	if err := a.Close(); err != nil { // revokes A's owner lease
		t.Fatal(err)
	}
	rep, err := b.SweepOrphans(ctx, nil)
	if err != nil || rep.Failed != n-n/10 {
		t.Fatalf("sweep: %+v, %v; want %d failed", rep, err, n-n/10)
	}
	if rep, err := b.SweepOrphans(ctx, nil); err != nil || rep != (store.SweepReport{}) {
		t.Fatalf("second sweep: %+v, %v", rep, err)
	}
	if open, err := b.CountOpen(ctx, ws1a1, true, false); err != nil || open != n/10 {
		t.Fatalf("open jobs after the sweep: %d, %v; want B's %d", open, err, n/10)
	}
}
