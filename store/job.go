package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// JobStatus is the status of an async job.
//
//	queued ──▶ running ──▶ canceling ──▶ succeeded | failed | canceled
//	  │           └──────────────────▶ succeeded | failed | canceled
//	  └──▶ canceled | failed
//
// queued: created, no runner yet (ClaimJob starts it). running: a runner on
// the owning replica works on it and reports progress. canceling: a cancel
// was requested while it ran; the runner sees it through WatchJob, cancels
// the upstream and finishes the job — as canceled, or as succeeded or failed
// when the upstream finished first. succeeded, failed and canceled are
// terminal: the job and its result stay readable for its retention.
type JobStatus string

// Job statuses.
const (
	JobQueued    JobStatus = "queued"
	JobRunning   JobStatus = "running"
	JobCanceling JobStatus = "canceling"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
	JobCanceled  JobStatus = "canceled"
)

var jobTransitions = map[JobStatus][]JobStatus{
	JobQueued:    {JobRunning, JobCanceled, JobFailed},
	JobRunning:   {JobCanceling, JobSucceeded, JobFailed, JobCanceled},
	JobCanceling: {JobSucceeded, JobFailed, JobCanceled},
}

// Terminal reports whether s is a final status.
func (s JobStatus) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCanceled
}

// CanBecome reports whether the status machine allows s → t.
func (s JobStatus) CanBecome(t JobStatus) bool { return slices.Contains(jobTransitions[s], t) }

// DefaultJobRetention is how long a finished job (and its result) stays
// readable when NewJob.Retention is zero.
const DefaultJobRetention = time.Hour

// AsyncJobHandle is an async job: a long-running upstream
// operation started by one tool call and followed by status, result and
// cancel calls.
type AsyncJobHandle struct {
	ID          string
	WorkspaceID string
	AgentID     string
	AgentScoped bool
	OperationID string
	Status      JobStatus
	Progress    json.RawMessage // progress_json
	// Result is result_json, the job's result: set by GetJobResult and in
	// UpdateJob's answer, nil from GetJob, ListJobs and WatchJob (a result
	// is kept apart from the record and read only where it is returned).
	Result json.RawMessage
	// ResultBytes is the size of the stored result (0: none).
	ResultBytes int
	Error       json.RawMessage // error_json, when failed
	// ExpiresAt: the job is gone from this instant on — its max runtime
	// plus retention after creation while unfinished, its retention after
	// finishing.
	ExpiresAt  time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time // zero until terminal

	MaxRuntime time.Duration
	Retention  time.Duration

	Owner             string // owner ID of the replica running it ("" when none)
	CancelReason      string
	CancelRequestedAt time.Time

	Revision int64 // etcd mod revision of the record as read
}

// Expired reports whether the job has expired at now.
func (j *AsyncJobHandle) Expired(now time.Time) bool { return !now.Before(j.ExpiresAt) }

// NewJob describes a job to create.
type NewJob struct {
	Scope       Scope
	AgentScoped bool
	OperationID string
	Progress    json.RawMessage
	// MaxRuntime bounds the job: an unfinished job expires MaxRuntime +
	// Retention after its creation (its runner must give up before).
	// Required.
	MaxRuntime time.Duration
	// Retention: how long a finished job stays readable;
	// DefaultJobRetention when zero.
	Retention time.Duration
	// Owned: the job starts running at once on this Etcd's replica, which
	// becomes its owner. Otherwise it is queued until ClaimJob.
	Owned bool
	// Quota, when set, refuses the job (a *QuotaError) when its workspace
	// or agent already has that many open jobs.
	Quota Quota
	// Retained bounds what the finished jobs of the workspace and agent
	// keep: a start past a byte budget or the workspace's count is
	// refused (a *QuotaError); the agent's count is kept in the record and
	// evicts the agent's oldest finished jobs when this one finishes.
	Retained RetainedQuota
}

// JobUpdate is a runner's report (update_async_job_status).
type JobUpdate struct {
	// Status is the new status: "" (or the current one) for a progress
	// update; succeeded, failed or canceled to finish the job.
	Status   JobStatus
	Progress json.RawMessage // replaces progress_json when non-nil
	Result   json.RawMessage // replaces result_json when non-nil
	Error    json.RawMessage // replaces error_json when non-nil
}

