package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

func newJob(t *testing.T, st *store.Etcd, mut func(*store.NewJob)) *store.AsyncJobHandle {
	t.Helper()
	nj := store.NewJob{Scope: ws1a1, OperationID: "reindex", MaxRuntime: time.Minute}
	if mut != nil {
		mut(&nj)
	}
	j, err := st.CreateJob(ctxT(t), nj)
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	return j
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	q := newJob(t, st, func(nj *store.NewJob) { nj.Progress = json.RawMessage(`{"pct":0}`) })
	if !strings.HasPrefix(q.ID, store.JobIDPrefix) || q.Status != store.JobQueued || q.Owner != "" ||
		q.Retention != store.DefaultJobRetention || !q.ExpiresAt.Equal(q.CreatedAt.Add(time.Minute+time.Hour)) {
		t.Fatalf("queued job: %+v", q)
	}
	c, err := st.ClaimJob(ctx, q.ID)
	if err != nil || c.Status != store.JobRunning || c.Owner != st.OwnerID() || c.Owner == "" {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if _, err := st.ClaimJob(ctx, q.ID); !errors.Is(err, store.ErrIllegalTransition) {
		t.Fatalf("claim twice: %v", err)
	}
	time.Sleep(5 * time.Millisecond)
	p, err := st.UpdateJob(ctx, q.ID, store.JobUpdate{Progress: json.RawMessage(`{"pct":40}`)})
	if err != nil || p.Status != store.JobRunning || string(p.Progress) != `{"pct":40}` || !p.UpdatedAt.After(c.UpdatedAt) {
		t.Fatalf("progress: %+v, %v", p, err)
	}
	f, err := st.UpdateJob(ctx, q.ID, store.JobUpdate{Status: store.JobSucceeded, Progress: json.RawMessage(`{"pct":100}`), Result: json.RawMessage(`{"docs":12}`)})
	if err != nil || f.Status != store.JobSucceeded || string(f.Result) != `{"docs":12}` || f.FinishedAt.IsZero() ||
		!f.ExpiresAt.Equal(f.FinishedAt.Add(time.Hour)) {
		t.Fatalf("finish: %+v, %v", f, err)
	}
	g, err := st.GetJobResult(ctx, ws1a1, q.ID)
	if err != nil || g.Status != store.JobSucceeded || string(g.Result) != `{"docs":12}` || string(g.Progress) != `{"pct":100}` {
		t.Fatalf("get finished: %+v, %v", g, err)
	}
	// GetJob reads the record alone: the size of the result, not the
	// result.
	if g, err := st.GetJob(ctx, ws1a1, q.ID); err != nil || g.Result != nil || g.ResultBytes != len(`{"docs":12}`) {
		t.Fatalf("GetJob of a finished job: %+v, %v", g, err)
	}
	if _, err := st.GetJobResult(ctx, store.Scope{WorkspaceID: "other"}, q.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetJobResult out of scope: %v", err)
	}
	// A finished job cannot change, and cancelling it says why.
	_, err = st.UpdateJob(ctx, q.ID, store.JobUpdate{Progress: json.RawMessage(`{}`)})
	wantErr(t, "update a finished job", err, store.ErrIllegalTransition)
	_, err = st.CancelJob(ctx, ws1a1, q.ID, "late")
	wantErr(t, "cancel a succeeded job", err, store.ErrIllegalTransition)
	if !strings.Contains(err.Error(), "succeeded") {
		t.Errorf("cancel error does not give the status: %v", err)
	}
	// The index entry went with the finish; the record lives on its
	// retention lease.
	if r, err := cli.Get(ctx, "/crank/v1/running/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Fatalf("running index after finish: %v %v", r, err)
	}
	r, err := cli.Get(ctx, "/crank/v1/jobs/"+q.ID)
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("raw job: %v %v", r, err)
	}

	// Validation names the field.
	for field, nj := range map[string]store.NewJob{
		"operation_id":  {Scope: ws1a1, MaxRuntime: time.Minute},
		"max_runtime":   {Scope: ws1a1, OperationID: "x"},
		"progress_json": {Scope: ws1a1, OperationID: "x", MaxRuntime: time.Minute, Progress: json.RawMessage("{")},
		"agent_id":      {Scope: store.Scope{WorkspaceID: "w"}, AgentScoped: true, OperationID: "x", MaxRuntime: time.Minute},
	} {
		if _, err := st.CreateJob(ctx, nj); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	_, err = st.UpdateJob(ctx, newJob(t, st, nil).ID, store.JobUpdate{Result: json.RawMessage("not json")})
	wantErr(t, "invalid result_json", err, store.ErrInvalid)
	// A record over the request limit is refused with ErrTooLarge.
	maxValue, _ := store.Limits(st)
	huge := json.RawMessage(`"` + strings.Repeat("r", maxValue) + `"`)
	_, err = st.UpdateJob(ctx, newJob(t, st, func(nj *store.NewJob) { nj.Owned = true }).ID, store.JobUpdate{Status: store.JobSucceeded, Result: huge})
	wantErr(t, "result over the request limit", err, store.ErrTooLarge)
	if !strings.Contains(err.Error(), "result_json") {
		t.Errorf("too-large error does not name the field: %v", err)
	}
}

// jobIn returns a job brought into status from.
func jobIn(t *testing.T, st *store.Etcd, from store.JobStatus) *store.AsyncJobHandle {
	t.Helper()
	ctx := ctxT(t)
	j := newJob(t, st, func(nj *store.NewJob) { nj.Owned = from != store.JobQueued })
	var err error
	switch from {
	case store.JobQueued, store.JobRunning:
		return j
	case store.JobCanceling:
		j, err = st.CancelJob(ctx, ws1a1, j.ID, "test")
	default:
		j, err = st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: from})
	}
	if err != nil || j.Status != from {
		t.Fatalf("bring job to %s: %+v, %v", from, j, err)
	}
	return j
}

