package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// The tools of session and async_job families: binding them at load and
// dispatching a call by its role, with what every role shares (the
// caller's scope, answers, store errors).

// Scope is who calls: sessions and jobs are visible to their workspace,
// and — for agent-scoped operations, the default — to their agent only.
type Scope struct {
	WorkspaceID string
	AgentID     string
}

func (req CallRequest) scope() store.Scope {
	return store.Scope{WorkspaceID: req.WorkspaceID, AgentID: req.AgentID}
}

// checkFamilies checks what the families of tab need: the store, and the
// status and cancel operations of upstream-native jobs.
func (h *Host) checkFamilies(tab *toolTable, fams []*boundOp) opsfile.Problems {
	var probs opsfile.Problems
	fail := func(op *opsfile.Operation, ptr, reason string) { probs = append(probs, h.problem(op, ptr, reason)) }
	for _, x := range fams {
		if h.store == nil && !h.check {
			fail(x.Operation, "/mode", fmt.Sprintf("mode %s keeps its state in the store, and this host has none (configure the crank app's etcd)", x.Mode))
			continue
		}
		j := x.Family.Job
		if j == nil {
			continue
		}
		for _, ref := range []struct{ field, name string }{
			{"/job/status_operation", j.StatusOperation}, {"/job/cancel_operation", j.CancelOperation},
		} {
			if ref.name == "" {
				continue
			}
			target, ok := tab.ops[ref.name]
			switch {
			case !ok:
				fail(x.Operation, ref.field, fmt.Sprintf("no operation named %q", ref.name))
			case target.Mode != opsfile.ModeUnary || target.Role != "":
				fail(x.Operation, ref.field, fmt.Sprintf("operation %q is %s: it must be a unary operation", ref.name, target.Mode))
			}
		}
	}
	return probs
}

// callFamily runs one tool of a session or async_job family.
func (h *Host) callFamily(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) *Result {
	start := time.Now()
	var res *Result
	var id string
	switch op.Role {
	case opsfile.RoleStart:
		if op.Mode == opsfile.ModeSession {
			res, id = h.startStreamSession(ctx, op.base, req, args)
		} else {
			res, id = h.startJob(ctx, op.base, req, args)
		}
	default:
		var a familyArgs
		_ = json.Unmarshal(args, &a) // validated against the role's schema
		id = a.SessionID + a.JobID
		switch op.Role {
		case opsfile.RolePoll:
			res = h.pollStreamSession(ctx, op.base, req, a)
		case opsfile.RoleStop:
			res = h.stopStreamSession(ctx, op.base, req, a.SessionID)
		case opsfile.RoleStatus:
			res = h.jobStatus(ctx, op.base, req, a.JobID)
		case opsfile.RoleResult:
			res = h.jobResult(ctx, op.base, req, a.JobID)
		case opsfile.RoleCancel:
			res = h.cancelJob(ctx, op.base, req, a.JobID)
		}
		// What the store holds was redacted when it was written; redacted
		// again as it is read, as a record written by an earlier release
		// may not have been.
		res = h.redacted(res)
	}
	h.auditCall(op, req, id, res, time.Since(start))
	return res
}

type familyArgs struct {
	SessionID string `json:"session_id"`
	JobID     string `json:"job_id"`
	Cursor    string `json:"cursor"`
	MaxItems  int    `json:"max_items"`
}

// structured answers a family tool: the object as structuredContent and
// as JSON text.
func structured(v any) *Result {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult("could not encode the answer: " + err.Error())
	}
	return &Result{Structured: b, Text: string(b)}
}

// storeError explains a store failure to the caller, naming the entity.
func (h *Host) storeError(kind, id string, err error) *Result {
	var qe *store.QuotaError
	var rq replicaQuotaError
	switch {
	case errors.As(err, &qe):
		telemetry.QuotaRefusal(quotaName(qe))
		r := classed(errorResult(h.quotaMessage(qe)), OutcomeQuota)
		r.limit = quotaName(qe)
		return r
	case errors.As(err, &rq):
		return classed(errorResult(string(rq)), OutcomeQuota)
	case EvictionNotice(err) != "":
		return classed(errorResult(EvictionNotice(err)), OutcomeNotFound)
	case errors.Is(err, store.ErrNotFound):
		return classed(errorResult(fmt.Sprintf("%s %q not found: it does not exist, has expired, or was started by another workspace or agent", kind, id)), OutcomeNotFound)
	case errors.Is(err, store.ErrUnavailable):
		return classed(errorResult(fmt.Sprintf("the state store is unavailable, try again shortly (retryable): %v", err)), OutcomeStoreUnavailable)
	case errors.Is(err, store.ErrNoSpace):
		return errorResult("the state store (etcd) is out of space: it refuses new sessions, jobs and polls until space is recovered; try again later")
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrIllegalTransition), errors.Is(err, store.ErrInvalid):
		return errorResult(h.redact.String(trimStorePrefix(err.Error())))
	}
	return errorResult(h.redact.String(fmt.Sprintf("%s %q: %v", kind, id, err)))
}

func trimStorePrefix(s string) string {
	for len(s) > 7 && s[:7] == "store: " {
		s = s[7:]
	}
	return s
}
