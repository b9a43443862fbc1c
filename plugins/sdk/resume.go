package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Resuming a call on another replica.
//
// An async job whose one call follows work that lives upstream (an MCP
// upstream's task, say) need not die with the gateway replica that runs
// it: an adapter whose Description says Resume reports, during such a
// call, the state another call needs to go on following that work
// (ReportResume); the host keeps it with the job, and when the replica
// dies another replica calls the same operation again with it
// (Request.Resume). The adapter then follows the same upstream work
// rather than starting it again, and answers as the first call would
// have, progress included.

// MaxResumeBytes bounds a resume state (ReportResume).
const MaxResumeBytes = 16 << 10

// WantsResume reports whether the host keeps the resume state of the call
// whose context ctx is: the call is an async job's and the host asked for
// it, which it does of adapters whose Description says Resume (and
// Progress, whose RPC carries it).
func WantsResume(ctx context.Context) bool {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	return ok && r.resume
}

// ReportResume sends the host the resume state of the call whose context
// ctx is: a JSON value of the adapter's own that names the upstream work
// the call follows (never a credential: the resuming call gets the
// operation's config as usual), which a later call of the same operation
// receives as Request.Resume. Report it as soon as the work exists
// upstream, and again should it change; the last report counts. It does
// nothing (and returns nil) when the host did not ask for it
// (WantsResume), returns an error for a state that is not JSON or is
// larger than MaxResumeBytes, and ErrCallEnded or the host's error once
// the call has answered or the host has gone.
func ReportResume(ctx context.Context, state json.RawMessage) error {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	if !ok || !r.resume {
		return nil
	}
	switch {
	case !json.Valid(state):
		return fmt.Errorf("sdk.ReportResume: the resume state is not JSON")
	case len(state) > MaxResumeBytes:
		return fmt.Errorf("sdk.ReportResume: the resume state has %d bytes, more than MaxResumeBytes (%d)", len(state), MaxResumeBytes)
	}
	return r.report(func() error { return r.sendResume(state) })
}

// resumeEvent is the InvokeEvent of a resume state.
func resumeEvent(state json.RawMessage) *adapterv1.InvokeEvent {
	return &adapterv1.InvokeEvent{Event: &adapterv1.InvokeEvent_Resume{Resume: &adapterv1.Resume{StateJson: state}}}
}
