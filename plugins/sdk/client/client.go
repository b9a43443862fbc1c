// Package client is the host's side of the adapter protocol: it launches
// an adapter process through go-plugin (or attaches to one served in
// debug mode) and calls it in the SDK's own types, so that a host never
// handles the generated protocol code or gRPC status codes.
//
//	p, err := client.Start(client.Config{Cmd: exec.Command("crank-adapter-acme")})
//	if err != nil { ... }
//	defer p.Kill()
//	info, err := p.Describe(ctx, "my-host/1.0")
//	res, err := p.Invoke(ctx, &sdk.Request{Operation: op, Arguments: args})
//
// An upstream failure comes back as an *sdk.UpstreamError error, a failed
// call (the adapter crashed, the deadline passed, an adapter bug) as an
// *Error with a Code.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/crankmcp/crank/plugins/sdk/egress"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Client calls one adapter. It is safe for concurrent use.
type Client struct {
	rpc     adapterv1.AdapterClient
	version int
	// onSpans receives the spans adapters send back (Config.OnSpans).
	onSpans func([]Span)
	// observer sees every call (observe.go).
	observer Observer

	// streams: the adapter said it serves Streams (Capabilities.Streams);
	// streamsInvoke: and unary calls on it (Capabilities.StreamsInvoke).
	streams, streamsInvoke atomic.Bool
	// streamsCall is the Streams call that streams of sessions and jobs
	// are carried on, invokeCall the one of unary calls (streams.go).
	streamsCall, invokeCall callSlot
}

// New returns a client of the adapter service on conn, speaking the
// current protocol version. Start is the usual way to get one.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: adapterv1.NewAdapterClient(conn), version: wire.ProtocolVersion}
}

// Info is what an adapter says of itself.
type Info struct {
	sdk.Description
	// Capabilities are the optional calls the adapter implements.
	Capabilities Capabilities
	// ProtocolVersion is the adapter protocol version of the connection.
	ProtocolVersion int
}

// Capabilities are the optional calls of the protocol an adapter
// implements (sdk.Capabilities: the SDK derives them from the interfaces
// it implements and its description).
type Capabilities = sdk.Capabilities

// Serves reports whether the adapter lists mode among its modes.
func (i *Info) Serves(mode sdk.Mode) bool {
	for _, m := range i.Modes {
		if m == mode {
			return true
		}
	}
	return false
}

// Describe asks the adapter who it is and what it can do; hostVersion is
// the host's version, for the adapter's logs.
func (c *Client) Describe(ctx context.Context, hostVersion string) (*Info, error) {
	d, err := c.rpc.Describe(ctx, &adapterv1.DescribeRequest{HostVersion: hostVersion})
	if err != nil {
		return nil, callError(err)
	}
	info := &Info{ProtocolVersion: c.version, Description: sdk.Description{
		Name:         d.GetName(),
		Version:      d.GetVersion(),
		Protocols:    d.GetProtocols(),
		ConfigSchema: d.GetConfigSchemaJson(),
	}}
	for _, m := range d.GetModes() {
		info.Modes = append(info.Modes, sdk.Mode(m))
	}
	info.Capabilities = sdk.ReadCapabilities(d.GetCapabilities())
	// What the adapter's description says, as its capabilities say it.
	info.Progress, info.Log, info.ClientRequests = info.Capabilities.Progress, info.Capabilities.Log, info.Capabilities.ClientRequests
	info.Resume, info.Egress = info.Capabilities.Resume, info.Capabilities.Egress
	c.streams.Store(info.Capabilities.Streams)
	c.streamsInvoke.Store(info.Capabilities.StreamsInvoke)
	return info, nil
}

// Validate returns the adapter's diagnostics of an operation's config. An
// adapter without the capability answers with an *Error of code
// Unimplemented.
func (c *Client) Validate(ctx context.Context, op *sdk.Operation) ([]sdk.Diagnostic, error) {
	resp, err := c.rpc.ValidateOperation(ctx, &adapterv1.ValidateOperationRequest{Operation: operationToProto(op)})
	if err != nil {
		return nil, callError(err)
	}
	return diagnosticsFromProto(resp.GetDiagnostics()), nil
}

