package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
)

// JobStore keeps the jobs of async_job operations: what their tools, their
// runners and MCP tasks read and write.
type JobStore interface {
	CreateJob(ctx context.Context, nj store.NewJob) (*store.AsyncJobHandle, error)
	GetJob(ctx context.Context, scope store.Scope, id string) (*store.AsyncJobHandle, error)
	GetJobResult(ctx context.Context, scope store.Scope, id string) (*store.AsyncJobHandle, error)
	CancelJob(ctx context.Context, scope store.Scope, id, reason string) (*store.AsyncJobHandle, error)
	WatchJob(ctx context.Context, scope store.Scope, id string) (<-chan store.JobEvent, error)
	ListJobs(ctx context.Context, scope store.Scope, after string, limit int) (jobs []*store.AsyncJobHandle, next string, err error)
	// The runner's side, on the replica that owns the job.
	UpdateJob(ctx context.Context, id string, u store.JobUpdate) (*store.AsyncJobHandle, error)
}

var errCancelRequested = errors.New("cancel requested")

// Job runner tuning.
const (
	// progressInterval spaces the progress a window job writes to the
	// store.
	progressInterval = time.Second
	// maxStatusFailures: consecutive failed status polls that fail an
	// upstream-native job.
	maxStatusFailures = 3
	// cancelTimeout bounds the call of a job's cancel_operation.
	cancelTimeout = 30 * time.Second
)

// jobOutcome is a finished job's result_json: the operation's result as a
// tool call would have returned it. Text is left out when it is the
// structured content's JSON (as for most results), so the result is not
// stored twice; read it with text().
type jobOutcome struct {
	Structured json.RawMessage `json:"structured,omitempty"`
	Text       string          `json:"text,omitempty"`
}

func newJobOutcome(res *Result) json.RawMessage {
	o := jobOutcome{Structured: res.Structured, Text: res.Text}
	if len(o.Structured) > 0 && o.Text == string(o.Structured) {
		o.Text = ""
	}
	b, _ := json.Marshal(o)
	return b
}

func (o jobOutcome) text() string {
	if o.Text == "" {
		return string(o.Structured)
	}
	return o.Text
}

// Finishing a job: a write the store refused for a transient reason is
// retried for a while, so that the job does not stay running until it
// expires.
const (
	finishAttempts   = 6
	finishBackoffMin = 250 * time.Millisecond
)

// startJob creates a job owned by this replica and runs it in the
// background; the call returns at once.
func (h *Host) startJob(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) (*Result, string) {
	job, err := h.createJob(ctx, op, req, args)
	if err != nil {
		return h.storeError("job", "", err), ""
	}
	return structured(map[string]any{
		"job_id": job.ID, "status": job.Status, "status_tool": op.Family.Names[opsfile.RoleStatus],
		"result_tool": op.Family.Names[opsfile.RoleResult], "cancel_tool": op.Family.Names[opsfile.RoleCancel],
	}), job.ID
}

func (h *Host) createJob(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) (*store.AsyncJobHandle, error) {
	run, slot, err := h.enterJobRunner()
	if err != nil {
		return nil, err
	}
	job, err := h.store.CreateJob(ctx, store.NewJob{
		Scope: req.scope(), AgentScoped: op.Family.AgentScoped, OperationID: op.Name,
		MaxRuntime: op.Timeout, Retention: op.Family.Job.Retention(), Owned: true,
		Quota:    store.Quota{PerWorkspace: h.quotas.JobsPerWorkspace, PerAgent: h.quotas.JobsPerAgent, PerClient: h.quotas.JobsPerClient},
		ClientID: req.ClientID,
		Retained: h.quotas.retained(),
	})
	if err != nil {
		slot()
		return nil, err
	}
	if err := h.launchJob(run, slot, job, op, req, args, nil); err != nil {
		return nil, err
	}
	return job, nil
}

// enterJobRunner takes what a job runner of this replica holds: its entry
// in the process's runners and a slot of the replica's job quota.
func (h *Host) enterJobRunner() (*runner, func(), error) {
	run, refusal := h.runners.enter(h.endpoint)
	if refusal != "" {
		return nil, nil, replicaQuotaError(refusal)
	}
	slot, refusal := h.quotas.Replica.take(true)
	if refusal != "" {
		run.leave()
		return nil, nil, replicaQuotaError(refusal)
	}
	return run, joinRelease(slot, run.leave), nil
}

