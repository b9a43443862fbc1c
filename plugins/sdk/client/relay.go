package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Relay is what a call's client asked to receive while the call runs.
type Relay struct {
	// Progress, when set, receives the adapter's progress reports.
	Progress func(sdk.Progress)
	// Log, when set with LogLevel (one of sdk.LogLevels), receives the
	// upstream's log messages for the call at LogLevel and above.
	Log      func(sdk.LogMessage)
	LogLevel string
	// Ask, when set with ClientCapabilities (the MCP ClientCapabilities
	// object as JSON), answers the upstream's requests of the call's
	// client (method, params as JSON): the client's result as JSON, or a
	// *sdk.ClientError (any other error is answered as an internal
	// JSON-RPC error).
	Ask                func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	ClientCapabilities json.RawMessage
	// InputRequired: the client takes input-required results (with
	// ClientCapabilities, without Ask): the adapter answers what it would
	// ask with sdk.Result.InputRequired.
	InputRequired bool
	// Resume, when set, receives the call's resume states
	// (sdk.ReportResume) as the adapter reports them, of an adapter that
	// resumes calls (Capabilities.Resume).
	Resume func(state json.RawMessage)
}

// InvokeRelayed is Invoke for a call whose client asked for progress or
// log messages: they are handed to r's functions in order, in the calling
// goroutine, before InvokeRelayed returns. What the adapter does not
// report (Capabilities.Progress, Capabilities.Log, Capabilities.Resume)
// is not asked for; with nothing to ask for the call is an Invoke.
func (c *Client) InvokeRelayed(ctx context.Context, req *sdk.Request, caps Capabilities, r Relay) (_ *sdk.Result, err error) {
	if !caps.Progress {
		return c.Invoke(ctx, req)
	}
	wantLog := caps.Log && r.Log != nil && slices.Contains(sdk.LogLevels, r.LogLevel)
	wantAsk := caps.ClientRequests && (r.Ask != nil || r.InputRequired) && json.Valid(r.ClientCapabilities)
	wantResume := caps.Resume && r.Resume != nil
	if r.Progress == nil && !wantLog && !wantAsk && !wantResume {
		return c.Invoke(ctx, req)
	}
	done := c.observe(ctx, "invoke", req)
	defer func() { done(err) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	preq := requestToProto(req)
	if wantLog || wantAsk || wantResume {
		// An adapter without the log capability would take a relay as
		// progress alone: it is sent to adapters that list it only (or
		// client requests, which came after it).
		preq.Relay = &adapterv1.Relay{Progress: r.Progress != nil}
		if wantLog {
			preq.Relay.LogLevel = r.LogLevel
		}
		if wantAsk {
			preq.Relay.ClientCapabilitiesJson = r.ClientCapabilities
			preq.Relay.InputRequired = r.InputRequired
		}
		preq.Relay.Resume = wantResume
	}
	st, err := c.rpc.InvokeWithProgress(ctx, preq)
	if err != nil {
		return nil, callError(err)
	}
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return nil, &Error{Code: Internal, Message: "invoke: the adapter ended the call without a response"}
		}
		if status.Code(err) == codes.Unimplemented {
			return c.Invoke(ctx, req) // an adapter that listed the capability in error
		}
		if err != nil {
			return nil, callError(err)
		}
		if p := ev.GetProgress(); p != nil {
			if r.Progress != nil {
				r.Progress(sdk.Progress{Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()})
			}
			continue
		}
		if l := ev.GetLog(); l != nil {
			if wantLog && sdk.LogLevelAtLeast(l.GetLevel(), r.LogLevel) {
				r.Log(sdk.LogMessage{Level: l.GetLevel(), Logger: l.GetLogger(), Data: l.GetDataJson()})
			}
			continue
		}
		if rs := ev.GetResume(); rs != nil {
			if wantResume && json.Valid(rs.GetStateJson()) {
				r.Resume(rs.GetStateJson())
			}
			continue
		}
		if q := ev.GetClientRequest(); q != nil {
			if err := c.answerClient(ctx, q, wantAsk, r.Ask); err != nil {
				return nil, err
			}
			continue
		}
		resp := ev.GetResponse()
		if resp == nil {
			continue // an event of a later protocol
		}
		c.spans(resp.GetSpans())
		if ue := resp.GetError(); ue != nil {
			return nil, upstreamErrorFromProto(ue)
		}
		return resultFromProto(resp.GetResult()), nil
	}
}

// answerClient asks the call's client a request of the adapter's
// upstream, in the calling goroutine, and sends the answer back. A
// request the host did not offer to answer is answered "method not
// found" (a host error, not the client's).
func (c *Client) answerClient(ctx context.Context, q *adapterv1.ClientRequest, offered bool, ask func(context.Context, string, json.RawMessage) (json.RawMessage, error)) error {
	ans := &adapterv1.ClientAnswer{Id: q.GetId()}
	var res json.RawMessage
	err := error(&sdk.ClientError{Code: codeMethodNotFound, Message: "the gateway relays no client requests for this call"})
	if offered && ask != nil {
		res, err = ask(ctx, q.GetMethod(), q.GetParamsJson())
	}
	var ce *sdk.ClientError
	switch {
	case err == nil:
		ans.ResultJson = res
	case errors.As(err, &ce):
		ans.Error = &adapterv1.ClientError{Code: ce.Code, Message: ce.Message, DataJson: ce.Data}
	default:
		ans.Error = &adapterv1.ClientError{Code: codeInternalError, Message: err.Error()}
	}
	_, err = c.rpc.AnswerClientRequest(ctx, ans)
	if status.Code(err) == codes.NotFound {
		return nil // the adapter no longer waits for it (its upstream gave up)
	}
	if err != nil {
		return callError(err)
	}
	return nil
}

// JSON-RPC error codes of the answers the client makes itself.
const (
	codeMethodNotFound = -32601
	codeInternalError  = -32603
)
