package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Input-required results (MCP SEP-2322) for clients of 2026-07-28, which
// cannot be asked during a call: when an adapter answers that a call
// needs the client's input first (an MCP upstream's own input-required
// result), the host passes the input requests on, redacted, with a
// request state of its own: the adapter's state sealed (cursor.go,
// purpose inputState) and bound to the workspace, the agent, the tool
// and the arguments, with an expiry. The client's retry, on any replica,
// gets the adapter's state back only from a state the host issued for
// that very call; any other is refused naming requestState before the
// adapter is called (ErrInvalidRequestState: invalid params). The state is authenticated, not hidden: it is what
// the upstream would have handed the client talking to it directly.

// inputState is the purpose of a sealed request state.
const inputState = "input"

// inputStateTTL is how long a client may take to answer an input-required
// result.
const inputStateTTL = 15 * time.Minute

// InputAnswer is a client's retry of a call after an input-required
// result: its inputResponses object and the requestState as the host gave
// it (CallRequest.Input).
type InputAnswer struct {
	Responses json.RawMessage
	State     string
}

// sealedInput is the value of a sealed request state.
type sealedInput struct {
	State   string `json:"s"`
	Expires int64  `json:"exp"`
}

// inputBind is what a request state is bound to.
func inputBind(op *boundOp, req CallRequest, args json.RawMessage) []string {
	return []string{req.WorkspaceID, req.AgentID, op.Name, string(args)}
}

// ErrInvalidRequestState is the error of a retry whose request state the
// host did not issue for its call (a protocol error: the MCP endpoint
// answers it as invalid params).
var ErrInvalidRequestState = errors.New("requestState")

// errInputKeys is the error of a request state that cannot be sealed or
// checked now: the shared keys are unavailable.
var errInputKeys = errors.New("the shared keys are unavailable")

// openInput opens the request state of a retried call into req.input,
// or returns the result (and ErrInvalidRequestState, or nil when it is
// the shared keys that failed) refusing it.
func (h *Host) openInput(ctx context.Context, op *boundOp, req *CallRequest, args json.RawMessage) (*Result, error) {
	if req.Input == nil {
		return nil, nil
	}
	in, err := h.openSealedInput(ctx, inputBind(op, *req, args), req.Input, "tool")
	switch {
	case errors.Is(err, errInputKeys):
		return classed(errorResult("requestState cannot be checked now (the shared keys are unavailable): retry the call"), OutcomeAdapterUnavailable), nil
	case err != nil:
		return classed(errorResult(err.Error()), OutcomeInvalidArguments), err
	}
	req.input = in
	return nil, nil
}

// openSealedInput is the adapter's side of a retry's answer: its state
// opened, when the host sealed it bound to bind; else an error wrapping
// ErrInvalidRequestState (its message starts "requestState"; what is the
// kind of thing that returned it, "tool" say), or errInputKeys.
func (h *Host) openSealedInput(ctx context.Context, bind []string, answer *InputAnswer, what string) (*sdk.InputResponses, error) {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return nil, errInputKeys
	}
	v, ok := openCursor(key, inputState, bind, answer.State)
	var in sealedInput
	if !ok || json.Unmarshal([]byte(v), &in) != nil {
		return nil, fmt.Errorf("%w is not one this %s returned for these arguments and this caller: send it unchanged, or call the %s afresh without it", ErrInvalidRequestState, what, what)
	}
	if time.Now().Unix() > in.Expires {
		return nil, fmt.Errorf("%w has expired (after %s): call the %s afresh without it", ErrInvalidRequestState, inputStateTTL, what)
	}
	responses := answer.Responses
	if len(responses) == 0 {
		responses = json.RawMessage("{}")
	}
	return &sdk.InputResponses{Responses: responses, State: in.State}, nil
}

// inputRequiredResult is the result of a call that needs its client's
// input first: the input requests, redacted, and the sealed state.
func (h *Host) inputRequiredResult(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage, ir *sdk.InputRequired) *Result {
	state, err := h.sealInput(ctx, inputBind(op, req, args), ir.State)
	if err != nil {
		return classed(errorResult("the call needs the client's input, and its request state cannot be sealed now (the shared keys are unavailable): retry the call"), OutcomeAdapterUnavailable)
	}
	return &Result{InputRequests: h.redactLogData(req, ir.Requests), RequestState: state}
}

// sealInput is the request state the client gets for the adapter's
// state, bound to bind; errInputKeys when it cannot be sealed now.
func (h *Host) sealInput(ctx context.Context, bind []string, state string) (string, error) {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return "", errInputKeys
	}
	b, _ := json.Marshal(sealedInput{State: state, Expires: time.Now().Add(inputStateTTL).Unix()})
	return sealCursor(key, inputState, bind, string(b)), nil
}
