package store_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// listAll pages through the jobs scope sees, limit at a time, checking
// that only the last page is short and has no next position.
func listAll(t *testing.T, st *store.Etcd, scope store.Scope, limit int) []string {
	t.Helper()
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		jobs, next, err := st.ListJobs(ctxT(t), scope, after, limit)
		if err != nil {
			t.Fatalf("ListJobs page %d after %q: %v", pages, after, err)
		}
		if len(jobs) > limit || next != "" && len(jobs) != limit {
			t.Fatalf("page %d: %d jobs (limit %d), next %q", pages, len(jobs), limit, next)
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if next == "" {
			return ids
		}
		if pages > 100 {
			t.Fatal("ListJobs does not end")
		}
		after = next
	}
}

// ListJobs pages through the caller's jobs newest first (the same instant:
// by ID), whatever the page size: its agent's own jobs and its workspace's
// shared ones, never another agent's or workspace's.
func TestListJobsPages(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	base := time.Now()
	var tick time.Duration
	store.SetClock(st, func() time.Time { return base.Add(tick) })

	type made struct {
		job   *store.AsyncJobHandle
		scope store.Scope
		agent bool // agent-scoped
	}
	var all []made
	create := func(scope store.Scope, agentScoped bool) {
		all = append(all, made{newJob(t, st, func(nj *store.NewJob) {
			nj.Scope, nj.AgentScoped, nj.MaxRuntime = scope, agentScoped, time.Hour
		}), scope, agentScoped})
	}
	for i := range 12 {
		tick = time.Duration(i) * time.Millisecond
		if i == 5 || i == 7 || i == 9 {
			tick -= time.Millisecond // created in the same instant as the one before
		}
		switch i % 4 {
		case 0, 1:
			create(ws1a1, true)
		case 2:
			create(ws1a2, false) // the workspace's: agent-1 sees it too
		case 3:
			create(ws1a2, true)
		}
	}
	create(ws2a1, true)
	create(ws2a1, false)

	for _, scope := range []store.Scope{ws1a1, ws1a2, ws2a1, {WorkspaceID: "ws-3"}} {
		var want []*store.AsyncJobHandle
		for _, m := range all {
			if m.scope.WorkspaceID == scope.WorkspaceID && (!m.agent || m.scope.AgentID == scope.AgentID) {
				want = append(want, m.job)
			}
		}
		slices.SortFunc(want, func(a, b *store.AsyncJobHandle) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		var wantIDs []string
		for _, j := range want {
			wantIDs = append(wantIDs, j.ID)
		}
		for _, limit := range []int{1, 2, 3, len(want), len(want) + 1, 0} {
			if limit == 0 && len(want) == 0 {
				continue
			}
			got := listAll(t, st, scope, max(limit, 1))
			if limit == 0 {
				jobs, next, err := st.ListJobs(ctxT(t), scope, "", 0)
				if err != nil || next != "" {
					t.Fatalf("limit 0: next %q, %v", next, err)
				}
				got = nil
				for _, j := range jobs {
					got = append(got, j.ID)
				}
			}
			if !slices.Equal(got, wantIDs) {
				t.Errorf("%v, pages of %d: %v, want %v", scope, limit, got, wantIDs)
			}
		}
	}
	if len(listAll(t, st, ws1a1, 100)) != 9 {
		t.Errorf("agent-1 of ws-1 sees %v, want its 6 jobs and the workspace's 3", listAll(t, st, ws1a1, 100))
	}
}

// A position stays valid when its job is gone: the next page starts right
// after where that job stood. Entries of jobs that are gone or expired are
// skipped, and cleanups remove them; a position ListJobs did not hand out
// is ErrInvalid.
func TestListJobsPositions(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	var ids []string // oldest first
	for i := range 6 {
		j := newJob(t, st, func(nj *store.NewJob) {
			nj.AgentScoped = true
			if i == 4 {
				nj.Retention = time.Millisecond // expires as soon as it is cancelled
			}
		})
		ids = append(ids, j.ID)
		time.Sleep(2 * time.Millisecond)
	}
	first, next, err := st.ListJobs(ctx, ws1a1, "", 2)
	if err != nil || len(first) != 2 || first[0].ID != ids[5] || first[1].ID != ids[4] || next == "" {
		t.Fatalf("first page: %v, %q, %v", first, next, err)
	}

	// The last job of the page finishes and expires; the cleanup deletes it
	// and its list entry.
	if _, err := st.CancelJob(ctx, ws1a1, ids[4], "test"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// Another job's record goes without its list entry, as when the record
	// was deleted by a replica that does not keep the list.
	if _, err := cli.Delete(ctx, "/crank/v1/jobs/"+ids[2]); err != nil {
		t.Fatal(err)
	}
	page, next2, err := st.ListJobs(ctx, ws1a1, next, 2)
	if err != nil || len(page) != 2 || page[0].ID != ids[3] || page[1].ID != ids[1] || next2 == "" {
		t.Fatalf("page after the gone job: %v, %q, %v", page, next2, err)
	}
	if page, next3, err := st.ListJobs(ctx, ws1a1, next2, 2); err != nil || len(page) != 1 || page[0].ID != ids[0] || next3 != "" {
		t.Fatalf("last page: %v, %q, %v", page, next3, err)
	}
	if all := listAll(t, st, ws1a1, 10); !slices.Equal(all, []string{ids[5], ids[3], ids[1], ids[0]}) {
		t.Fatalf("all: %v", all)
	}

	// The expired job goes with its entry; the job without a record leaves
	// two entries behind: in the list and in the open-entity index.
	rep, err := st.CleanupExpired(ctx)
	if err != nil || rep.Jobs != 1 || rep.StaleIndex != 2 {
		t.Fatalf("cleanup: %+v, %v", rep, err)
	}
	r, err := cli.Get(ctx, "/crank/v1/job-list/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(r.Kvs) != 4 {
		t.Fatalf("list entries after the cleanup: %v, %v", r.Kvs, err)
	}
	if page, _, err := st.ListJobs(ctx, ws1a1, next, 2); err != nil || len(page) != 2 || page[0].ID != ids[3] {
		t.Fatalf("the position after its job was cleaned up: %v, %v", page, err)
	}

	for _, bad := range []string{"garbage", "e30", base64.RawURLEncoding.EncodeToString([]byte(`{"c":1,"i":"job_../x"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"c":-5,"i":"` + ids[0] + `"}`))} {
		_, _, err := st.ListJobs(ctx, ws1a1, bad, 2)
		wantErr(t, "position "+bad, err, store.ErrInvalid)
		if !strings.Contains(err.Error(), "job list position") {
			t.Errorf("position %q: %v", bad, err)
		}
	}
}

// A job's list entry shares its record's lease, so both go together when
// the record moves to a lease of its retention.
func TestListJobsEntryFollowsRecordLease(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)
	j := newJob(t, st, func(nj *store.NewJob) { nj.Owned = true; nj.Retention = 10 * time.Minute })
	leases := func() (record, entry int64) {
		t.Helper()
		r, err := cli.Get(ctx, "/crank/v1/jobs/"+j.ID)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("record: %v, %v", r, err)
		}
		l, err := cli.Get(ctx, "/crank/v1/job-list/", clientv3.WithPrefix())
		if err != nil || len(l.Kvs) != 1 || !strings.HasSuffix(string(l.Kvs[0].Key), "/"+j.ID) ||
			!strings.HasPrefix(string(l.Kvs[0].Key), "/crank/v1/job-list/ws-1/workspace/") {
			t.Fatalf("list entry: %v, %v", l, err)
		}
		return r.Kvs[0].Lease, l.Kvs[0].Lease
	}
	before, entry := leases()
	if before == 0 || before != entry {
		t.Fatalf("running: record lease %x, list entry lease %x", before, entry)
	}
	if _, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded}); err != nil {
		t.Fatal(err)
	}
	after, entry := leases()
	if after == before || after != entry {
		t.Fatalf("finished: record lease %x (running: %x), list entry lease %x", after, before, entry)
	}
}