// Every transition of the job status machine, through the store.
func TestJobEveryTransition(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	all := []store.JobStatus{store.JobQueued, store.JobRunning, store.JobCanceling, store.JobSucceeded, store.JobFailed, store.JobCanceled}
	for _, from := range all {
		for _, to := range all[1:] {
			j := jobIn(t, st, from)
			var got *store.AsyncJobHandle
			var err error
			switch to {
			case store.JobRunning:
				got, err = st.ClaimJob(ctx, j.ID)
			case store.JobCanceling, store.JobCanceled:
				if to == store.JobCanceled && from != store.JobQueued {
					// A runner reports the cancellation's end.
					got, err = st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: to})
				} else {
					got, err = st.CancelJob(ctx, ws1a1, j.ID, "why")
				}
			default:
				got, err = st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: to})
			}
			switch {
			case from == store.JobRunning && to == store.JobRunning:
				// ClaimJob on a running job is refused; progress updates
				// (running → running) are tested in TestJobLifecycle.
				wantErr(t, "claim a running job", err, store.ErrIllegalTransition)
			case to == store.JobCanceling && (from == store.JobCanceling || from == store.JobCanceled || from == store.JobQueued):
				// Cancel is idempotent, and a queued job has no runner to
				// wait for: it is canceled at once.
				want := from
				if from == store.JobQueued {
					want = store.JobCanceled
				}
				if err != nil || got.Status != want {
					t.Errorf("cancel a %s job: %+v, %v", from, got, err)
				}
			case from.CanBecome(to):
				if err != nil || got.Status != to {
					t.Errorf("%s → %s: %+v, %v", from, to, got, err)
				}
			default:
				var te *store.TransitionError
				if !errors.As(err, &te) || te.From != string(from) || te.ID != j.ID {
					t.Errorf("%s → %s: err = %v, want a TransitionError from %s", from, to, err, from)
					continue
				}
				if now, err := st.GetJob(ctx, ws1a1, j.ID); err != nil || now.Status != from || now.Revision != j.Revision {
					t.Errorf("%s → %s refused but the job changed: %+v, %v", from, to, now, err)
				}
			}
		}
	}
	// Cancel of a running job goes through canceling; of a queued one
	// straight to canceled; again is idempotent.
	j := jobIn(t, st, store.JobRunning)
	c, err := st.CancelJob(ctx, ws1a1, j.ID, "stop it")
	if err != nil || c.Status != store.JobCanceling || c.CancelReason != "stop it" || c.CancelRequestedAt.IsZero() {
		t.Fatalf("cancel running: %+v, %v", c, err)
	}
	again, err := st.CancelJob(ctx, ws1a1, j.ID, "again")
	if err != nil || again.Revision != c.Revision || again.CancelReason != "stop it" {
		t.Fatalf("cancel again: %+v, %v", again, err)
	}
	// The runner may not move a job to canceling or back to queued.
	r := jobIn(t, st, store.JobRunning)
	for _, to := range []store.JobStatus{store.JobCanceling, store.JobQueued} {
		if _, err := st.UpdateJob(ctx, r.ID, store.JobUpdate{Status: to}); !errors.Is(err, store.ErrIllegalTransition) {
			t.Errorf("runner moves a running job to %s: %v", to, err)
		}
	}
	if _, err := st.UpdateJob(ctx, r.ID, store.JobUpdate{Status: "paused"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown status: %v", err)
	}
}