// launchJob runs job, owned by this replica, in the background, holding
// run and slot until it ends; ticket is the upstream's job an adopted job
// follows (adopt.go), nil for a new one (req.resume is the resume state
// of an adopted job of one adapter call). A job it cannot run is failed.
func (h *Host) launchJob(run *runner, slot func(), job *store.AsyncJobHandle, op *boundOp, req CallRequest,
	args json.RawMessage, ticket any) error {
	// A cancel from any replica cancels the run; subscribed before the
	// client learns the job's ID.
	rctx, cancel := context.WithCancelCause(context.Background())
	run.bind(cancel)
	unsubscribe, err := hubFor(h.store).subscribe(true, job.ID, func() { cancel(errCancelRequested) })
	if err != nil {
		cancel(nil)
		slot()
		h.finishJob(job.ID, store.JobUpdate{Status: store.JobFailed, Error: failureJSON("store_unavailable", err.Error())})
		return err
	}
	release := func() { unsubscribe(); slot() }
	rreq := req
	rreq.Progress, rreq.Log, rreq.background = nil, nil, true
	go h.runJob(rctx, cancel, release, job, op, rreq, args, ticket)
	return nil
}

// runJob runs a job to its end: the operation itself (one request, or the
// window it collects), or the upstream's own job followed through its
// status operation. A cancel requested on any replica cancels the
// running adapter call. It is not tied to the MCP request that started it.
func (h *Host) runJob(ctx context.Context, cancel context.CancelCauseFunc, release func(),
	job *store.AsyncJobHandle, op *boundOp, req CallRequest, args json.RawMessage, ticket any) {
	defer release()
	defer cancel(nil)
	telemetry.JobRunning(op.Name, 1)
	defer telemetry.JobRunning(op.Name, -1)
	// A panic fails the job instead of ending the process.
	defer func() {
		if v := recover(); v != nil {
			p := h.recovered("job", job.ID, v)
			cancel(p)
			h.finishJob(job.ID, store.JobUpdate{Status: store.JobFailed, Error: failureJSON("internal_error", p.msg)})
		}
	}()
	ctx, cancelRun := context.WithDeadline(ctx, job.CreatedAt.Add(job.MaxRuntime))
	defer cancelRun()
	log := h.log.With(zap.String("job", job.ID), zap.String("operation", op.Name))

	j := op.Family.Job
	var res *Result
	var startDoc any
	switch {
	case j.StatusOperation != "":
		res, startDoc = h.followUpstreamJob(ctx, op, req, args, job, ticket)
	case op.Execution != nil:
		req.Progress = h.jobProgress(ctx, job.ID)
		res = h.callWindow(ctx, op, req, args)
	default:
		// An adapter that reports its upstream's progress (an MCP
		// upstream's, or its task's status) has it recorded as the job's.
		req.Progress = h.jobRelayedProgress(ctx, job.ID)
		// An adapter that resumes calls reports what another replica
		// needs to take the call over (adopt.go), kept as follow_json.
		req.onResume = func(state json.RawMessage) {
			if len(state) > sdk.MaxResumeBytes {
				log.Warn("resume state not recorded: no other replica can take the job over",
					zap.String("field", "follow_json"), zap.Int("bytes", len(state)), zap.Int("limit", sdk.MaxResumeBytes))
				return
			}
			h.recordJobFollow(ctx, job.ID, state)
		}
		res = h.invoke(ctx, op, req, args)
	}

	u := store.JobUpdate{Status: store.JobSucceeded}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelRequested):
		if j.CancelOperation != "" && startDoc != nil {
			h.cancelUpstreamJob(op, req, startDoc, log)
		}
		u = store.JobUpdate{Status: store.JobCanceled}
	case errors.Is(cause, errEndpointRemoved):
		if j.CancelOperation != "" && startDoc != nil {
			h.cancelUpstreamJob(op, req, startDoc, log)
		}
		u = store.JobUpdate{Status: store.JobCanceled, Error: failureJSON("endpoint_removed", endpointRemovedMessage)}
	case errors.Is(cause, errShutdown):
		if j.CancelOperation != "" && startDoc != nil {
			h.cancelUpstreamJob(op, req, startDoc, log)
		}
		u = store.JobUpdate{Status: store.JobFailed, Error: failureJSON("shutdown",
			"the gateway replica running the job stopped before it finished; start the job again")}
	case errors.Is(cause, context.DeadlineExceeded):
		u = store.JobUpdate{Status: store.JobFailed, Error: failureJSON("max_runtime",
			fmt.Sprintf("the job ran longer than its timeout (%s)", job.MaxRuntime))}
	case res.IsError:
		u = store.JobUpdate{Status: store.JobFailed, Error: failureJSON("upstream_error", res.Text)}
	default:
		u.Result = newJobOutcome(res)
	}
	h.finishJob(job.ID, u)
	telemetry.JobEnded(op.Name, string(u.Status))
	log.Debug("job ended", zap.String("status", string(u.Status)))
}

