package host_test

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/internal/telemetry"
)

// BenchmarkCall measures a host call to an adapter process (echo, no
// upstream): argument validation, the go-plugin gRPC hop and the result.
func BenchmarkCall(b *testing.B) {
	f, err := newFixture(b, catalogYAML)
	if err != nil {
		b.Fatal(err)
	}
	req := host.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"id": 7, "tags": ["a"]}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := f.h.Call(context.Background(), req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkCallTelemetry is BenchmarkCall without any telemetry, with
// metrics, with metrics and sampled-out tracing (tracing configured, the
// trace not sampled: what most calls cost with a sample_ratio below 1),
// and with every span recorded (to a processor that drops them), in one
// run: the cost of each is its ratio to "off".
func BenchmarkCallTelemetry(b *testing.B) {
	f, err := newFixture(b, catalogYAML)
	if err != nil {
		b.Fatal(err)
	}
	req := host.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"id": 7, "tags": ["a"]}`)}
	for _, c := range []struct {
		name    string
		metrics bool
		sampler sdktrace.Sampler
	}{
		{"off", false, nil},
		{"metrics", true, nil},
		{"metrics+tracing_sampled_out", true, sdktrace.ParentBased(sdktrace.NeverSample())},
		{"metrics+tracing_sampled", true, sdktrace.AlwaysSample()},
	} {
		b.Run(c.name, func(b *testing.B) {
			telemetry.SetMetricsEnabled(c.metrics)
			defer telemetry.SetMetricsEnabled(true)
			if c.sampler != nil {
				defer telemetry.UseTracing(discardSpans{}, c.sampler)()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				res, err := f.h.Call(context.Background(), req)
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// discardSpans is a span processor that drops every span.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
