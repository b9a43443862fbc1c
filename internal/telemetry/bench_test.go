package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkRecordCall is what one unary tool call records: its tool
// series, the MCP request and the adapter hop; compare with a call's
// duration (BenchmarkCallTelemetry in host).
func BenchmarkRecordCall(b *testing.B) {
	tool := ToolSeries("bench_tool", "unary", "")
	b.ReportAllocs()
	for range b.N {
		start := tool.Begin()
		AdapterCall("rest", "invoke", "ok", time.Millisecond)
		tool.End(start, "ok")
		MCPRequest("tools/call", "ok", time.Millisecond)
	}
}

// BenchmarkSpansSampledOut is the spans of one call (MCP request, tool,
// adapter hop) when tracing is on and the trace is not sampled.
func BenchmarkSpansSampledOut(b *testing.B) {
	defer UseTracing(sdktrace.NewSimpleSpanProcessor(nil), sdktrace.ParentBased(sdktrace.NeverSample()))()
	b.ReportAllocs()
	for range b.N {
		ctx, s1 := Tracer().Start(context.Background(), "tools/call bench_tool")
		ctx, s2 := Tracer().Start(ctx, "tool bench_tool")
		ctx, s3 := Tracer().Start(ctx, "adapter invoke rest")
		_, _ = TraceHeaders(ctx)
		s3.End()
		s2.End()
		s1.End()
	}
}