// Expand returns the tools an operations-file entry stands for, with the
// adapter's diagnostics. op.ToolExecution tells the adapter that the host
// reads each tool's Mode, Execution and ItemSchema (a current host does).
// An adapter without the capability answers with an *Error of code
// Unimplemented.
func (c *Client) Expand(ctx context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic, error) {
	resp, err := c.expand(ctx, op)
	if err != nil {
		return nil, nil, err
	}
	tools, diags := expansionFromProto(resp)
	return tools, diags, nil
}

// expand asks for an expansion, listing hostCaps besides tool_execution.
func (c *Client) expand(ctx context.Context, op *sdk.Operation, hostCaps ...string) (*adapterv1.ExpandOperationResponse, error) {
	req := &adapterv1.ExpandOperationRequest{Operation: operationToProto(op), HostCapabilities: hostCaps}
	if op.ToolExecution {
		req.HostCapabilities = append(req.HostCapabilities, wire.HostToolExecution)
	}
	resp, err := c.rpc.ExpandOperation(ctx, req)
	if err != nil {
		return nil, callError(err)
	}
	return resp, nil
}

// expansionFromProto is an expansion's tools and diagnostics.
func expansionFromProto(resp *adapterv1.ExpandOperationResponse) ([]sdk.Tool, []sdk.Diagnostic) {
	var tools []sdk.Tool
	for _, t := range resp.GetTools() {
		tools = append(tools, toolFromProto(t))
	}
	return tools, diagnosticsFromProto(resp.GetDiagnostics())
}

// Invoke makes one request-response call. An upstream failure is returned
// as an *sdk.UpstreamError.
//
// To an adapter that takes unary calls on its Streams call
// (Capabilities.StreamsInvoke, as its Describe answer said) the call
// travels there (streams.go), else as an Invoke call of its own; either
// way it answers the same.
func (c *Client) Invoke(ctx context.Context, req *sdk.Request) (_ *sdk.Result, err error) {
	done := c.observe(ctx, "invoke", req)
	defer func() { done(err) }()
	p := requestToProto(req)
	var resp *adapterv1.InvokeResponse
	if c.streamsInvoke.Load() && !c.invokeCall.unimplemented.Load() {
		resp, err = c.invokeShared(ctx, p)
		if status.Code(err) == codes.Unimplemented && c.invokeCall.unimplemented.Load() {
			resp, err = c.rpc.Invoke(ctx, p) // the adapter does not serve the call after all
		}
	} else {
		resp, err = c.rpc.Invoke(ctx, p)
	}
	if err != nil {
		return nil, callError(err)
	}
	c.spans(resp.GetSpans())
	if ue := resp.GetError(); ue != nil {
		return nil, upstreamErrorFromProto(ue)
	}
	return resultFromProto(resp.GetResult()), nil
}

func resultFromProto(r *adapterv1.Result) *sdk.Result {
	res := &sdk.Result{Structured: r.GetStructuredJson(), Text: r.GetText(), ContentType: r.GetContentType(),
		Content: r.GetContentJson()}
	if ir := r.GetInputRequired(); ir != nil {
		res.InputRequired = &sdk.InputRequired{Requests: ir.GetInputRequestsJson(), State: ir.GetRequestState()}
	}
	return res
}

// InvokeWithProgress is Invoke for a call whose client asked for
// progress: progress receives the adapter's progress reports in order, in
// the calling goroutine, before InvokeWithProgress returns. An adapter
// without the capability (Capabilities.Progress) is called with Invoke.
func (c *Client) InvokeWithProgress(ctx context.Context, req *sdk.Request, caps Capabilities, progress func(sdk.Progress)) (_ *sdk.Result, err error) {
	return c.InvokeRelayed(ctx, req, caps, Relay{Progress: progress})
}

// Stream opens an upstream stream. Cancelling ctx ends it: the adapter
// sees its context cancelled and stops reading the upstream.
//
// The stream of a session or an async job (req.Operation.Mode ModeSession
// or ModeAsyncJob), which may be read for long, is a logical stream of the
// one Streams call the client shares between them when the adapter serves
// it (Capabilities.Streams, as its Describe answer said); any other is a
// Stream call of its own. Either way the adapter serves it as a window
// (ModeWindow), and the stream behaves the same, except that a logical
// stream may report a failure to open (the shared call broke as it was
// sent) at its first Recv rather than from Stream.
func (c *Client) Stream(ctx context.Context, req *sdk.Request) (*Stream, error) {
	done := c.observe(ctx, "stream", req)
	p := requestToProto(req)
	long := req.Operation.Mode == sdk.ModeSession || req.Operation.Mode == sdk.ModeAsyncJob
	if long {
		p.Operation.Mode = adapterv1.ExecutionMode_EXECUTION_MODE_WINDOW
	}
	var st eventSource
	var err error
	if long && c.streams.Load() && !c.streamsCall.unimplemented.Load() {
		st, err = c.openLogical(ctx, p) // streams.go
	} else {
		st, err = c.rpc.Stream(ctx, p)
	}
	if err != nil {
		err = callError(err)
		done(err)
		return nil, err
	}
	return &Stream{st: st, c: c, done: newStreamDone(ctx, done)}, nil
}