// Retention: a finished job stays readable for its retention, then expires.
func TestJobRetentionExpiry(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)

	j := newJob(t, st, func(nj *store.NewJob) { nj.Owned, nj.Retention = true, 2*time.Second })
	f, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobFailed, Error: json.RawMessage(`{"message":"boom"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := st.GetJob(ctx, ws1a1, j.ID); err != nil || string(g.Error) != `{"message":"boom"}` {
		t.Fatalf("within retention: %+v %v", g, err)
	}
	gone := waitGone(t, func(ctx context.Context) error { _, err := st.GetJob(ctx, ws1a1, j.ID); return err }, time.Now().Add(10*time.Second))
	if gone.Before(f.ExpiresAt) {
		t.Errorf("gone %s after finishing, retention 2s", gone.Sub(f.FinishedAt))
	}
	del := rawGone(t, cli, "/crank/v1/jobs/"+j.ID, f.ExpiresAt.Add(4*time.Second))
	t.Logf("finished job deleted from etcd %s after its ExpiresAt", del.Sub(f.ExpiresAt))
}

// A job's result lives in a key of its own on the record's lease: the
// record stays small (GetJob, lists and watches do not read the result),
// GetJobResult reads both, a result over the limit is refused naming it
// and leaves the job as it was, and a result left without its record goes
// at the next cleanup. A record of an older release with its result inline
// still reads.
func TestJobResultKeptApart(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	ctx := ctxT(t)
	cli := store.EtcdClient(st)
	maxValue, _ := store.Limits(st)

	j := newJob(t, st, func(nj *store.NewJob) { nj.Owned = true })
	huge := json.RawMessage(`"` + strings.Repeat("r", maxValue-200) + `"`)
	_, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: huge})
	var tle *store.TooLargeError
	if !errors.As(err, &tle) || !errors.Is(err, store.ErrTooLarge) || tle.Size != len(huge) || tle.Limit >= len(huge) ||
		!strings.Contains(err.Error(), "result_json") || !strings.Contains(err.Error(), "max_request_bytes") {
		t.Fatalf("a result over the limit: %v", err)
	}
	if g, err := st.GetJob(ctx, ws1a1, j.ID); err != nil || g.Status != store.JobRunning {
		t.Fatalf("after the refused result: %+v, %v", g, err)
	}

	result := json.RawMessage(`"` + strings.Repeat("r", 100<<10) + `"`)
	f, err := st.UpdateJob(ctx, j.ID, store.JobUpdate{Status: store.JobSucceeded, Result: result})
	if err != nil || string(f.Result) != string(result) || f.ResultBytes != len(result) {
		t.Fatalf("finish with a result: %v", err)
	}
	rec, err := cli.Get(ctx, "/crank/v1/jobs/"+j.ID)
	if err != nil || len(rec.Kvs) != 1 || len(rec.Kvs[0].Value) > 2048 {
		t.Fatalf("the job record holds the result: %d bytes, %v", len(rec.Kvs[0].Value), err)
	}
	res, err := cli.Get(ctx, "/crank/v1/job-results/"+j.ID)
	if err != nil || len(res.Kvs) != 1 || string(res.Kvs[0].Value) != string(result) || res.Kvs[0].Lease != rec.Kvs[0].Lease {
		t.Fatalf("the result key: %v (lease %x, record's %x)", err, res.Kvs[0].Lease, rec.Kvs[0].Lease)
	}
	if g, err := st.GetJob(ctx, ws1a1, j.ID); err != nil || g.Result != nil || g.ResultBytes != len(result) {
		t.Fatalf("GetJob: %v", err)
	}
	if g, err := st.GetJobResult(ctx, ws1a1, j.ID); err != nil || string(g.Result) != string(result) {
		t.Fatalf("GetJobResult: %v", err)
	}
	if jobs, _, err := st.ListJobs(ctx, ws1a1, "", 10); err != nil || len(jobs) != 1 || jobs[0].Result != nil {
		t.Fatalf("ListJobs: %v", err)
	}

	// A record of an older release, with its result inline.
	old := newJob(t, st, nil)
	r, err := cli.Get(ctx, "/crank/v1/jobs/"+old.ID)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(r.Kvs[0].Value, &m)
	m["result_json"] = map[string]any{"docs": 3}
	v, _ := json.Marshal(m)
	if _, err := cli.Put(ctx, "/crank/v1/jobs/"+old.ID, string(v), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	if g, err := st.GetJobResult(ctx, ws1a1, old.ID); err != nil || string(g.Result) != `{"docs":3}` {
		t.Fatalf("an inline result: %s, %v", g.Result, err)
	}

	// The result outliving its record is cleaned up.
	if _, err := cli.Delete(ctx, "/crank/v1/jobs/"+j.ID); err != nil {
		t.Fatal(err)
	}
	if rep, err := st.CleanupExpired(ctx); err != nil || rep.StaleIndex < 1 {
		t.Fatalf("cleanup: %+v, %v", rep, err)
	}
	if res, err := cli.Get(ctx, "/crank/v1/job-results/"+j.ID, clientv3.WithCountOnly()); err != nil || res.Count != 0 {
		t.Fatalf("the orphaned result is still there: %v", err)
	}
}
