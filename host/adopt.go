package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/store"
)

// Adoption: when a replica dies, a surviving one takes over the jobs whose
// whole state is an upstream handle. The job keeps its ID and its record
// (status, progress, place in tasks/list); the adopting replica follows
// the upstream's work on and finishes it, and a cancel reaches it there.
// The store makes this replica the orphan's owner before offering it
// (store.AdoptFunc). Two kinds of job are followed from here, each from
// what its runner recorded with it (follow_json), never shown to clients:
//   - an async_job whose upstream runs the job itself, followed through
//     its status_operation (and cancelled through its cancel_operation)
//     with the start result (the ticket);
//   - an async_job of one adapter call that follows work living upstream
//     (an MCP upstream's task), when its adapter resumes calls
//     (Capabilities.Resume, the protocol's "resume"): the resume state the
//     adapter reported during the call, with which the same operation is
//     called again (InvokeRequest.resume_json) to follow the same work.
//
// What cannot be followed from here is refused, and the store fails it
// owner_lost with the reason:
//   - a job whose upstream credentials are exchanged from the caller's own
//     access token (upstream_auth token_exchange), which only the replica
//     that served the caller held;
//   - a job over a window, whose items lived in the dead replica's memory;
//   - a job of one call whose adapter does not resume calls (one built
//     with an SDK that predates it), or that reported no resume state (its
//     work was not resumable: e.g. an MCP upstream started as a command
//     beside the dead replica, or no task was created yet);
//   - a stream session, whose reader ran on the dead replica.

// Adopters are the hosts that may take over a store's orphaned jobs: one
// value per store, held by whoever holds the store (the gateway's store
// pool), offered to by its endpoints (Offer) and asked by its sweeper
// (Adopt). The zero value is ready to use.
type Adopters struct {
	mu    sync.Mutex
	hosts []*func() *Host
}

// Offer lets the host current returns (an endpoint's, nil while it has
// none) take over the orphaned jobs it can follow (see Adopt), until
// withdraw is called.
func (a *Adopters) Offer(current func() *Host) (withdraw func()) {
	p := &current
	a.mu.Lock()
	a.hosts = append(a.hosts, p)
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		a.hosts = slices.DeleteFunc(a.hosts, func(q *func() *Host) bool { return q == p })
		a.mu.Unlock()
	}
}

// Adopt is the store's adoption hook (store.SweeperConfig.Adopt): an
// orphaned job one of the offered hosts (the latest first) serves and can
// follow is resumed on this replica; anything else is refused, saying
// why.
func (a *Adopters) Adopt(ctx context.Context, o store.Orphan) error {
	if o.Job == nil {
		return errors.New("a stream session's reader runs on the replica that started it")
	}
	a.mu.Lock()
	hosts := slices.Clone(a.hosts)
	a.mu.Unlock()
	for _, current := range slices.Backward(hosts) {
		h := (*current)()
		if h == nil {
			continue
		}
		if op, ok := h.tab.Load().families[o.Job.OperationID]; ok && op.Family.Job != nil {
			return h.adoptJob(ctx, op, o.Job)
		}
	}
	return fmt.Errorf("no endpoint of this replica serves its operation %q", o.Job.OperationID)
}

// adoptJob resumes job, an async job of op whose owner died and which the
// store made this replica's, or says why it cannot.
func (h *Host) adoptJob(ctx context.Context, op *boundOp, job *store.AsyncJobHandle) error {
	j := op.Family.Job
	switch {
	case j.StatusOperation == "" && op.Execution != nil:
		return errors.New("it collected a window on the replica that died, whose items lived in that replica's memory; start the job again")
	case op.UpstreamAuth != nil && op.UpstreamAuth.Grant == auth.GrantTokenExchange:
		return errors.New("its upstream credentials are exchanged from the caller's own access token (upstream_auth token_exchange), which only the replica that served the caller held; start the job again")
	case op.UpstreamAuth != nil && op.UpstreamAuth.Grant == auth.GrantAuthorizationCode:
		return errors.New("its upstream credentials are its user's own (upstream_auth authorization_code), and a job's record does not say which user started it; start the job again")
	case j.StatusOperation == "":
		if err := h.resumable(ctx, op, job); err != nil {
			return err
		}
	case len(job.Follow) == 0:
		return errors.New("the replica that died had not recorded the upstream's job yet")
	}
	var ticket any
	req := CallRequest{RequestID: newRequestID(), WorkspaceID: job.WorkspaceID, AgentID: job.AgentID}
	if j.StatusOperation == "" {
		req.resume = job.Follow // the adapter call resumes from it
	} else {
		var err error
		if ticket, err = jsonpath.Decode(job.Follow); err != nil {
			return fmt.Errorf("its follow_json is not JSON: %v", err)
		}
	}
	// The operator's credentials (client_credentials), obtained here.
	if res := h.obtainUpstreamToken(ctx, op, &req); res != nil {
		return errors.New(res.Text)
	}
	run, slot, err := h.enterJobRunner()
	if err != nil {
		return err
	}
	if err := h.launchJob(run, slot, job, op, req, nil, ticket); err != nil {
		return err
	}
	h.log.Info("job of a replica that died taken over", zap.String("job", job.ID), zap.String("operation", op.Name))
	return nil
}

// resumable says why the job of one adapter call of op cannot be resumed
// on this replica, if it cannot: its adapter must resume calls, and must
// have reported the call's resume state.
func (h *Host) resumable(ctx context.Context, op *boundOp, job *store.AsyncJobHandle) error {
	if _, err := op.sup.Client(ctx); err != nil { // started, so that it has described itself
		return fmt.Errorf("its adapter %q is not available on this replica: %v", op.Adapter, err)
	}
	if d := op.sup.Description(); d == nil || !d.Capabilities.Resume || !d.Capabilities.Progress {
		return fmt.Errorf("its adapter %q does not resume calls (it lists no %q capability: an adapter built with an SDK that predates it), "+
			"so no other replica can rejoin the one call it ran on the replica that died; start the job again", op.Adapter, "resume")
	}
	if len(job.Follow) == 0 {
		return fmt.Errorf("it ran as one call of adapter %q on the replica that died, which reported no resume state for it: "+
			"the call had started no resumable work upstream (e.g. an MCP upstream started as a command runs beside the replica that died, "+
			"or its task was not created yet); start the job again", op.Adapter)
	}
	return nil
}
