package host

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/crankmcp/crank/host/schemacheck"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
)

// OwnRunners gives h a runner set of its own and returns its stop, so a
// test stops h's runners without stopping those of the tests beside it.
func OwnRunners(h *Host) func(context.Context) error {
	rs := &runnerSet{live: map[*runner]struct{}{}, held: map[string]int{}}
	h.runners = rs
	return rs.stop
}

// SealInput is the request state the host gives a client whose call of
// tool (by workspace and agent, with args) needs its input, for the
// adapter's state.
func SealInput(tool, workspace, agent string, args json.RawMessage, state string) string {
	h := &Host{redact: redact.New(nil)} // a host without a store: sealed with the process's key
	op := &boundOp{Operation: &opsfile.Operation{}}
	op.Name = tool
	res := h.inputRequiredResult(context.Background(), op, CallRequest{WorkspaceID: workspace, AgentID: agent}, args,
		&sdk.InputRequired{Requests: json.RawMessage(`{}`), State: state})
	return res.RequestState
}

// OpenInput is what a retry of tool (by workspace and agent, with args)
// with the request state sealed gets: the adapter's state, or the text of
// the refusal.
func OpenInput(tool, workspace, agent string, args json.RawMessage, sealed string) (string, string) {
	h := &Host{redact: redact.New(nil)}
	op := &boundOp{Operation: &opsfile.Operation{}}
	op.Name = tool
	req := CallRequest{WorkspaceID: workspace, AgentID: agent, Input: &InputAnswer{State: sealed}}
	if res, err := h.openInput(context.Background(), op, &req, args); res != nil {
		if !errors.Is(err, ErrInvalidRequestState) {
			return "", "not ErrInvalidRequestState: " + res.Text
		}
		return "", res.Text
	}
	return req.input.State, ""
}

// MismatchAt is where doc first fails schema, as the note of a result
// that does not match says it: "<pointer>: <reason>".
func MismatchAt(schema json.RawMessage, doc string) string {
	s, err := schemacheck.Compile(schema, schemacheck.Results)
	if err != nil {
		return err.Error()
	}
	v, _ := schemacheck.Decode([]byte(doc))
	f := s.Check(v)
	if f == nil {
		return "valid"
	}
	return f.Pointer + ": " + f.Reason
}

// CheckOutputBench is checkOutput of a result with structured content
// raw against schema, for its benchmark.
func CheckOutputBench(schema, raw json.RawMessage) func() bool {
	h := &Host{redact: redact.New(nil)}
	op := &boundOp{Operation: &opsfile.Operation{Name: "bench", OutputSchema: schema}}
	res := &Result{Structured: raw, Text: string(raw)}
	return func() bool { return h.checkOutput(op, res) == res }
}

// OutcomeOf is a result's outcome class (telemetry.go).
func OutcomeOf(r *Result) string { return r.outcome() }
