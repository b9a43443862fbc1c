package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/egress"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// server is the gRPC service of the adapter protocol around an Adapter. It
// converts requests from the generated types and answers to them; the
// host's client (package client) does the reverse.
type server struct {
	adapterv1.UnimplementedAdapterServer
	impl Adapter
	// asks are the client requests waiting for their answers (ask.go).
	asks clientAsks
}

func (s *server) Describe(ctx context.Context, _ *adapterv1.DescribeRequest) (_ *adapterv1.DescribeResponse, err error) {
	defer recoverPanic("describe", &err)
	d, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "describe: %v", err)
	}
	caps := capabilitiesOf(s.impl, d) // capabilities.go
	modes := make([]adapterv1.ExecutionMode, len(d.Modes))
	for i, m := range d.Modes {
		modes[i] = adapterv1.ExecutionMode(m)
	}
	return &adapterv1.DescribeResponse{
		Name:             d.Name,
		Version:          d.Version,
		Protocols:        d.Protocols,
		Capabilities:     caps,
		Modes:            modes,
		ConfigSchemaJson: d.ConfigSchema,
	}, nil
}

func (s *server) ValidateOperation(ctx context.Context, req *adapterv1.ValidateOperationRequest) (_ *adapterv1.ValidateOperationResponse, err error) {
	defer recoverPanic("validate", &err)
	v, ok := s.impl.(OperationValidator)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter does not validate operations")
	}
	op := operationFromProto(req.GetOperation())
	return &adapterv1.ValidateOperationResponse{Diagnostics: diagnosticsToProto(v.ValidateOperation(withOperation(ctx, &op), &op))}, nil
}

func (s *server) ExpandOperation(ctx context.Context, req *adapterv1.ExpandOperationRequest) (_ *adapterv1.ExpandOperationResponse, err error) {
	defer recoverPanic("expand", &err)
	x, ok := s.impl.(OperationExpander)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "adapter does not expand operations")
	}
	op := operationFromProto(req.GetOperation())
	op.ToolExecution = slices.Contains(req.GetHostCapabilities(), wire.HostToolExecution)
	ctx = withOperation(ctx, &op)
	tools, diags := x.ExpandOperation(ctx, &op)
	resp := &adapterv1.ExpandOperationResponse{Diagnostics: diagnosticsToProto(diags)}
	for _, t := range tools {
		a := t.Annotations
		resp.Tools = append(resp.Tools, &adapterv1.Tool{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchemaJson: t.InputSchema, OutputSchemaJson: t.OutputSchema, ConfigJson: t.Config,
			Mode: adapterv1.ExecutionMode(t.Mode), ExecutionJson: t.Execution, ItemSchemaJson: t.ItemSchema, ResumesStream: t.ResumesStream,
			MetaJson: t.Meta,
			Annotations: &adapterv1.ToolAnnotations{
				ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld,
			},
		})
	}
	// An entry that failed to expand fails the load anyway: Publish is
	// not asked (it would reach for the same unreachable upstream again).
	failed := slices.ContainsFunc(resp.Diagnostics, func(d *adapterv1.Diagnostic) bool {
		return d.GetSeverity() == adapterv1.Diagnostic_SEVERITY_ERROR
	})
	if caps := req.GetHostCapabilities(); !failed && (slices.Contains(caps, wire.HostResources) || slices.Contains(caps, wire.HostPrompts)) {
		s.publish(ctx, &op, resp) // publish.go
	}
	return fitExpansion(resp), nil
}

// fitExpansion answers an expansion too large for one protocol message
// with an error saying its size and what to do, rather than a transport
// failure that names neither.
func fitExpansion(resp *adapterv1.ExpandOperationResponse) *adapterv1.ExpandOperationResponse {
	n := proto.Size(resp)
	if n <= wire.MaxMessageBytes-(64<<10) {
		return resp
	}
	big, bigSize := "", 0
	for _, t := range resp.GetTools() {
		if sz := proto.Size(t); sz > bigSize {
			big, bigSize = t.GetName(), sz
		}
	}
	msg := fmt.Sprintf("the entry expands to %d tools in %.1f MiB, over the adapter protocol's %d MiB for one expansion "+
		"(the largest tool, %s, takes %.1f MiB): split the entry into several (each with its own filters), or make its tools smaller "+
		"(for an OpenAPI import, lower openapi.output_schema_limits or set openapi.output_schemas false)",
		len(resp.GetTools()), float64(n)/(1<<20), wire.MaxMessageBytes>>20, big, float64(bigSize)/(1<<20))
	return &adapterv1.ExpandOperationResponse{Diagnostics: append(resp.GetDiagnostics(),
		&adapterv1.Diagnostic{Severity: adapterv1.Diagnostic_SEVERITY_ERROR, Message: msg})}
}