// Stream is an open upstream stream.
type Stream struct {
	st   eventSource
	c    *Client
	done *streamDone
}

// EventKind says what an Event is.
type EventKind int

// Stream event kinds.
const (
	// EventItem is one item of the stream, in Event.Item.
	EventItem EventKind = iota + 1
	// EventGap says items may have been lost (a reconnect, an overflow
	// upstream), with Event.Reason.
	EventGap
	// EventEnd is the upstream ending the stream; Event.Cursor is where
	// to resume after its last item.
	EventEnd
)

// Event is one event of a stream.
type Event struct {
	Kind   EventKind
	Item   sdk.Item
	Reason string
	Cursor string
}

// String renders the event compactly, for logs and tests: an item as its
// data (with "#cursor" when it has one), a gap as "gap: reason", the end
// as "end".
func (e Event) String() string {
	switch e.Kind {
	case EventItem:
		s := string(e.Item.Data)
		if e.Item.Cursor != "" {
			s += "#" + e.Item.Cursor
		}
		if e.Item.Partial != "" {
			s += " (partial: " + e.Item.Partial + ")"
		}
		return s
	case EventGap:
		return "gap: " + e.Reason
	case EventEnd:
		return "end"
	}
	return fmt.Sprintf("EventKind(%d)", int(e.Kind))
}

// Recv returns the next event. It returns io.EOF once the stream has
// ended (after an EventEnd, or when the adapter closed it without one),
// an *sdk.UpstreamError when the upstream failed and an *Error when the
// call failed; the stream is over after any error.
func (s *Stream) Recv() (_ Event, err error) {
	defer func() {
		if err != nil {
			s.done.report(err)
		}
	}()
	for {
		ev, err := s.st.Recv()
		if errors.Is(err, io.EOF) {
			return Event{}, io.EOF
		}
		if err != nil {
			return Event{}, callError(err)
		}
		s.c.spans(ev.GetSpans())
		switch e := ev.GetEvent().(type) {
		case *adapterv1.StreamEvent_Item:
			return Event{Kind: EventItem, Item: sdk.Item{
				Data: e.Item.GetDataJson(), ID: e.Item.GetId(), Cursor: e.Item.GetCursor(), Partial: e.Item.GetPartial(),
			}}, nil
		case *adapterv1.StreamEvent_Gap:
			return Event{Kind: EventGap, Reason: e.Gap.GetReason()}, nil
		case *adapterv1.StreamEvent_End:
			s.done.report(nil)
			return Event{Kind: EventEnd, Cursor: e.End.GetCursor(), Reason: e.End.GetReason()}, nil
		case *adapterv1.StreamEvent_Error:
			return Event{}, upstreamErrorFromProto(e.Error)
		}
		// An event of a newer protocol revision: skip it.
	}
}

// Code classifies a failed call.
type Code int

// Call failure codes.
const (
	// Unknown: any other failure; Error.Message says what.
	Unknown Code = iota
	// Cancelled: the caller cancelled the call.
	Cancelled
	// DeadlineExceeded: the call's deadline passed.
	DeadlineExceeded
	// Unavailable: the adapter process or the connection to it is gone.
	Unavailable
	// Unimplemented: the adapter does not implement this optional call.
	Unimplemented
	// Internal: the adapter failed (a bug, a panic).
	Internal
)

