package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
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
	// Follow is follow_json, what any replica needs to follow the job's
	// upstream work in its owner's place (the upstream's ticket): set by
	// its runner (JobUpdate.Follow), offered with an orphan to
	// SweeperConfig.Adopt. It is the runner's, never shown to a client.
	Follow json.RawMessage
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
	Scope Scope
	// ClientID is the client that starts it ("" for none): its per-client
	// quotas count the job (Quota.PerClient, RetainedQuota's per-client
	// bounds).
	ClientID    string
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
	Follow   json.RawMessage // replaces follow_json when non-nil
}

// jobRecord is the stored JSON form of an AsyncJobHandle.
type jobRecord struct {
	owned[JobStatus]
	Progress json.RawMessage `json:"progress_json,omitempty"`
	Follow   json.RawMessage `json:"follow_json,omitempty"`
	// Result is a result kept in the record by releases before results
	// had a key of their own (read, never written).
	Result json.RawMessage `json:"result_json,omitempty"`
	// ResultBytes is the size of the result at job-results/<id>.
	ResultBytes       int       `json:"result_bytes,omitempty"`
	UpdatedAt         time.Time `json:"updated_at"`
	FinishedAt        time.Time `json:"finished_at,omitzero"`
	MaxRuntimeMS      int64     `json:"max_runtime_ms"`
	CancelReason      string    `json:"cancel_reason,omitempty"`
	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	// RetainLimit is the agent's quota of finished jobs
	// (RetainedQuota.JobsPerAgent) when the job was created: applied when
	// it finishes, by whichever replica finishes it.
	RetainLimit int `json:"retain_limit,omitempty"`

	// pendingResult is a result to write with the record (UpdateJob),
	// in the same etcd request.
	pendingResult json.RawMessage
}

var jobKind = &ownedKind[JobStatus, *jobRecord, *AsyncJobHandle]{
	name: "job", label: "job", prefix: JobIDPrefix, dir: jobsDir, index: "jobs",
	statuses: []JobStatus{JobQueued, JobRunning, JobCanceling, JobSucceeded, JobFailed, JobCanceled},
	running:  JobRunning, stopVerb: "cancel", stopping: JobCanceling, stopped: JobCanceled,
	// A canceling job fails too: nobody can confirm the upstream
	// operation was cancelled.
	failed: JobFailed, lostStopping: JobFailed,
	new: func() *jobRecord { return new(jobRecord) },
}

// jobResultKey holds a job's result (result_json), apart from its record
// so that reading the record (status, lists, watches) does not read the
// result.
func jobResultKey(id string) string { return jobResultsDir + id }

func (r *jobRecord) shared() *owned[JobStatus] { return &r.owned }

func (r *jobRecord) expiry() time.Time {
	if r.Status.Terminal() {
		return r.FinishedAt.Add(r.retention())
	}
	return r.hardDeadline()
}

func (r *jobRecord) hardDeadline() time.Time {
	return r.CreatedAt.Add(msDur(r.MaxRuntimeMS) + r.retention())
}

func (r *jobRecord) corrupt() string {
	if r.MaxRuntimeMS < 0 || r.RetentionMS < 0 || r.ResultBytes < 0 || r.RetainLimit < 0 {
		return "negative max_runtime_ms, retention_ms, result_bytes or retain_limit"
	}
	return ""
}

func (r *jobRecord) sizes() string {
	return fmt.Sprintf("progress_json %d, error_json %d, follow_json %d", len(r.Progress), len(r.Error), len(r.Follow))
}

func (r *jobRecord) public(rev int64) *AsyncJobHandle {
	return &AsyncJobHandle{
		ID: r.ID, WorkspaceID: r.WorkspaceID, AgentID: r.AgentID, AgentScoped: r.AgentScoped,
		OperationID: r.OperationID, Status: r.Status, Progress: r.Progress, Follow: r.Follow, Result: r.Result, ResultBytes: r.ResultBytes, Error: r.Error,
		ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
		MaxRuntime: msDur(r.MaxRuntimeMS), Retention: r.retention(),
		Owner: r.Owner, CancelReason: r.CancelReason, CancelRequestedAt: r.CancelRequestedAt,
		Revision: rev,
	}
}

func (r *jobRecord) orphan(dead string, rev int64) Orphan {
	return Orphan{DeadOwner: dead, Job: r.public(rev)}
}

func (r *jobRecord) touch(now time.Time)  { r.UpdatedAt = now }
func (r *jobRecord) closed(now time.Time) { r.FinishedAt = now }

func (r *jobRecord) stopRequested(reason string, now time.Time) {
	r.CancelReason, r.CancelRequestedAt = reason, now
}

// putMore adds the put of a pending result and, when the record moves to
// a new lease, its list entry and (finished) what it counts against what
// finished jobs keep (retained.go): a finished record is never rewritten.
func (r *jobRecord) putMore(p *plan, size int, now time.Time, refresh bool) error {
	if r.pendingResult != nil {
		if limit := p.e.maxValue - size; len(r.pendingResult) > limit {
			return &TooLargeError{What: "job " + r.ID + " result_json", Size: len(r.pendingResult), Limit: limit,
				Why: fmt.Sprintf("a job result and its record must fit in one etcd request, max_request_bytes %d", p.e.maxRequest)}
		}
		// Until the record's expiry: a result written before the job
		// finishes (expiry: its hard deadline) outlives the finished
		// record (expiry: finish + retention, which is sooner).
		if err := p.put(jobResultKey(r.ID), r.pendingResult, r.ExpiresAt.Sub(now)); err != nil {
			return err
		}
	}
	if !refresh {
		return nil // the list entry stays on the lease it shares with the record
	}
	if r.Status.Terminal() {
		if err := p.putRetained(r, size, now); err != nil {
			return err
		}
	}
	return p.put(jobListKey(r), nil, r.ExpiresAt.Sub(now))
}

