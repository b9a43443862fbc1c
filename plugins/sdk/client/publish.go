package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// ExpandPublished is Expand for a host that also serves the MCP resources,
// resource templates and prompts an entry publishes (sdk.Publisher): it
// returns them beside the tools, nil when the adapter publishes none.
func (c *Client) ExpandPublished(ctx context.Context, op *sdk.Operation) ([]sdk.Tool, *sdk.Published, []sdk.Diagnostic, error) {
	resp, err := c.expand(ctx, op, wire.HostResources, wire.HostPrompts)
	if err != nil {
		return nil, nil, nil, err
	}
	tools, diags := expansionFromProto(resp)
	pub := &sdk.Published{Resources: publicationsFromProto(resp.GetResources()),
		ResourceTemplates: publicationsFromProto(resp.GetResourceTemplates()), Prompts: publicationsFromProto(resp.GetPrompts())}
	if len(pub.Resources)+len(pub.ResourceTemplates)+len(pub.Prompts) == 0 {
		pub = nil
	} else if pc := resp.GetPublishedCapabilities(); pc != nil {
		pub.Completions, pub.Subscribe = pc.GetCompletions(), pc.GetSubscribe()
	}
	return tools, pub, diags, nil
}

// publicationsFromProto converts published resources, templates or
// prompts.
func publicationsFromProto[T interface {
	GetDefinitionJson() []byte
	GetConfigJson() []byte
}](list []T) []sdk.Publication {
	var out []sdk.Publication
	for _, p := range list {
		out = append(out, sdk.Publication{Definition: p.GetDefinitionJson(), Config: p.GetConfigJson()})
	}
	return out
}

// ReadResource reads a resource an entry published (Capabilities.Resources):
// the MCP contents array as JSON. An upstream failure is returned as an
// *sdk.UpstreamError.
func (c *Client) ReadResource(ctx context.Context, req *sdk.ResourceRequest) (_ json.RawMessage, err error) {
	done := c.observe(ctx, "read_resource", &sdk.Request{Context: req.Context, Operation: req.Operation})
	defer func() { done(err) }()
	relay, input := readRelay(req.ClientCapabilities, req.Input)
	resp, err := c.rpc.ReadResource(ctx, &adapterv1.ReadResourceRequest{
		Context: contextToProto(req.Context), Operation: operationToProto(&req.Operation), Uri: req.URI,
		Relay: relay, Input: input})
	if err != nil {
		return nil, callError(err)
	}
	c.spans(resp.GetSpans())
	if ue := resp.GetError(); ue != nil {
		return nil, upstreamErrorFromProto(ue)
	}
	if ir := resp.GetInputRequired(); ir != nil && relay != nil {
		return nil, &sdk.InputRequired{Requests: ir.GetInputRequestsJson(), State: ir.GetRequestState()}
	}
	return resp.GetContentsJson(), nil
}

// GetPrompt renders a prompt an entry published (Capabilities.Prompts): the
// MCP GetPromptResult as JSON. An upstream failure is returned as an
// *sdk.UpstreamError.
func (c *Client) GetPrompt(ctx context.Context, req *sdk.PromptRequest) (_ json.RawMessage, err error) {
	done := c.observe(ctx, "get_prompt", &sdk.Request{Context: req.Context, Operation: req.Operation})
	defer func() { done(err) }()
	relay, input := readRelay(req.ClientCapabilities, req.Input)
	resp, err := c.rpc.GetPrompt(ctx, &adapterv1.GetPromptRequest{
		Context: contextToProto(req.Context), Operation: operationToProto(&req.Operation), Name: req.Name,
		Arguments: req.Arguments, Relay: relay, Input: input})
	if err != nil {
		return nil, callError(err)
	}
	c.spans(resp.GetSpans())
	if ue := resp.GetError(); ue != nil {
		return nil, upstreamErrorFromProto(ue)
	}
	if ir := resp.GetInputRequired(); ir != nil && relay != nil {
		return nil, &sdk.InputRequired{Requests: ir.GetInputRequestsJson(), State: ir.GetRequestState()}
	}
	return resp.GetResultJson(), nil
}

// Complete completes an argument of a prompt or resource template an
// entry published (Capabilities.Completions, Published.Completions): the
// MCP CompleteResult's completion as JSON. An upstream failure is
// returned as an *sdk.UpstreamError.
func (c *Client) Complete(ctx context.Context, req *sdk.CompleteRequest) (_ json.RawMessage, err error) {
	done := c.observe(ctx, "complete", &sdk.Request{Context: req.Context, Operation: req.Operation})
	defer func() { done(err) }()
	resp, err := c.rpc.Complete(ctx, &adapterv1.CompleteRequest{
		Context: contextToProto(req.Context), Operation: operationToProto(&req.Operation), RefType: req.RefType, Ref: req.Ref,
		ArgumentName: req.Argument, ArgumentValue: req.Value, ContextArguments: req.Arguments})
	if err != nil {
		return nil, callError(err)
	}
	c.spans(resp.GetSpans())
	if ue := resp.GetError(); ue != nil {
		return nil, upstreamErrorFromProto(ue)
	}
	return resp.GetCompletionJson(), nil
}

// WatchResource subscribes to a resource an entry published
// (Capabilities.Subscribe, Published.Subscribe) until ctx ends: it
// returns once the adapter says the upstream took the subscription (or
// with why it did not), then calls updated for each update from a
// goroutine of its own; done receives how the watch ended (nil when ctx
// ended it).
func (c *Client) WatchResource(ctx context.Context, req *sdk.ResourceRequest, updated func(uri string)) (done <-chan error, err error) {
	st, err := c.rpc.WatchResource(ctx, &adapterv1.WatchResourceRequest{
		Context: contextToProto(req.Context), Operation: operationToProto(&req.Operation), Uri: req.URI})
	if err != nil {
		return nil, callError(err)
	}
	recv := func() (string, error) {
		ev, err := st.Recv()
		switch {
		case err == io.EOF:
			return "", errors.New("the adapter ended the subscription")
		case err != nil && ctx.Err() != nil:
			return "", nil
		case err != nil:
			return "", callError(err)
		case ev.GetError() != nil:
			return "", upstreamErrorFromProto(ev.GetError())
		}
		return ev.GetUpdatedUri(), nil
	}
	first, err := st.Recv()
	switch {
	case err != nil:
		return nil, callError(err)
	case first.GetError() != nil:
		return nil, upstreamErrorFromProto(first.GetError())
	case !first.GetSubscribed():
		return nil, errors.New("the adapter answered a subscription with an update before taking it")
	}
	ch := make(chan error, 1)
	go func() {
		for {
			uri, err := recv()
			if err != nil || ctx.Err() != nil {
				ch <- err
				return
			}
			if uri != "" {
				updated(uri)
			}
		}
	}()
	return ch, nil
}

// readRelay is the relay and input of a read or rendering whose host
// takes input-required answers for its client (caps, its capabilities;
// the host sets them only for adapters that list "client_requests"); nil,
// nil otherwise.
func readRelay(caps json.RawMessage, in *sdk.InputResponses) (*adapterv1.Relay, *adapterv1.InputResponses) {
	if len(caps) == 0 || !json.Valid(caps) {
		return nil, nil
	}
	return &adapterv1.Relay{ClientCapabilitiesJson: caps, InputRequired: true}, inputToProto(in)
}
