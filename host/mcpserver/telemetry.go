package mcpserver

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/crankmcp/crank/internal/telemetry"
)

// telemetryMiddleware records every MCP request a session receives
// (crank_mcp_requests_total, crank_mcp_request_duration_seconds) and
// serves it under a span "<method>" (with the tool's name for tools/call).
// The span's parent is the trace context of the request's _meta
// (traceparent, tracestate) when it has one, else the span of Caddy's
// tracing handler when the request passed one, else the HTTP request's
// traceparent header (a client's, or that span's again: the handler sets
// the header too).
func (ep *Endpoint) telemetryMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		start := time.Now()
		label := telemetry.MCPMethod(method)
		if tp, ts, fromMeta := traceParent(req); fromMeta {
			ctx = telemetry.WithParent(ctx, tp, ts) // the client's, over Caddy's span
		} else {
			ctx = telemetry.WithRemoteParent(ctx, tp, ts)
		}
		name := label
		var attrs []attribute.KeyValue
		attrs = append(attrs, attribute.String("mcp.method.name", label))
		if p := planOf(ctx); method == "tools/call" && p.served() { // plan.go
			name += " " + telemetry.ToolLabel(p.name)
			attrs = append(attrs, attribute.String("gen_ai.tool.name", p.name))
		}
		ctx, span := telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		ctx, callOutcome := telemetry.WithCallOutcome(ctx)
		res, err := next(ctx, method, req)
		outcome := "ok"
		switch {
		case errors.Is(err, context.Canceled) || ctx.Err() != nil || *callOutcome == "cancelled":
			outcome = "cancelled"
		case err != nil:
			outcome = "error"
		}
		if err != nil {
			telemetry.Fail(span, outcome)
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			telemetry.Fail(span, "tool_error")
		}
		span.End()
		telemetry.MCPRequest(method, outcome, time.Since(start))
		return res, err
	}
}

// traceParent returns the trace context a request carries: its _meta's
// (fromMeta), else its HTTP request's headers.
func traceParent(req mcp.Request) (traceparent, tracestate string, fromMeta bool) {
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		if m := p.GetMeta(); m != nil {
			if tp, ok := m["traceparent"].(string); ok && tp != "" {
				ts, _ := m["tracestate"].(string)
				return tp, ts, true
			}
		}
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get("Traceparent"), ex.Header.Get("Tracestate"), false
	}
	return "", "", false
}
