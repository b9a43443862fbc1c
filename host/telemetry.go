package host

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Outcome classes of a tool call, the outcome label of
// crank_tool_calls_total and the outcome of its access record. A result
// that sets none is "ok", or "error" when it is an error.
const (
	OutcomeOK                  = "ok"
	OutcomeError               = "error"
	OutcomeInvalidArguments    = "invalid_arguments"
	OutcomeUpstreamStatus      = "upstream_status"
	OutcomeUpstreamUnreachable = "upstream_unreachable"
	OutcomeUpstreamBadResponse = "upstream_bad_response"
	OutcomeUpstreamError       = "upstream_error"
	OutcomeTimeout             = "timeout"
	OutcomeCancelled           = "cancelled"
	OutcomeAdapterCrash        = "adapter_crash"
	OutcomeAdapterUnavailable  = "adapter_unavailable"
	OutcomeAdapterError        = "adapter_error"
	OutcomeQuota               = "quota"
	OutcomeStoreUnavailable    = "store_unavailable"
	OutcomeNotFound            = "not_found"
	// OutcomeOutputMismatch: the answer did not match the tool's
	// published output schema and was delivered as text
	// (outputschema.go).
	OutcomeOutputMismatch = "output_mismatch"
	// OutcomeDenied: the endpoint's policy hid the tool or refused the
	// arguments; the call never reached the host.
	OutcomeDenied = "denied"
	// OutcomeRateLimited: a rate limit of the endpoint refused the call;
	// it never reached the host (RecordRefused).
	OutcomeRateLimited = "rate_limited"
)

// classed sets the outcome class of an error result.
func classed(r *Result, class string) *Result {
	r.class = class
	return r
}

// outcome is r's outcome class.
func (r *Result) outcome() string {
	switch {
	case r == nil:
		return OutcomeError
	case r.class != "":
		return r.class
	case r.IsError:
		return OutcomeError
	}
	return OutcomeOK
}

// upstreamOutcome classifies an upstream failure the adapter reported.
func upstreamOutcome(ue *sdk.UpstreamError) string {
	switch ue.Kind {
	case sdk.KindUpstreamStatus:
		return OutcomeUpstreamStatus
	case sdk.KindTransport:
		return OutcomeUpstreamUnreachable
	case sdk.KindTimeout:
		return OutcomeTimeout
	case sdk.KindCancelled:
		return OutcomeCancelled
	case sdk.KindInvalidArgument:
		return OutcomeInvalidArguments
	case sdk.KindBadResponse:
		return OutcomeUpstreamBadResponse
	}
	return OutcomeUpstreamError
}

// callErrorOutcome classifies a failed adapter call as describeCallError
// explains it.
func callErrorOutcome(ctx context.Context, op *boundOp, err error) string {
	code := client.CodeOf(err)
	switch {
	case ctx.Err() == context.DeadlineExceeded || code == client.DeadlineExceeded:
		return OutcomeTimeout
	case ctx.Err() == context.Canceled || code == client.Cancelled && !op.sup.Exited():
		return OutcomeCancelled
	case code == client.Unavailable || op.sup.Exited():
		return OutcomeAdapterCrash
	}
	return OutcomeAdapterError
}

// callObservation is the telemetry of one tool call: its metrics series,
// its span and its access record.
type callObservation struct {
	ctx    context.Context
	h      *Host
	op     *boundOp
	req    *CallRequest
	series *telemetry.Tool
	start  time.Time
	span   trace.Span
}

// observeCall starts the telemetry of a call of op: the call's span (a
// child of ctx's span, or of the caller's trace context in req), and its
// metrics. The adapter sees the span's trace context (see
// Supervisor.observe).
func (h *Host) observeCall(ctx context.Context, op *boundOp, req *CallRequest) (context.Context, *callObservation) {
	if req.RequestID == "" {
		req.RequestID = newRequestID() // the access record names it, even for refused arguments
	}
	ctx = telemetry.WithRemoteParent(ctx, req.TraceParent, req.TraceState)
	ctx, span := telemetry.Tracer().Start(ctx, "tool "+telemetry.ToolLabel(op.Name), trace.WithAttributes(
		attribute.String("crank.tool.name", op.Name), attribute.String("crank.tool.mode", string(op.Mode)),
		attribute.String("crank.adapter", op.Adapter)))
	req.TraceParent, req.TraceState = telemetry.TraceHeaders(ctx)
	o := &callObservation{ctx: ctx, h: h, op: op, req: req, span: span,
		series: telemetry.ToolSeries(op.Name, string(op.Mode), op.Role)}
	o.start = o.series.Begin()
	if o.start.IsZero() {
		o.start = time.Now()
	}
	return ctx, o
}