// jobProgress writes a window job's progress (items counted so far) to the
// store at most once per progressInterval.
func (h *Host) jobProgress(ctx context.Context, id string) func(context.Context, ProgressChunk) {
	n := 0
	var last time.Time
	return func(_ context.Context, _ ProgressChunk) {
		n++
		if time.Since(last) < progressInterval {
			return
		}
		last = time.Now()
		h.recordJobProgress(ctx, id, map[string]any{"items": n})
	}
}

// recordJobProgress writes a running job's progress report to the store;
// a failed write is logged at debug level (the next report replaces it).
func (h *Host) recordJobProgress(ctx context.Context, id string, report map[string]any) {
	p, _ := json.Marshal(report)
	uctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	if _, err := h.updateJob(uctx, id, store.JobUpdate{Progress: p}); err != nil && ctx.Err() == nil {
		h.log.Debug("job progress not recorded", zap.String("job", id), zap.Error(err))
	}
}

// jobRelayedProgress writes the progress an adapter relays during a job's
// unary call ({progress, total, message}, as the upstream reported it) to
// the store at most once per progressInterval, and always a report whose
// message changed.
func (h *Host) jobRelayedProgress(ctx context.Context, id string) func(context.Context, ProgressChunk) {
	var last time.Time
	var lastMessage string
	return func(_ context.Context, c ProgressChunk) {
		if !c.Relayed || time.Since(last) < progressInterval && c.Message == lastMessage {
			return
		}
		last, lastMessage = time.Now(), c.Message
		rep := map[string]any{"progress": c.Progress}
		if c.Total > 0 {
			rep["total"] = c.Total
		}
		if c.Message != "" {
			rep["message"] = c.Message
		}
		h.recordJobProgress(ctx, id, rep)
	}
}

// followUpstreamJob starts the upstream's own job — unless ticket, the
// start result of an adopted job, says it runs already — and polls its
// status operation until done_path says it is done. The start result is
// recorded with the job (follow_json), so that another replica can follow
// it should this one die (adopt.go). It returns the job's outcome and the
// start result (for cancel_arguments).
func (h *Host) followUpstreamJob(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage,
	job *store.AsyncJobHandle, ticket any) (*Result, any) {
	j, id := op.Family.Job, job.ID
	doc, polls := ticket, 0
	if doc == nil {
		start := h.invoke(ctx, op, req, args)
		if start.IsError {
			return start, nil
		}
		doc = resultDoc(start)
		h.recordJobTicket(ctx, id, doc)
	} else {
		polls = pollsOf(job.Progress) // the owner's count goes on
	}
	statusArgs, err := buildArguments(j.StatusArguments, j.Paths.StatusArguments, doc)
	if err != nil {
		return errorResult("job.status_arguments: " + err.Error()), doc
	}
	statusOp, _ := h.op(j.StatusOperation)
	failures := 0
	for {
		t := time.NewTimer(j.PollInterval())
		select {
		case <-ctx.Done():
			t.Stop()
			return errorResult("cancelled"), doc
		case <-t.C:
		}
		r := h.invoke(ctx, statusOp, req, statusArgs)
		polls++
		if r.IsError {
			if r.permanent {
				return errorResult(fmt.Sprintf("status operation %s refused the job's status request: %s", statusOp.Name, r.Text)), doc
			}
			if failures++; failures >= maxStatusFailures || ctx.Err() != nil {
				return errorResult(fmt.Sprintf("status operation %s failed %d times in a row: %s", statusOp.Name, failures, r.Text)), doc
			}
			continue
		}
		failures = 0
		sdoc := resultDoc(r)
		progress := map[string]any{"polls": polls}
		if v, ok := jsonpath.First(j.Paths.Status, sdoc); ok {
			progress["status"] = v
		}
		if v, ok := jsonpath.First(j.Paths.Progress, sdoc); ok {
			progress["progress"] = v
		}
		if v, ok := jsonpath.First(j.Paths.Done, sdoc); !ok || !jsonpath.Truthy(v) {
			h.recordJobProgress(ctx, id, progress)
			continue
		}
		if v, ok := jsonpath.First(j.Paths.Error, sdoc); ok && v != nil && v != "" && v != false {
			return errorResult(h.redact.String("the upstream job failed: " + jsonpath.Text(v))), doc
		}
		if v, ok := jsonpath.First(j.Paths.Result, sdoc); ok {
			return h.successResult(&sdk.Result{Structured: jsonpath.Encode(v)}), doc
		}
		return r, doc
	}
}

