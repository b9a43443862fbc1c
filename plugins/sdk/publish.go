package sdk

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Publisher is implemented by adapters whose entries publish MCP
// resources, resource templates and prompts beside their tools, such as
// an MCP upstream's. The host asks for them at load and at each
// re-expansion (Publish, after ExpandOperation, unless that reported an
// error: a Publisher is an OperationExpander too) and publishes them to its clients; a client's
// resources/read and prompts/get come back as ReadResource and GetPrompt,
// with the entry's operation carrying the Config of what is read.
type Publisher interface {
	// Publish lists what the entry publishes. An entry may publish
	// resources or prompts and no tool. Diagnostics name config fields,
	// as ExpandOperation's do.
	Publish(ctx context.Context, op *Operation) (*Published, []Diagnostic)
	// ReadResource reads req.URI: a published resource's URI, or one a
	// published template matches. It returns the MCP ReadResourceResult's
	// contents (an array of text or blob resource contents) as JSON, or,
	// to pass on the upstream's caching hints, an object of the contents
	// and the upstream's ttlMs and cacheScope ({"contents": [...],
	// "ttlMs": 60000, "cacheScope": "private"}; hosts that predate it
	// read arrays only); upstream failures as *UpstreamError.
	ReadResource(ctx context.Context, req *ResourceRequest) (json.RawMessage, error)
	// GetPrompt renders the prompt req.Name with the client's arguments.
	// It returns the MCP GetPromptResult (description, messages) as JSON;
	// upstream failures as *UpstreamError.
	GetPrompt(ctx context.Context, req *PromptRequest) (json.RawMessage, error)
}

// Published is what an entry publishes beside its tools.
type Published struct {
	// Resources are MCP Resource objects (uri, name, title,
	// description, mimeType, size, annotations, icons).
	Resources []Publication
	// ResourceTemplates are MCP ResourceTemplate objects (uriTemplate,
	// name, title, description, mimeType, annotations, icons).
	ResourceTemplates []Publication
	// Prompts are MCP Prompt objects (name, title, description,
	// arguments, icons).
	Prompts []Publication
	// Completions: the arguments of these prompts and resource templates
	// complete (a Completer's Complete); the host offers completions to
	// its clients only for entries that say so.
	Completions bool
	// Subscribe: these resources can be subscribed to (a
	// ResourceWatcher's WatchResource).
	Subscribe bool
}

// Completer is a Publisher whose prompts' and resource templates'
// arguments complete, such as an MCP upstream's that offers
// completion/complete. The host calls Complete for entries whose
// Published says Completions.
type Completer interface {
	Publisher
	// Complete completes req.Argument of the prompt or template req.Ref.
	// It returns the MCP CompleteResult's completion (values, total,
	// hasMore) as JSON; upstream failures as *UpstreamError.
	Complete(ctx context.Context, req *CompleteRequest) (json.RawMessage, error)
}

// Completion references: what a CompleteRequest completes.
const (
	RefPrompt   = "ref/prompt"
	RefResource = "ref/resource"
)

// CompleteRequest is one completion of an argument.
type CompleteRequest struct {
	Context   RequestContext
	Operation Operation
	// RefType is RefPrompt, with Ref the prompt's name, or RefResource,
	// with Ref the template's URI template, as the host published them.
	RefType, Ref string
	// Argument is the argument's name, Value what the client typed of it.
	Argument, Value string
	// Arguments are the ones the client already resolved.
	Arguments map[string]string
}

// ResourceWatcher is a Publisher whose resources can be subscribed to,
// such as an MCP upstream's that offers resources/subscribe. The host
// watches a URI for entries whose Published says Subscribe, once however
// many of its clients subscribed to it.
type ResourceWatcher interface {
	Publisher
	// WatchResource subscribes to req.URI: it calls events.Subscribed once
	// the upstream took the subscription, then events.Updated for each
	// update, until ctx ends, when it unsubscribes and returns nil. A
	// subscription that fails, or ends upstream, returns the error
	// (*UpstreamError for the upstream's).
	WatchResource(ctx context.Context, req *ResourceRequest, events ResourceEvents) error
}

// ResourceEvents receives what a watch of a resource reports.
type ResourceEvents interface {
	// Subscribed says the upstream took the subscription.
	Subscribed() error
	// Updated says the resource at uri (the one watched, or one below it)
	// changed.
	Updated(uri string) error
}

// Publication is one resource, resource template or prompt.
type Publication struct {
	// Definition is the MCP object as JSON, as the host publishes it.
	Definition json.RawMessage
	// Config is sent back as Operation.Config when it is read or
	// rendered; nil means the entry's config.
	Config json.RawMessage
}

// ResourceRequest is one read of a resource.
type ResourceRequest struct {
	Context   RequestContext
	Operation Operation
	URI       string
	// ClientCapabilities and Input: as PromptRequest's.
	ClientCapabilities json.RawMessage
	Input              *InputResponses
}