func (r *jobRecord) delMore(p *plan) {
	p.del(jobResultKey(r.ID))
	p.del(jobListKey(r))
	p.delRetained(r, true)
}

func (r *jobRecord) settled(ctx context.Context, e *Etcd) { e.trimRetained(ctx, r) }

// CreateJob creates a job — running and owned by this replica with
// nj.Owned, queued otherwise — and returns it with its new ID.
func (e *Etcd) CreateJob(ctx context.Context, nj NewJob) (*AsyncJobHandle, error) {
	if err := validIdentity(nj.Scope, nj.ClientID, nj.AgentScoped, nj.OperationID); err != nil {
		return nil, err
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
	checks := append(openChecks(jobKind.index, nj.Scope, nj.ClientID, nj.Quota), retainedChecks(nj.Scope, nj.ClientID, nj.Retained)...)
	if err := e.checkQuota(ctx, jobKind.name, checks); err != nil {
		return nil, err
	}
	if err := validJSONField("progress_json", nj.Progress); err != nil {
		return nil, err
	}
	return jobKind.create(ctx, e, &jobRecord{
		owned: owned[JobStatus]{WorkspaceID: nj.Scope.WorkspaceID, AgentID: nj.Scope.AgentID, AgentScoped: nj.AgentScoped,
			ClientID: nj.ClientID, OperationID: nj.OperationID, Status: JobQueued, RetentionMS: durMS(nj.Retention)},
		Progress: nj.Progress, MaxRuntimeMS: durMS(nj.MaxRuntime), RetainLimit: nj.Retained.JobsPerAgent,
	}, nj.Owned)
}

// GetJob returns the job without its result (see GetJobResult), or
// ErrNotFound when it does not exist, has expired or is outside scope.
func (e *Etcd) GetJob(ctx context.Context, scope Scope, id string) (*AsyncJobHandle, error) {
	if !wellFormedID(id, JobIDPrefix) {
		return nil, ErrNotFound
	}
	kvs, err := e.getKeys(ctx, "get job "+id, []string{jobKind.key(id), evictedKey(id)})
	if err != nil {
		return nil, err
	}
	r, err := jobKind.live(kvs[0], &scope, e.now())
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
	kvs, err := e.getKeys(ctx, "get job result "+id, []string{jobKind.key(id), jobResultKey(id), evictedKey(id)})
	if err != nil {
		return nil, err
	}
	kv, res := kvs[0], kvs[1]
	r, err := jobKind.live(kv, &scope, e.now())
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
	r, rev, err := jobKind.change(ctx, e, "claim", id, nil, false, func(p *plan, r *jobRecord, now time.Time) error {
		if r.Status != JobQueued {
			return &TransitionError{Kind: jobKind.name, ID: id, From: string(r.Status), To: "become running"}
		}
		return jobKind.claim(e, p, r, o.id, now)
	})
	if err != nil {
		return nil, err
	}
	return r.public(rev), nil
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
	}{{"progress_json", u.Progress}, {"result_json", u.Result}, {"error_json", u.Error}, {"follow_json", u.Follow}} {
		if err := validJSONField(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if u.Status != "" && !jobKind.known(u.Status) {
		return nil, fmt.Errorf("store: %w: unknown job status %q", ErrInvalid, u.Status)
	}
	r, rev, err := jobKind.change(ctx, e, "update", id, nil, true, func(p *plan, r *jobRecord, now time.Time) error {
		to := u.Status
		if to == "" {
			to = r.Status
		}
		switch {
		case r.Status.Terminal():
			return &TransitionError{Kind: jobKind.name, ID: id, From: string(r.Status), To: "be updated"}
		case to == r.Status:
			// progress update
		case to.Terminal() && r.Status.CanBecome(to):
		default:
			// queued → running is ClaimJob's, running → canceling CancelJob's.
			return &TransitionError{Kind: jobKind.name, ID: id, From: string(r.Status), To: "become " + string(to)}
		}
		if u.Progress != nil {
			r.Progress = u.Progress
		}
		if u.Error != nil {
			r.Error = u.Error
		}
		if u.Follow != nil {
			r.Follow = u.Follow
		}
		if u.Result != nil {
			r.Result, r.ResultBytes, r.pendingResult = nil, len(u.Result), u.Result
		}
		if to == r.Status {
			return jobKind.put(e, p, r, now, false)
		}
		jobKind.finish(p, r, to, now)
		return jobKind.put(e, p, r, now, true)
	})
	if err != nil {
		return nil, err
	}
	j := r.public(rev)
	if u.Result != nil {
		j.Result = u.Result
	}
	return j, nil
}

// CancelJob requests a job's cancellation. A queued job (or one without
// owner) is canceled at once; a running one becomes canceling and its
// runner finishes it. Cancelling a canceling or canceled job again returns
// it unchanged; a succeeded or failed one fails with ErrIllegalTransition.
func (e *Etcd) CancelJob(ctx context.Context, scope Scope, id, reason string) (*AsyncJobHandle, error) {
	j, err := jobKind.stop(ctx, e, scope, id, reason)
	if err != nil {
		return nil, e.explainMissing(ctx, &scope, id, err)
	}
	return j, nil
}