// end records the call's outcome: metrics, span status and the access
// record (tool, mode, outcome, duration, request, trace, workspace and
// agent; never arguments or results).
func (o *callObservation) end(res *Result) {
	outcome := res.outcome()
	took := time.Since(o.start)
	o.series.End(o.start, outcome)
	telemetry.SetCallOutcome(o.ctx, outcome)
	if outcome != OutcomeOK {
		telemetry.Fail(o.span, outcome)
	}
	o.span.SetAttributes(attribute.String("crank.outcome", outcome))
	o.span.End()
	o.h.writeAccess(o.op.Operation, o.req, outcome, took, o.span.SpanContext(), res.limitName())
}

// writeAccess writes a call's access record (tool, mode, outcome,
// duration, request, trace, workspace and agent, and the limit or quota
// that refused it; never arguments or results).
func (h *Host) writeAccess(op *opsfile.Operation, req *CallRequest, outcome string, took time.Duration, sc trace.SpanContext, limit string) {
	ce := h.access.Check(zap.InfoLevel, "tool call")
	if ce == nil {
		return
	}
	fields := []zap.Field{zap.String("tool", op.Name), zap.String("mode", string(op.Mode)),
		zap.String("outcome", outcome), zap.Duration("duration", took), zap.String("request_id", req.RequestID),
		zap.String("workspace", req.WorkspaceID), zap.String("agent", req.AgentID)}
	if sc.HasTraceID() {
		fields = append(fields, zap.String("trace_id", sc.TraceID().String()))
	}
	if limit != "" {
		fields = append(fields, zap.String("limit", limit))
	}
	ce.Write(fields...)
}

// RecordRefused records a call of req.Tool that a limit of the endpoint
// refused before it reached the host: crank_tool_calls_total with outcome
// and the access record naming limit.
func (h *Host) RecordRefused(req CallRequest, outcome, limit string) {
	op := req.Tool.Operation()
	if op == nil {
		return
	}
	t := telemetry.ToolSeries(op.Name, string(op.Mode), op.Role)
	t.End(t.Begin(), outcome)
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	h.writeAccess(op, &req, outcome, 0, trace.SpanContext{}, limit)
}

// validationSpan times the validation of a call's arguments.
func validationSpan(ctx context.Context) func(failed bool) {
	_, span := telemetry.StartChild(ctx, "validate arguments")
	return func(failed bool) {
		if failed {
			telemetry.Fail(span, OutcomeInvalidArguments)
		}
		span.End()
	}
}

// observe is the observer of an adapter's calls (client.Observer): the
// span of the call across the adapter hop, whose trace context the
// adapter gets (and whose spans it sends back when this one is
// recorded), and the hop's metrics.
func (s *Supervisor) observe(ctx context.Context, rpc string, req *sdk.Request) func(error) {
	name := s.spec.Name
	ctx, span := telemetry.StartChild(ctx, "adapter "+rpc+" "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "crank-adapter"), attribute.String("crank.adapter", name)))
	if tp, ts := telemetry.TraceHeaders(ctx); tp != "" {
		req.Context.TraceParent, req.Context.TraceState = tp, ts
	}
	req.Context.RecordSpans = telemetry.Recording(ctx)
	start := time.Now()
	return func(err error) {
		result := adapterResult(err)
		telemetry.AdapterCall(name, rpc, result, time.Since(start))
		if result != "ok" && result != "upstream_error" {
			telemetry.Fail(span, result)
		}
		span.End()
	}
}

// adapterResult is the result label of a call across the adapter hop.
func adapterResult(err error) string {
	var ue *sdk.UpstreamError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ue):
		return "upstream_error"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	switch client.CodeOf(err) {
	case client.Cancelled:
		return "cancelled"
	case client.DeadlineExceeded:
		return "deadline_exceeded"
	case client.Unavailable:
		return "unavailable"
	case client.Unimplemented:
		return "unimplemented"
	case client.Internal:
		return "internal"
	}
	return "unknown"
}

// exportSpans exports the spans the adapter sent back.
func (s *Supervisor) exportSpans(spans []client.Span) {
	telemetry.ExportAdapterSpans(s.spec.Name, spans)
}

// AdapterName and Running make a Supervisor a telemetry.AdapterProcess
// (crank_adapter_up).
func (s *Supervisor) AdapterName() string { return s.spec.Name }

// Running reports whether the adapter's process runs.
func (s *Supervisor) Running() bool { return !s.Exited() }