func diagnosticsToProto(diags []Diagnostic) []*adapterv1.Diagnostic {
	var out []*adapterv1.Diagnostic
	for _, d := range diags {
		sev := d.Severity
		if sev == 0 {
			sev = SeverityError
		}
		out = append(out, &adapterv1.Diagnostic{Severity: adapterv1.Diagnostic_Severity(sev), Field: d.Field, Message: d.Message, Pointer: d.Where()})
	}
	return out
}

func (s *server) Invoke(ctx context.Context, req *adapterv1.InvokeRequest) (_ *adapterv1.InvokeResponse, err error) {
	defer recoverPanic("invoke", &err)
	r := requestFromProto(req)
	ctx, span := withCall(ctx, &r.Context, &r.Operation, "adapter invoke "+r.Operation.Name) // trace.go
	res, err := s.impl.Invoke(ctx, r)
	endCallSpan(span, err)
	if err != nil {
		if ue, ok := upstreamErrorToProto(err); ok {
			return &adapterv1.InvokeResponse{Outcome: &adapterv1.InvokeResponse_Error{Error: ue}, Spans: takeSpans()}, nil
		}
		return nil, status.Errorf(codes.Internal, "invoke: %v", err)
	}
	if res == nil {
		res = &Result{}
	}
	return &adapterv1.InvokeResponse{Outcome: &adapterv1.InvokeResponse_Result{Result: &adapterv1.Result{
		StructuredJson: res.Structured,
		Text:           res.Text,
		ContentType:    res.ContentType,
		ContentJson:    res.Content,
		InputRequired:  inputRequiredToProto(res.InputRequired), // ask.go
	}}, Spans: takeSpans()}, nil
}

func (s *server) Stream(req *adapterv1.InvokeRequest, stream adapterv1.Adapter_StreamServer) error {
	return s.serveStream(stream.Context(), req, stream.Send)
}