// countingProxy forwards TCP connections to target and counts the bytes
// that flow back from it: what a client reads from etcd.
func countingProxy(t *testing.T, target string) (addr string, received *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	received = new(atomic.Int64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(countingWriter{c, received}, s); c.Close() }()
		}
	}()
	return l.Addr().String(), received
}

// countingWriter counts what it writes to w.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// A page of ListJobs — and GetJob — reads the job records, never the jobs'
// results: listing jobs with large results costs what the page returns.
func TestListJobsReadsNoResults(t *testing.T) {
	t.Parallel()
	emb, st := storetest.Embedded(t)
	ctx := ctxT(t)
	result := json.RawMessage(`"` + strings.Repeat("r", 256<<10) + `"`)
	var ids []string
	for range 20 {
		j := newJob(t, st, func(nj *store.NewJob) { nj.Owned = true })
		if _, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: result}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}

	// A second client reads through a proxy that counts what etcd sends.
	addr, received := countingProxy(t, strings.TrimPrefix(emb.Endpoints()[0], "https://"))
	cfg := emb.StoreConfig()
	cfg.Endpoints = []string{"https://" + addr}
	cfg.OpTimeout = storetest.TestOpTimeout
	proxied, err := store.NewEtcd(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer proxied.Close()

	measure := func(what string, limit int64, f func()) {
		t.Helper()
		before := received.Load()
		f()
		time.Sleep(100 * time.Millisecond) // let the proxy count the answer
		if got := received.Load() - before; got > limit {
			t.Errorf("%s read %d bytes from etcd, want at most %d (the results are %d bytes each)", what, got, limit, len(result))
		}
	}
	measure("ListJobs of 20 jobs", 64<<10, func() {
		jobs, _, err := proxied.ListJobs(ctx, ws1a1, "", 50)
		if err != nil || len(jobs) != 20 {
			t.Fatalf("ListJobs: %d jobs, %v", len(jobs), err)
		}
	})
	measure("GetJob", 16<<10, func() {
		if _, err := proxied.GetJob(ctx, ws1a1, ids[0]); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := proxied.GetJobResult(ctx, ws1a1, ids[0]); err != nil {
		t.Fatal(err)
	}
	// The proxy counts as it copies, after the client has its answer: wait
	// for the count to catch up rather than read it at once.
	for deadline := time.Now().Add(10 * time.Second); received.Load() < int64(len(result)) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if received.Load() < int64(len(result)) {
		t.Errorf("the proxy counted %d bytes after GetJobResult of a %d-byte result: it does not count", received.Load(), len(result))
	}
}