// PromptRequest is one rendering of a prompt.
type PromptRequest struct {
	Context   RequestContext
	Operation Operation
	// Name is the prompt's name as the host published it.
	Name      string
	Arguments map[string]string
	// ClientCapabilities, set by a host that takes input-required answers
	// for the request's client (the MCP ClientCapabilities object as
	// JSON; sent to adapters that list "client_requests" only): the
	// request's context then says so (ClientCapabilities,
	// TakesInputRequired), and a read or rendering that needs the
	// client's input first returns *InputRequired as its error. The host
	// sends it again with Input, the client's answers. A read is never
	// asked during the request (AskClient fails).
	ClientCapabilities json.RawMessage
	Input              *InputResponses
}

// Error makes an InputRequired the error of a read or rendering that
// needs its client's input first (PromptRequest.ClientCapabilities).
func (ir *InputRequired) Error() string { return "the request needs its client's input first" }

// relayFromProto is the context of a read or rendering for a host that
// takes input-required answers (relay.input_required with the client's
// capabilities), ctx otherwise, and the client's capabilities.
func relayFromProto(ctx context.Context, rl *adapterv1.Relay) (context.Context, json.RawMessage) {
	caps := rl.GetClientCapabilitiesJson()
	if !rl.GetInputRequired() || len(caps) == 0 || !json.Valid(caps) {
		return ctx, nil
	}
	return context.WithValue(ctx, progressKey{}, &progressReporter{client: caps, inputRequired: true}), caps
}

// inputRequiredOf is the input-required answer err carries, nil for any
// other error.
func inputRequiredOf(err error) *adapterv1.InputRequired {
	var ir *InputRequired
	if errors.As(err, &ir) {
		return inputRequiredToProto(ir)
	}
	return nil
}

func publicationsToProto[T any](list []Publication, mk func(def, cfg []byte) T) []T {
	var out []T
	for _, p := range list {
		out = append(out, mk(p.Definition, p.Config))
	}
	return out
}

// publish adds what the entry publishes to an expansion's answer.
func (s *server) publish(ctx context.Context, op *Operation, resp *adapterv1.ExpandOperationResponse) {
	p, ok := s.impl.(Publisher)
	if !ok {
		return
	}
	pub, diags := p.Publish(ctx, op)
	resp.Diagnostics = append(resp.Diagnostics, diagnosticsToProto(diags)...)
	if pub == nil {
		return
	}
	res := func(def, cfg []byte) *adapterv1.Resource {
		return &adapterv1.Resource{DefinitionJson: def, ConfigJson: cfg}
	}
	resp.Resources = publicationsToProto(pub.Resources, res)
	resp.ResourceTemplates = publicationsToProto(pub.ResourceTemplates, res)
	resp.Prompts = publicationsToProto(pub.Prompts, func(def, cfg []byte) *adapterv1.Prompt {
		return &adapterv1.Prompt{DefinitionJson: def, ConfigJson: cfg}
	})
	_, completes := p.(Completer)
	_, watches := p.(ResourceWatcher)
	if c := (&adapterv1.PublishedCapabilities{Completions: pub.Completions && completes, Subscribe: pub.Subscribe && watches}); c.Completions || c.Subscribe {
		resp.PublishedCapabilities = c
	}
}

func (s *server) Complete(ctx context.Context, req *adapterv1.CompleteRequest) (_ *adapterv1.CompleteResponse, err error) {
	defer recoverPanic("complete", &err)
	c, ok := s.impl.(Completer)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter does not complete arguments")
	}
	r := &CompleteRequest{Context: contextFromProto(req.GetContext()), Operation: operationFromProto(req.GetOperation()),
		RefType: req.GetRefType(), Ref: req.GetRef(), Argument: req.GetArgumentName(), Value: req.GetArgumentValue(),
		Arguments: req.GetContextArguments()}
	ctx, span := withCall(ctx, &r.Context, &r.Operation, "adapter complete "+r.Operation.Name) // trace.go
	res, err := c.Complete(ctx, r)
	endCallSpan(span, err)
	if err != nil {
		if ue, ok := upstreamErrorToProto(err); ok {
			return &adapterv1.CompleteResponse{Outcome: &adapterv1.CompleteResponse_Error{Error: ue}, Spans: takeSpans()}, nil
		}
		return nil, status.Errorf(codes.Internal, "complete: %v", err)
	}
	return &adapterv1.CompleteResponse{Outcome: &adapterv1.CompleteResponse_CompletionJson{CompletionJson: res}, Spans: takeSpans()}, nil
}

// resourceEvents sends a watch's events on its call.
type resourceEvents struct {
	stream adapterv1.Adapter_WatchResourceServer
}

func (e resourceEvents) Subscribed() error {
	return e.stream.Send(&adapterv1.ResourceWatchEvent{Subscribed: true})
}