// recordJobTicket records the start result of the upstream's job with the
// job (follow_json), which a replica adopting it follows.
func (h *Host) recordJobTicket(ctx context.Context, id string, doc any) {
	h.recordJobFollow(ctx, id, jsonpath.Encode(doc))
}

// recordJobFollow records what a replica adopting the job follows
// (follow_json): an upstream job's ticket, or the resume state of the
// job's adapter call. A failed write is logged: the job runs on, but
// cannot be adopted.
func (h *Host) recordJobFollow(ctx context.Context, id string, follow json.RawMessage) {
	uctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	if _, err := h.updateJob(uctx, id, store.JobUpdate{Follow: follow}); err != nil && ctx.Err() == nil {
		h.log.Warn("what the job follows upstream was not recorded: no other replica can take the job over", zap.String("job", id), zap.Error(err))
	}
}

// pollsOf is the count of status polls in a followed job's progress.
func pollsOf(progress json.RawMessage) int {
	var p struct {
		Polls int `json:"polls"`
	}
	_ = json.Unmarshal(progress, &p)
	return p.Polls
}

// cancelUpstreamJob calls the job's cancel_operation.
func (h *Host) cancelUpstreamJob(op *boundOp, req CallRequest, startDoc any, log *zap.Logger) {
	j := op.Family.Job
	args, err := buildArguments(j.CancelArguments, j.Paths.CancelArguments, startDoc)
	if err != nil {
		log.Warn("upstream job not cancelled", zap.String("field", "job.cancel_arguments"), zap.String("error", h.redact.String(err.Error())))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if r := h.invoke(ctx, h.opOrNil(j.CancelOperation), req, args); r.IsError {
		log.Warn("upstream job cancel failed", zap.String("error", r.Text))
	}
}

// resultDoc is a result's JSON document: its structured content, or its
// text when that is JSON, or the text as a string.
func resultDoc(r *Result) any {
	raw := r.Structured
	if len(raw) == 0 {
		raw = []byte(r.Text)
	}
	if v, err := jsonpath.Decode(raw); err == nil {
		return v
	}
	return r.Text
}

// finishJob records a job's end. A result (or error) the store cannot
// keep fails the job with an error naming the limit instead; a transient
// store failure is retried for a while. A job that is gone or already
// final is left alone.
func (h *Host) finishJob(id string, u store.JobUpdate) {
	backoff, tooLarge := finishBackoffMin, false
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		_, err := h.updateJob(ctx, id, u)
		cancel()
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrIllegalTransition):
			return
		case errors.Is(err, store.ErrTooLarge) && !tooLarge:
			// The result (or an error text) does not fit in a record.
			h.log.Warn("job outcome too large to keep: the job fails", zap.String("job", id), zap.Error(err))
			tooLarge = true
			msg := "the job's outcome is too large to keep in the state store"
			if tle := (*store.TooLargeError)(nil); errors.As(err, &tle) {
				msg = fmt.Sprintf("the job's result is %d bytes, over the %d-byte limit of a job result (%s)", tle.Size, tle.Limit, tle.Why)
			}
			u = store.JobUpdate{Status: store.JobFailed, Error: failureJSON("result_too_large", msg)}
			continue
		case (store.Retryable(err) || errors.Is(err, store.ErrNoSpace)) && attempt < finishAttempts:
			h.log.Debug("job end not recorded yet, retrying", zap.String("job", id), zap.Error(err))
			time.Sleep(backoff)
			backoff *= 2
			continue
		}
		h.log.Warn("job end not recorded", zap.String("job", id), zap.Error(err))
		return
	}
}