type jobRecord struct {
	ID          string          `json:"id"`
	WorkspaceID string          `json:"workspace_id"`
	AgentID     string          `json:"agent_id,omitempty"`
	AgentScoped bool            `json:"agent_scoped,omitempty"`
	OperationID string          `json:"operation_id"`
	Status      JobStatus       `json:"status"`
	Progress    json.RawMessage `json:"progress_json,omitempty"`
	// Result is a result kept in the record by releases before results
	// had a key of their own (read, never written).
	Result json.RawMessage `json:"result_json,omitempty"`
	// ResultBytes is the size of the result at job-results/<id>.
	ResultBytes       int             `json:"result_bytes,omitempty"`
	Error             json.RawMessage `json:"error_json,omitempty"`
	ExpiresAt         time.Time       `json:"expires_at"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	FinishedAt        time.Time       `json:"finished_at,omitzero"`
	MaxRuntimeMS      int64           `json:"max_runtime_ms"`
	RetentionMS       int64           `json:"retention_ms"`
	Owner             string          `json:"owner,omitempty"`
	CancelReason      string          `json:"cancel_reason,omitempty"`
	CancelRequestedAt time.Time       `json:"cancel_requested_at,omitzero"`
	// RetainLimit is the agent's quota of finished jobs
	// (RetainedQuota.JobsPerAgent) when the job was created: applied when
	// it finishes, by whichever replica finishes it.
	RetainLimit int `json:"retain_limit,omitempty"`
}

const jobKind = "job"

func jobKey(id string) string { return jobsDir + id }

// jobResultKey holds a job's result (result_json), apart from its record
// so that reading the record (status, lists, watches) does not read the
// result.
func jobResultKey(id string) string { return jobResultsDir + id }

func (r *jobRecord) expiry() time.Time {
	if r.Status.Terminal() {
		return r.FinishedAt.Add(msDur(r.RetentionMS))
	}
	return r.hardDeadline()
}

func (r *jobRecord) hardDeadline() time.Time {
	return r.CreatedAt.Add(msDur(r.MaxRuntimeMS) + msDur(r.RetentionMS))
}

func (r *jobRecord) visibleTo(s Scope) bool {
	return r.WorkspaceID == s.WorkspaceID && (!r.AgentScoped || r.AgentID == s.AgentID)
}

func (r *jobRecord) public(rev int64) *AsyncJobHandle {
	return &AsyncJobHandle{
		ID: r.ID, WorkspaceID: r.WorkspaceID, AgentID: r.AgentID, AgentScoped: r.AgentScoped,
		OperationID: r.OperationID, Status: r.Status, Progress: r.Progress, Result: r.Result, ResultBytes: r.ResultBytes, Error: r.Error,
		ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		MaxRuntime: msDur(r.MaxRuntimeMS), Retention: msDur(r.RetentionMS),
		Owner: r.Owner, CancelReason: r.CancelReason, CancelRequestedAt: r.CancelRequestedAt,
		Revision: rev,
	}
}

// decodeJob decodes the record at kv. A value that is not a job record —
// not JSON, another job's ID, an unknown status, negative sizes or
// durations — is an error naming the key, never a record to act on.
func decodeJob(kv *mvccpb.KeyValue) (*jobRecord, error) {
	var r jobRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return nil, fmt.Errorf("store: decode job %s: %w", truncate(string(kv.Key)), err)
	}
	var bad string
	switch {
	case string(kv.Key) != jobKey(r.ID):
		bad = fmt.Sprintf("it names job %q", truncate(r.ID))
	case !knownJobStatus(r.Status):
		bad = fmt.Sprintf("unknown status %q", truncate(string(r.Status)))
	case r.MaxRuntimeMS < 0 || r.RetentionMS < 0 || r.ResultBytes < 0 || r.RetainLimit < 0:
		bad = "negative max_runtime_ms, retention_ms, result_bytes or retain_limit"
	}
	if bad != "" {
		return nil, fmt.Errorf("store: decode job %s: corrupt record: %s", truncate(string(kv.Key)), bad)
	}
	return &r, nil
}

func knownJobStatus(s JobStatus) bool {
	switch s {
	case JobQueued, JobRunning, JobCanceling, JobSucceeded, JobFailed, JobCanceled:
		return true
	}
	return false
}

func liveJob(kv *mvccpb.KeyValue, scope *Scope, now time.Time) (*jobRecord, error) {
	if kv == nil {
		return nil, ErrNotFound
	}
	r, err := decodeJob(kv)
	if err != nil {
		return nil, err
	}
	if scope != nil && !r.visibleTo(*scope) {
		return nil, ErrNotFound
	}
	if !now.Before(r.ExpiresAt) {
		return nil, ErrNotFound
	}
	return r, nil
}

// putJob adds the record's put to p — on a bucket lease until its expiry
// when refresh is set, otherwise on the lease it has — and, when result is
// not nil, the put of the job's result, which must fit in the same etcd
// request as the record.
func (e *Etcd) putJob(p *plan, r *jobRecord, now time.Time, refresh bool, result json.RawMessage) error {
	if result != nil {
		r.Result, r.ResultBytes = nil, len(result)
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: encode job %s: %w", r.ID, err)
	}
	if len(val) > e.maxValue {
		return fmt.Errorf("store: job %s: %w: record is %d bytes (progress_json %d, error_json %d), over the %d-byte limit",
			r.ID, ErrTooLarge, len(val), len(r.Progress), len(r.Error), e.maxValue)
	}
	if result != nil {
		if limit := e.maxValue - len(val); len(result) > limit {
			return &TooLargeError{What: "job " + r.ID + " result_json", Size: len(result), Limit: limit,
				Why: fmt.Sprintf("a job result and its record must fit in one etcd request, max_request_bytes %d", e.maxRequest)}
		}
		// Until the record's expiry: a result written before the job
		// finishes (expiry: its hard deadline) outlives the finished
		// record (expiry: finish + retention, which is sooner).
		if err := p.put(jobResultKey(r.ID), result, r.ExpiresAt.Sub(now)); err != nil {
			return err
		}
	}
	if err := p.putEntity(jobKey(r.ID), val, r.ExpiresAt, now, refresh,
		activeKey(activeJobs, r.WorkspaceID, r.AgentID, r.ID), !r.Status.Terminal()); err != nil {
		return err
	}
	if !refresh {
		return nil // the list entry stays on the lease it shares with the record
	}
	if r.Status.Terminal() {
		// A finished record is never rewritten: it counts now against
		// what finished jobs keep (retained.go).
		if err := p.putRetained(r, len(val), now); err != nil {
			return err
		}
	}
	return p.put(jobListKey(r), nil, r.ExpiresAt.Sub(now))
}

// CreateJob creates a job — running and owned by this replica with
// nj.Owned, queued otherwise — and returns it with its new ID.
func (e *Etcd) CreateJob(ctx context.Context, nj NewJob) (*AsyncJobHandle, error) {
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"workspace_id", nj.Scope.WorkspaceID, false},
		{"agent_id", nj.Scope.AgentID, nj.AgentScoped},
		{"operation_id", nj.OperationID, true},
	} {
		if err := validLabel(f.name, f.v, f.required); err != nil {
			return nil, err
		}
	}
	if nj.MaxRuntime < time.Millisecond {
		return nil, fmt.Errorf("store: %w: max_runtime must be at least 1ms, got %s", ErrInvalid, nj.MaxRuntime)
	}
	if nj.Retention < 0 {
		return nil, fmt.Errorf("store: %w: retention must not be negative, got %s", ErrInvalid, nj.Retention)
	}
	if nj.Retention == 0 {
		nj.Retention = DefaultJobRetention
	}
	if nj.Retained.JobsPerAgent < 0 {
		return nil, fmt.Errorf("store: %w: quota must not be negative", ErrInvalid)
	}
	if err := e.checkQuota(ctx, jobKind, append(openChecks(activeJobs, nj.Scope, nj.Quota), retainedChecks(nj.Scope, nj.Retained)...)); err != nil {
		return nil, err
	}
	if err := validJSONField("progress_json", nj.Progress); err != nil {
		return nil, err
	}
	status, owner := JobQueued, ""
	if nj.Owned {
		o, err := e.owner(ctx)
		if err != nil {
			return nil, err
		}
		status, owner = JobRunning, o.id
	}
	for {
		now := e.now().UTC()
		r := &jobRecord{
			ID: newID(JobIDPrefix), WorkspaceID: nj.Scope.WorkspaceID, AgentID: nj.Scope.AgentID,
			AgentScoped: nj.AgentScoped, OperationID: nj.OperationID, Status: status, Progress: nj.Progress,
			CreatedAt: now, UpdatedAt: now, MaxRuntimeMS: durMS(nj.MaxRuntime), RetentionMS: durMS(nj.Retention),
			Owner: owner, RetainLimit: nj.Retained.JobsPerAgent,
		}
		r.ExpiresAt = r.expiry()
		collision := false
		rev, err := e.cas(ctx, "create job "+r.ID, jobKey(r.ID), func(kv *mvccpb.KeyValue, p *plan) error {
			if kv != nil {
				collision = true
				return nil
			}
			if err := e.putJob(p, r, now, true, nil); err != nil {
				return err
			}
			if owner != "" {
				return p.put(runningKey(jobsRunning, r.ID), []byte(owner), r.hardDeadline().Sub(now))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !collision {
			return r.public(rev), nil
		}
	}
}

// GetJob returns the job without its result (see GetJobResult), or
// ErrNotFound when it does not exist, has expired or is outside scope.
func (e *Etcd) GetJob(ctx context.Context, scope Scope, id string) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	kvs, err := e.getKeys(ctx, "get job "+id, []string{jobKey(id), evictedKey(id)})
	if err != nil {
		return nil, err
	}
	r, err := liveJob(kvs[0], &scope, e.now())
	if err == ErrNotFound {
		return nil, e.goneJob(kvs[1], &scope)
	}
	if err != nil {
		return nil, err
	}
	return r.public(kvs[0].ModRevision), nil
}

// GetJobResult returns the job with its result (Result), read together in
// one transaction, or ErrNotFound like GetJob.
func (e *Etcd) GetJobResult(ctx context.Context, scope Scope, id string) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	kvs, err := e.getKeys(ctx, "get job result "+id, []string{jobKey(id), jobResultKey(id), evictedKey(id)})
	if err != nil {
		return nil, err
	}
	kv, res := kvs[0], kvs[1]
	r, err := liveJob(kv, &scope, e.now())
	if err == ErrNotFound {
		return nil, e.goneJob(kvs[2], &scope)
	}
	if err != nil {
		return nil, err
	}
	j := r.public(kv.ModRevision)
	if r.ResultBytes > 0 {
		if res == nil {
			return nil, fmt.Errorf("store: job %s: its result (%d bytes) is missing", id, r.ResultBytes)
		}
		j.Result = res.Value
	}
	return j, nil
}

// ClaimJob starts a queued job on this replica, which becomes its owner.
func (e *Etcd) ClaimJob(ctx context.Context, id string) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	o, err := e.owner(ctx)
	if err != nil {
		return nil, err
	}
	var out *jobRecord
	rev, err := e.cas(ctx, "claim job "+id, jobKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveJob(kv, nil, now)
		if err != nil {
			return err
		}
		if r.Status != JobQueued {
			return &TransitionError{Kind: jobKind, ID: id, From: string(r.Status), To: "become running"}
		}
		r.Status, r.Owner, r.UpdatedAt = JobRunning, o.id, now
		out = r
		if err := e.putJob(p, r, now, false, nil); err != nil {
			return err
		}
		return p.put(runningKey(jobsRunning, id), []byte(o.id), r.hardDeadline().Sub(now))
	})
	if err != nil {
		return nil, err
	}
	return out.public(rev), nil
}

// UpdateJob records a runner's progress or finishes the job
// (update_async_job_status). Only the owning replica (or anyone, for a job
// without owner) may update it; a finished job cannot change.
func (e *Etcd) UpdateJob(ctx context.Context, id string, u JobUpdate) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"progress_json", u.Progress}, {"result_json", u.Result}, {"error_json", u.Error}} {
		if err := validJSONField(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if u.Status != "" && !u.Status.Terminal() && u.Status != JobRunning && u.Status != JobCanceling && u.Status != JobQueued {
		return nil, fmt.Errorf("store: %w: unknown job status %q", ErrInvalid, u.Status)
	}
	var out *jobRecord
	rev, err := e.cas(ctx, "update job "+id, jobKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveJob(kv, nil, now)
		if err != nil {
			return err
		}
		if err := e.checkOwner(jobKind, id, r.Owner); err != nil {
			return err
		}
		to := u.Status
		if to == "" {
			to = r.Status
		}
		switch {
		case r.Status.Terminal():
			return &TransitionError{Kind: jobKind, ID: id, From: string(r.Status), To: "be updated"}
		case to == r.Status:
			// progress update
		case to.Terminal() && r.Status.CanBecome(to):
		default:
			// queued → running is ClaimJob's, running → canceling CancelJob's.
			return &TransitionError{Kind: jobKind, ID: id, From: string(r.Status), To: "become " + string(to)}
		}
		if u.Progress != nil {
			r.Progress = u.Progress
		}
		if u.Error != nil {
			r.Error = u.Error
		}
		r.UpdatedAt = now
		out = r
		if to == r.Status {
			return e.putJob(p, r, now, false, u.Result)
		}
		finishJob(p, r, to, now)
		return e.putJob(p, r, now, true, u.Result)
	})
	if err != nil {
		return nil, err
	}
	if out.Status.Terminal() {
		e.trimRetained(ctx, out)
	}
	j := out.public(rev)
	if u.Result != nil {
		j.Result = u.Result
	}
	return j, nil
}

func finishJob(p *plan, r *jobRecord, to JobStatus, now time.Time) {
	r.Status, r.FinishedAt, r.UpdatedAt = to, now, now
	r.ExpiresAt = r.expiry()
	if r.Owner != "" {
		p.del(runningKey(jobsRunning, r.ID))
		p.del(signalKey(activeJobs, r.ID))
	}
}

// CancelJob requests a job's cancellation. A queued job (or one without
// owner) is canceled at once; a running one becomes canceling and its
// runner finishes it. Cancelling a canceling or canceled job again returns
// it unchanged; a succeeded or failed one fails with ErrIllegalTransition.
func (e *Etcd) CancelJob(ctx context.Context, scope Scope, id, reason string) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	if err := validLabel("reason", reason, false); err != nil {
		return nil, err
	}
	var out *jobRecord
	var outRev int64
	rev, err := e.cas(ctx, "cancel job "+id, jobKey(id), func(kv *mvccpb.KeyValue, p *plan) error {
		now := e.now().UTC()
		r, err := liveJob(kv, &scope, now)
		if err != nil {
			return err
		}
		out, outRev = r, kv.ModRevision
		switch r.Status {
		case JobCanceling, JobCanceled:
			return nil // idempotent
		case JobQueued, JobRunning:
		default:
			return &TransitionError{Kind: jobKind, ID: id, From: string(r.Status), To: "cancel"}
		}
		r.CancelReason, r.CancelRequestedAt, r.UpdatedAt = reason, now, now
		if r.Status == JobRunning && r.Owner != "" {
			r.Status = JobCanceling
			if err := p.put(signalKey(activeJobs, id), []byte(reason), r.hardDeadline().Sub(now)); err != nil {
				return err
			}
			return e.putJob(p, r, now, false, nil)
		}
		finishJob(p, r, JobCanceled, now)
		return e.putJob(p, r, now, true, nil)
	})
	if err != nil {
		return nil, e.explainMissing(ctx, &scope, id, err)
	}
	if rev != 0 {
		outRev = rev
		if out.Status == JobCanceled {
			e.trimRetained(ctx, out)
		}
	}
	return out.public(outRev), nil
}

func (e *Etcd) deleteJob(ctx context.Context, r *jobRecord, rev int64) (bool, error) {
	id := r.ID
	p := e.newPlan(ctx)
	p.delRetained(r, true)
	ops := append([]clientv3.Op{clientv3.OpDelete(jobKey(id)), clientv3.OpDelete(jobResultKey(id)), clientv3.OpDelete(runningKey(jobsRunning, id)),
		clientv3.OpDelete(activeKey(activeJobs, r.WorkspaceID, r.AgentID, id)), clientv3.OpDelete(signalKey(activeJobs, id)),
		clientv3.OpDelete(jobListKey(r))}, p.ops...)
	var ok bool
	err := e.do(ctx, "delete job "+id, func(ctx context.Context) error {
		resp, err := e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(jobKey(id)), "=", rev)).
			Then(ops...).
			Commit()
		if err != nil {
			return err
		}
		ok = resp.Succeeded
		return nil
	})
	return ok, err
}