func (e resourceEvents) Updated(uri string) error {
	return e.stream.Send(&adapterv1.ResourceWatchEvent{UpdatedUri: uri})
}

func (s *server) WatchResource(req *adapterv1.WatchResourceRequest, stream adapterv1.Adapter_WatchResourceServer) (err error) {
	defer recoverPanic("watch resource", &err)
	w, ok := s.impl.(ResourceWatcher)
	if !ok {
		return status.Error(codes.Unimplemented, "adapter does not watch resources")
	}
	r := &ResourceRequest{Context: contextFromProto(req.GetContext()), Operation: operationFromProto(req.GetOperation()), URI: req.GetUri()}
	err = w.WatchResource(withOperation(stream.Context(), &r.Operation), r, resourceEvents{stream})
	if ctx := stream.Context(); ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		if ue, ok := upstreamErrorToProto(err); ok {
			return stream.Send(&adapterv1.ResourceWatchEvent{Error: ue})
		}
		return status.Errorf(codes.Internal, "watch resource: %v", err)
	}
	return nil
}

func (s *server) ReadResource(ctx context.Context, req *adapterv1.ReadResourceRequest) (_ *adapterv1.ReadResourceResponse, err error) {
	defer recoverPanic("read resource", &err)
	p, ok := s.impl.(Publisher)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter does not publish resources")
	}
	r := &ResourceRequest{Context: contextFromProto(req.GetContext()), Operation: operationFromProto(req.GetOperation()), URI: req.GetUri(),
		Input: inputFromProto(req.GetInput())}
	ctx, r.ClientCapabilities = relayFromProto(ctx, req.GetRelay())
	ctx, span := withCall(ctx, &r.Context, &r.Operation, "adapter read resource "+r.Operation.Name) // trace.go
	contents, err := p.ReadResource(ctx, r)
	if ir := inputRequiredOf(err); ir != nil && r.ClientCapabilities != nil {
		endCallSpan(span, nil)
		return &adapterv1.ReadResourceResponse{Outcome: &adapterv1.ReadResourceResponse_InputRequired{InputRequired: ir}, Spans: takeSpans()}, nil
	}
	endCallSpan(span, err)
	if err != nil {
		if ue, ok := upstreamErrorToProto(err); ok {
			return &adapterv1.ReadResourceResponse{Outcome: &adapterv1.ReadResourceResponse_Error{Error: ue}, Spans: takeSpans()}, nil
		}
		return nil, status.Errorf(codes.Internal, "read resource: %v", err)
	}
	return &adapterv1.ReadResourceResponse{Outcome: &adapterv1.ReadResourceResponse_ContentsJson{ContentsJson: contents}, Spans: takeSpans()}, nil
}

func (s *server) GetPrompt(ctx context.Context, req *adapterv1.GetPromptRequest) (_ *adapterv1.GetPromptResponse, err error) {
	defer recoverPanic("get prompt", &err)
	p, ok := s.impl.(Publisher)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter does not publish prompts")
	}
	r := &PromptRequest{Context: contextFromProto(req.GetContext()), Operation: operationFromProto(req.GetOperation()),
		Name: req.GetName(), Arguments: req.GetArguments(), Input: inputFromProto(req.GetInput())}
	ctx, r.ClientCapabilities = relayFromProto(ctx, req.GetRelay())
	ctx, span := withCall(ctx, &r.Context, &r.Operation, "adapter get prompt "+r.Operation.Name) // trace.go
	res, err := p.GetPrompt(ctx, r)
	if ir := inputRequiredOf(err); ir != nil && r.ClientCapabilities != nil {
		endCallSpan(span, nil)
		return &adapterv1.GetPromptResponse{Outcome: &adapterv1.GetPromptResponse_InputRequired{InputRequired: ir}, Spans: takeSpans()}, nil
	}
	endCallSpan(span, err)
	if err != nil {
		if ue, ok := upstreamErrorToProto(err); ok {
			return &adapterv1.GetPromptResponse{Outcome: &adapterv1.GetPromptResponse_Error{Error: ue}, Spans: takeSpans()}, nil
		}
		return nil, status.Errorf(codes.Internal, "get prompt: %v", err)
	}
	return &adapterv1.GetPromptResponse{Outcome: &adapterv1.GetPromptResponse_ResultJson{ResultJson: res}, Spans: takeSpans()}, nil
}

// contextFromProto is the request context of a call.
func contextFromProto(c *adapterv1.RequestContext) RequestContext {
	rc := RequestContext{
		RequestID:   c.GetRequestId(),
		WorkspaceID: c.GetWorkspaceId(),
		AgentID:     c.GetAgentId(),
		TraceParent: c.GetTraceparent(),
		TraceState:  c.GetTracestate(),
		RecordSpans: c.GetRecordSpans(),
	}
	if c.GetDeadline() != nil {
		rc.Deadline = c.GetDeadline().AsTime()
	}
	return rc
}