// updateJob writes a job's progress, result or error, redacted: what the
// runner stores is read back by any replica's status, result and task
// calls.
func (h *Host) updateJob(ctx context.Context, id string, u store.JobUpdate) (*store.AsyncJobHandle, error) {
	u.Progress, u.Result, u.Error, u.Follow = h.redact.JSON(u.Progress), h.redact.JSON(u.Result), h.redact.JSON(u.Error), h.redact.JSON(u.Follow)
	return h.store.UpdateJob(ctx, id, u)
}

// getJob reads a job of op visible to the caller.
func (h *Host) getJob(ctx context.Context, op *boundOp, scope store.Scope, id string) (*store.AsyncJobHandle, error) {
	job, err := h.store.GetJob(ctx, scope, id)
	if err == nil && op != nil && job.OperationID != op.Name {
		return nil, store.ErrNotFound
	}
	return job, err
}

func jobStatusView(job *store.AsyncJobHandle) map[string]any {
	out := map[string]any{"job_id": job.ID, "status": job.Status, "created_at": job.CreatedAt,
		"updated_at": job.UpdatedAt, "expires_at": job.ExpiresAt}
	// The last progress report describes a job still under way; once the
	// job is final, its status says all, and the report would contradict
	// it ("succeeded" beside the upstream's "running, 83%").
	if len(job.Progress) > 0 && !job.Status.Terminal() {
		out["progress"] = job.Progress
	}
	if !job.FinishedAt.IsZero() {
		out["finished_at"] = job.FinishedAt
	}
	if len(job.Error) > 0 {
		out["error"] = job.Error
	}
	return out
}

func (h *Host) jobStatus(ctx context.Context, op *boundOp, req CallRequest, id string) *Result {
	job, err := h.getJob(ctx, op, req.scope(), id)
	if err != nil {
		return h.storeError("job", id, err)
	}
	return structured(jobStatusView(job))
}

func (h *Host) jobResult(ctx context.Context, op *boundOp, req CallRequest, id string) *Result {
	job, err := h.store.GetJobResult(ctx, req.scope(), id)
	if err == nil && job.OperationID != op.Name {
		err = store.ErrNotFound
	}
	if err != nil {
		return h.storeError("job", id, err)
	}
	out := map[string]any{"job_id": id, "status": job.Status, "ready": job.Status.Terminal()}
	switch job.Status {
	case store.JobSucceeded:
		var o jobOutcome
		_ = json.Unmarshal(job.Result, &o)
		if len(o.Structured) > 0 {
			out["result"] = o.Structured
		}
		out["text"] = o.text()
	case store.JobFailed, store.JobCanceled:
		if len(job.Error) > 0 {
			out["error"] = job.Error
		}
		r := structured(out)
		r.IsError = true
		return r
	}
	return structured(out)
}

func (h *Host) cancelJob(ctx context.Context, op *boundOp, req CallRequest, id string) *Result {
	cur, err := h.getJob(ctx, op, req.scope(), id)
	if err != nil {
		return h.storeError("job", id, err)
	}
	job, err := h.store.CancelJob(ctx, req.scope(), id, "cancelled by the client")
	if errors.Is(err, store.ErrIllegalTransition) {
		// Already succeeded or failed — perhaps only since cur was read
		// (its adapter died meanwhile, say): nothing to cancel, not an
		// error. The answer is the job's state now, with its error, not
		// the "running" read before.
		if now, gerr := h.getJob(ctx, op, req.scope(), id); gerr == nil {
			cur = now
		}
		out := map[string]any{"job_id": id, "status": cur.Status}
		if len(cur.Error) > 0 {
			out["error"] = cur.Error
		}
		return structured(out)
	}
	if err != nil {
		return h.storeError("job", id, err)
	}
	return structured(map[string]any{"job_id": id, "status": job.Status})
}
