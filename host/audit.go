package host

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
)

// Quotas bound how many sessions and jobs may be open at once, per
// workspace and per agent of a workspace (zero: unlimited), how many run
// at once on this replica (Replica), and what finished jobs keep (the
// Retained fields, see store.RetainedQuota). A start over a quota fails
// with an error result naming it.
type Quotas struct {
	StreamSessionsPerWorkspace int
	StreamSessionsPerAgent     int
	JobsPerWorkspace           int
	JobsPerAgent               int
	// StreamSessionsPerClient and JobsPerClient bound them per client
	// (CallRequest.ClientID) within the workspace's, so that one client —
	// an anonymous one with a new agent in every MCP session, say — fills
	// its own budget and not its workspace's.
	StreamSessionsPerClient int
	JobsPerClient           int
	// RetainedJobsPerClient and RetainedJobBytesPerClient: what the
	// finished jobs of one client keep; a start past either is refused.
	RetainedJobsPerClient     int
	RetainedJobBytesPerClient int64
	// RetainedJobsPerAgent: finished jobs an agent keeps; past it its
	// oldest are evicted. RetainedJobsPerWorkspace: finished jobs a
	// workspace keeps; a start past it is refused.
	RetainedJobsPerAgent     int
	RetainedJobsPerWorkspace int
	// RetainedJobBytesPerAgent and RetainedJobBytesPerWorkspace: bytes of
	// results the finished jobs of an agent (a workspace) wrote within
	// their retention, evicted ones included; a start past either is
	// refused.
	RetainedJobBytesPerAgent     int64
	RetainedJobBytesPerWorkspace int64
	// Replica caps the sessions and jobs running on this replica, shared
	// by the hosts of the process; nil: no cap.
	Replica *ReplicaLimits
}

// retained is what the store bounds finished jobs by.
func (q Quotas) retained() store.RetainedQuota {
	return store.RetainedQuota{JobsPerAgent: q.RetainedJobsPerAgent, JobsPerWorkspace: q.RetainedJobsPerWorkspace,
		BytesPerAgent: q.RetainedJobBytesPerAgent, BytesPerWorkspace: q.RetainedJobBytesPerWorkspace,
		JobsPerClient: q.RetainedJobsPerClient, BytesPerClient: q.RetainedJobBytesPerClient}
}

// quotaMessage names the exceeded quota as the operator configured it,
// and says when room frees.
func (h *Host) quotaMessage(qe *store.QuotaError) string {
	frees := "as they reach the end of their operation's retention"
	if !qe.FreesAt.IsZero() {
		frees = fmt.Sprintf("when the oldest of them expires, at %s (in %s)", qe.FreesAt.UTC().Format(time.RFC3339),
			max(time.Until(qe.FreesAt), 0).Round(time.Second))
	}
	switch qe.Retained {
	case store.RetainedJobs:
		return fmt.Sprintf("quota %s exceeded: %s keeps %d finished jobs (limit %d); "+
			"a finished job is kept for its operation's retention: there is room again %s", quotaName(qe), qe.Scope, qe.Open, qe.Limit, frees)
	case store.RetainedBytes:
		return fmt.Sprintf("quota %s exceeded: the finished jobs of %s wrote %d bytes of results that are still within their retention (limit %d); "+
			"there is room again %s", quotaName(qe), qe.Scope, qe.Open, qe.Limit, frees)
	}
	kind := "sessions"
	if qe.Kind == "job" {
		kind = "jobs"
	}
	return fmt.Sprintf("quota %s exceeded: %s already has %d open %s (limit %d); stop or finish one first",
		quotaName(qe), qe.Scope, qe.Open, kind, qe.Limit)
}

// quotaName is the option name of a store quota (telemetry.Quotas).
func quotaName(qe *store.QuotaError) string {
	switch {
	case qe.Retained == store.RetainedJobs:
		return "max_retained_jobs_" + qe.Quota
	case qe.Retained == store.RetainedBytes:
		return "max_retained_job_bytes_" + qe.Quota
	case qe.Kind == "job":
		return "max_jobs_" + qe.Quota
	}
	return "max_sessions_" + qe.Quota
}

// EvictionNotice explains a job that is gone because it was evicted
// before its retention ended (a *store.EvictedError), naming the quota
// or the recovery that evicted it; "" for any other error.
func EvictionNotice(err error) string {
	var ee *store.EvictedError
	if !errors.As(err, &ee) {
		return ""
	}
	if ee.Reason == store.EvictedSpaceRecovery {
		return fmt.Sprintf("job %q expired early: evicted at %s by the state store's space recovery "+
			"(etcd ran out of space, and the oldest finished jobs were dropped)", ee.ID, ee.At.Format(time.RFC3339))
	}
	return fmt.Sprintf("job %q expired early: evicted at %s by the agent's retention quota "+
		"(max_retained_jobs_per_agent %d: an agent keeps that many finished jobs, and the oldest go first)", ee.ID, ee.At.Format(time.RFC3339), ee.Limit)
}

// auditCall writes the audit record of one family tool call: who
// (workspace, agent), what (tool, operation, session or job ID), when
// (the record's time), how long, and the outcome. Error texts are
// redacted like results.
func (h *Host) auditCall(op *boundOp, req CallRequest, id string, res *Result, took time.Duration) {
	kind := "session"
	if op.Mode == opsfile.ModeAsyncJob {
		kind = "job"
	}
	fields := []zap.Field{
		zap.String("event", kind+"."+op.Role),
		zap.String("tool", op.Name),
		zap.String("operation", op.base.Name),
		zap.String("workspace", req.WorkspaceID),
		zap.String("agent", req.AgentID),
		zap.String("id", id),
		zap.String("request_id", req.RequestID),
		zap.Duration("duration", took),
	}
	if res.IsError {
		h.audit.Info("crank audit", append(fields, zap.String("outcome", "error"), zap.String("error", h.redact.String(res.Text)))...)
		return
	}
	h.audit.Info("crank audit", append(fields, zap.String("outcome", "ok"))...)
}