// serveStream runs the adapter's Stream for one request, a Stream call's
// or a logical stream's of Streams (streams.go), sending its events with
// send. It returns nil once the stream's last event (End, or the
// upstream's error) is sent, else the gRPC status the stream fails with.
func (s *server) serveStream(ctx context.Context, req *adapterv1.InvokeRequest, send func(*adapterv1.StreamEvent) error) (err error) {
	defer recoverPanic("stream", &err)
	st, ok := s.impl.(Streamer)
	if !ok {
		return status.Error(codes.Unimplemented, "adapter does not stream")
	}
	snd := &sender{send: send}
	r := requestFromProto(req)
	cctx, span := withCall(ctx, &r.Context, &r.Operation, "adapter stream "+r.Operation.Name) // trace.go
	err = st.Stream(cctx, r, snd)
	endCallSpan(span, err)
	if ue, ok := upstreamErrorToProto(err); ok {
		return send(&adapterv1.StreamEvent{Event: &adapterv1.StreamEvent_Error{Error: ue}, Spans: takeSpans()})
	}
	if err != nil && ctx.Err() == nil {
		return status.Errorf(codes.Internal, "stream: %v", err)
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return send(&adapterv1.StreamEvent{Event: &adapterv1.StreamEvent_End{End: &adapterv1.End{Cursor: snd.cursor}}, Spans: takeSpans()})
}

type sender struct {
	send   func(*adapterv1.StreamEvent) error
	cursor string
}

func (s *sender) Item(it Item) error {
	if it.Cursor != "" {
		s.cursor = it.Cursor
	}
	return s.send(&adapterv1.StreamEvent{Event: &adapterv1.StreamEvent_Item{Item: &adapterv1.Item{
		DataJson: it.Data, Id: it.ID, Cursor: it.Cursor, Partial: it.Partial,
	}}, Spans: takeSpans()})
}

func (s *sender) Gap(reason string) error {
	return s.send(&adapterv1.StreamEvent{Event: &adapterv1.StreamEvent_Gap{Gap: &adapterv1.Gap{Reason: reason}}, Spans: takeSpans()})
}

func upstreamErrorToProto(err error) (*adapterv1.UpstreamError, bool) {
	var ue *UpstreamError
	if !errors.As(err, &ue) {
		return nil, false
	}
	out := &adapterv1.UpstreamError{
		Kind:        adapterv1.UpstreamError_Kind(ue.Kind),
		Upstream:    ue.Upstream,
		Status:      ue.Status,
		Message:     ue.Message,
		BodyExcerpt: ue.Body,
		DetailJson:  ue.Detail,
		Retryable:   ue.Retryable,
		Rejected:    ue.Rejected,
		ContentJson: ue.Content,
	}
	if pe := ue.Protocol; pe != nil {
		out.ProtocolError = &adapterv1.ProtocolError{Code: pe.Code, Message: pe.Message, DataJson: pe.Data}
	}
	return out, true
}

func operationFromProto(op *adapterv1.Operation) Operation {
	return Operation{
		Name:    op.GetName(),
		Config:  json.RawMessage(op.GetConfigJson()),
		Timeout: time.Duration(op.GetTimeoutMs()) * time.Millisecond,
		Mode:    Mode(op.GetMode()),
		BaseDir: op.GetBaseDir(),
		Egress:  egressFromProto(op.GetEgress()),

		ExcerptMargin: int(max(0, op.GetExcerptMargin())),
	}
}

// egressFromProto reads an operation's egress rules; rules the SDK
// cannot read allow nothing (a host of a later version may write rules
// this one does not know).
func egressFromProto(e *adapterv1.Egress) *egress.Rules {
	if e == nil {
		return nil
	}
	rs, err := egress.New(e.GetAllow())
	if err != nil {
		rs, _ = egress.New(nil)
	}
	return rs
}

func requestFromProto(req *adapterv1.InvokeRequest) *Request {
	return &Request{
		Context:   contextFromProto(req.GetContext()), // publish.go
		Operation: operationFromProto(req.GetOperation()),
		Arguments: json.RawMessage(req.GetArgumentsJson()),
		Cursor:    req.GetCursor(),
		Input:     inputFromProto(req.GetInput()), // ask.go
		Resume:    json.RawMessage(req.GetResumeJson()),
	}
}

// endCallSpan ends the span of the adapter serving a call, failed when the
// call failed (an upstream failure by its kind).
func endCallSpan(span *Span, err error) {
	if span == nil {
		return
	}
	var ue *UpstreamError
	switch {
	case errors.As(err, &ue):
		// The kind, not the message: a message may quote what the
		// upstream answered.
		span.SetAttributes(Attr("crank.error.kind", ue.Kind.String()))
		span.Fail(ue.Kind.String())
	case err != nil && !errors.Is(err, context.Canceled):
		span.Fail("the adapter failed")
	}
	span.End()
}

// takeSpans returns the spans finished since the last answer, for the
// answer about to be sent.
func takeSpans() []*adapterv1.Span {
	spans := finished.take()
	if len(spans) == 0 {
		return nil
	}
	out := make([]*adapterv1.Span, len(spans))
	for i, s := range spans {
		p := &adapterv1.Span{
			TraceId: s.traceID[:], SpanId: s.spanID[:], ParentSpanId: s.parent[:], TraceState: s.traceState,
			Name: s.name, Kind: adapterv1.Span_Kind(s.kind),
			StartTimeUnixNano: uint64(s.start.UnixNano()), EndTimeUnixNano: uint64(s.end.UnixNano()),
			Failed: s.failed, StatusMessage: s.message,
		}
		for _, a := range s.attrs {
			p.Attributes = append(p.Attributes, attributeToProto(a))
		}
		out[i] = p
	}
	return out
}

func attributeToProto(a Attribute) *adapterv1.Attribute {
	p := &adapterv1.Attribute{Key: a.Key}
	switch v := a.Value.(type) {
	case string:
		p.Value = &adapterv1.Attribute_StringValue{StringValue: v}
	case bool:
		p.Value = &adapterv1.Attribute_BoolValue{BoolValue: v}
	case int:
		p.Value = &adapterv1.Attribute_IntValue{IntValue: int64(v)}
	case int64:
		p.Value = &adapterv1.Attribute_IntValue{IntValue: v}
	case float64:
		p.Value = &adapterv1.Attribute_DoubleValue{DoubleValue: v}
	default:
		p.Value = &adapterv1.Attribute_StringValue{StringValue: fmt.Sprint(v)}
	}
	return p
}
