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

// openInput opens the request state of a retried call into req.input,
// or returns the result (and ErrInvalidRequestState, or nil when it is
// the shared keys that failed) refusing it.
func (h *Host) openInput(ctx context.Context, op *boundOp, req *CallRequest, args json.RawMessage) (*Result, error) {
	if req.Input == nil {
		return nil, nil
	}
	refuse := func(msg string) (*Result, error) {
		return classed(errorResult("requestState "+msg), OutcomeInvalidArguments), fmt.Errorf("%w %s", ErrInvalidRequestState, msg)
	}
	key, err := h.cursorKey(ctx)
	if err != nil {
		return classed(errorResult("requestState cannot be checked now (the shared keys are unavailable): retry the call"), OutcomeAdapterUnavailable), nil
	}
	v, ok := openCursor(key, inputState, inputBind(op, *req, args), req.Input.State)
	var in sealedInput
	if !ok || json.Unmarshal([]byte(v), &in) != nil {
		return refuse("is not one this tool returned for these arguments and this caller: send it unchanged, or call the tool afresh without it")
	}
	if time.Now().Unix() > in.Expires {
		return refuse("has expired (after " + inputStateTTL.String() + "): call the tool afresh without it")
	}
	responses := req.Input.Responses
	if len(responses) == 0 {
		responses = json.RawMessage("{}")
	}
	req.input = &sdk.InputResponses{Responses: responses, State: in.State}
	return nil, nil
}

// inputRequiredResult is the result of a call that needs its client's
// input first: the input requests, redacted, and the sealed state.
func (h *Host) inputRequiredResult(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage, ir *sdk.InputRequired) *Result {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return classed(errorResult("the call needs the client's input, and its request state cannot be sealed now (the shared keys are unavailable): retry the call"), OutcomeAdapterUnavailable)
	}
	b, _ := json.Marshal(sealedInput{State: ir.State, Expires: time.Now().Add(inputStateTTL).Unix()})
	return &Result{InputRequests: h.redactLogData(req, ir.Requests),
		RequestState: sealCursor(key, inputState, inputBind(op, req, args), string(b))}
}
