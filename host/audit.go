package host

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

// Quotas bound how many sessions and jobs may be open at once, per
// workspace and per agent of a workspace (zero: unlimited), and how many
// run at once on this replica (Replica). A start over a quota fails with
// an error result naming it.
type Quotas struct {
	StreamSessionsPerWorkspace int
	StreamSessionsPerAgent     int
	JobsPerWorkspace           int
	JobsPerAgent               int
	// Replica caps the sessions and jobs running on this replica, shared
	// by the hosts of the process; nil: no cap.
	Replica *ReplicaLimits
}

// quotaMessage names the exceeded quota as the operator configured it.
func (h *Host) quotaMessage(qe *store.QuotaError) string {
	kind := "sessions"
	if qe.Kind == "job" {
		kind = "jobs"
	}
	return fmt.Sprintf("quota max_%s_%s exceeded: %s already has %d open %s (limit %d); stop or finish one first",
		kind, qe.Quota, qe.Scope, qe.Open, kind, qe.Limit)
}

// quotaName is the option name of a store quota (telemetry.Quotas).
func quotaName(qe *store.QuotaError) string {
	if qe.Kind == "job" {
		return "max_jobs_" + qe.Quota
	}
	return "max_sessions_" + qe.Quota
}

// auditCall writes the audit record of one family tool call: who
// (workspace, agent), what (tool, operation, session or job ID), when
// (the record's time), how long, and the outcome. Error texts are
// redacted like results.
func (h *Host) auditCall(op *boundOp, req CallRequest, id string, res *Result, took time.Duration) {
	kind := "session"
	if op.Mode == ModeAsyncJob {
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
