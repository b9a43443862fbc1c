package client

import (
	"context"
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
}

// InvokeRelayed is Invoke for a call whose client asked for progress or
// log messages: they are handed to r's functions in order, in the calling
// goroutine, before InvokeRelayed returns. What the adapter does not
// report (Capabilities.Progress, Capabilities.Log) is not asked for; with
// nothing to ask for the call is an Invoke.
func (c *Client) InvokeRelayed(ctx context.Context, req *sdk.Request, caps Capabilities, r Relay) (_ *sdk.Result, err error) {
	if !caps.Progress {
		return c.Invoke(ctx, req)
	}
	wantLog := caps.Log && r.Log != nil && slices.Contains(sdk.LogLevels, r.LogLevel)
	if r.Progress == nil && !wantLog {
		return c.Invoke(ctx, req)
	}
	done := c.observe(ctx, "invoke", req)
	defer func() { done(err) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	preq := requestToProto(req)
	if wantLog {
		// An adapter without the log capability would take a relay as
		// progress alone: it is sent to adapters that list it only.
		preq.Relay = &adapterv1.Relay{Progress: r.Progress != nil, LogLevel: r.LogLevel}
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