var codeNames = [...]string{Unknown: "unknown", Cancelled: "cancelled", DeadlineExceeded: "deadline exceeded",
	Unavailable: "unavailable", Unimplemented: "unimplemented", Internal: "internal"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is a call that failed rather than an upstream that did (which is
// an *sdk.UpstreamError).
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// CodeOf returns the Code of an *Error in err's chain, Unknown for another
// error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

// callError turns a gRPC status into an *Error.
func callError(err error) error {
	st := status.Convert(err)
	e := &Error{Message: st.Message()}
	switch st.Code() {
	case codes.Canceled:
		e.Code = Cancelled
	case codes.DeadlineExceeded:
		e.Code = DeadlineExceeded
	case codes.Unavailable:
		e.Code = Unavailable
	case codes.Unimplemented:
		e.Code = Unimplemented
	case codes.Internal:
		e.Code = Internal
	default:
		e.Message = st.Code().String() + ": " + e.Message
	}
	return e
}

func operationToProto(op *sdk.Operation) *adapterv1.Operation {
	return &adapterv1.Operation{
		Name:       op.Name,
		ConfigJson: op.Config,
		TimeoutMs:  op.Timeout.Milliseconds(),
		Mode:       adapterv1.ExecutionMode(op.Mode),
		BaseDir:    op.BaseDir,
		Egress:     egressToProto(op.Egress),

		ExcerptMargin: int32(min(op.ExcerptMargin, 1<<30)),
	}
}

func egressToProto(rs *egress.Rules) *adapterv1.Egress {
	if rs == nil {
		return nil
	}
	return &adapterv1.Egress{Allow: rs.List()}
}

func requestToProto(req *sdk.Request) *adapterv1.InvokeRequest {
	return &adapterv1.InvokeRequest{
		Context:       contextToProto(req.Context),
		Operation:     operationToProto(&req.Operation),
		ArgumentsJson: req.Arguments,
		Cursor:        req.Cursor,
		Input:         inputToProto(req.Input),
		ResumeJson:    req.Resume,
	}
}

func inputToProto(in *sdk.InputResponses) *adapterv1.InputResponses {
	if in == nil {
		return nil
	}
	return &adapterv1.InputResponses{InputResponsesJson: in.Responses, RequestState: in.State}
}

func contextToProto(c sdk.RequestContext) *adapterv1.RequestContext {
	r := &adapterv1.RequestContext{
		RequestId: c.RequestID, WorkspaceId: c.WorkspaceID, AgentId: c.AgentID,
		Traceparent: c.TraceParent, Tracestate: c.TraceState, RecordSpans: c.RecordSpans,
	}
	if !c.Deadline.IsZero() {
		r.Deadline = timestamppb.New(c.Deadline)
	}
	return r
}

func diagnosticsFromProto(diags []*adapterv1.Diagnostic) []sdk.Diagnostic {
	var out []sdk.Diagnostic
	for _, d := range diags {
		out = append(out, sdk.Diagnostic{Severity: sdk.Severity(d.GetSeverity()), Field: d.GetField(), Message: d.GetMessage(), Pointer: d.GetPointer()})
	}
	return out
}

func toolFromProto(t *adapterv1.Tool) sdk.Tool {
	tool := sdk.Tool{
		Name: t.GetName(), Title: t.GetTitle(), Description: t.GetDescription(),
		InputSchema: t.GetInputSchemaJson(), OutputSchema: t.GetOutputSchemaJson(), Config: t.GetConfigJson(),
		Mode: sdk.Mode(t.GetMode()), Execution: t.GetExecutionJson(), ItemSchema: t.GetItemSchemaJson(), ResumesStream: t.GetResumesStream(),
		Meta: t.GetMetaJson(),
	}
	if a := t.GetAnnotations(); a != nil {
		tool.Annotations = sdk.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
	}
	return tool
}

func upstreamErrorFromProto(ue *adapterv1.UpstreamError) *sdk.UpstreamError {
	out := &sdk.UpstreamError{
		Kind:      sdk.ErrorKind(ue.GetKind()),
		Upstream:  ue.GetUpstream(),
		Status:    ue.GetStatus(),
		Message:   ue.GetMessage(),
		Body:      ue.GetBodyExcerpt(),
		Detail:    ue.GetDetailJson(),
		Retryable: ue.GetRetryable(),
		Rejected:  ue.GetRejected(),
		Content:   ue.GetContentJson(),
	}
	if pe := ue.GetProtocolError(); pe != nil {
		out.Protocol = &sdk.ProtocolError{Code: pe.GetCode(), Message: pe.GetMessage(), Data: pe.GetDataJson()}
	}
	return out
}
