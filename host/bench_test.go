package host_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

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
	req := host.CallRequest{Tool: f.h.Tool("echo"), Arguments: json.RawMessage(`{"id": 7, "tags": ["a"]}`)}
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
// and with every span recorded (to a processor that drops them). The
// variants take turns in blocks of 50 calls within one run, so that the
// machine's load weighs on each alike; each is reported in ns per call
// and as its ratio to "off".
func BenchmarkCallTelemetry(b *testing.B) {
	f, err := newFixture(b, catalogYAML)
	if err != nil {
		b.Fatal(err)
	}
	req := host.CallRequest{Tool: f.h.Tool("echo"), Arguments: json.RawMessage(`{"id": 7, "tags": ["a"]}`)}
	variants := []struct {
		name    string
		metrics bool
		sampler sdktrace.Sampler
	}{
		{"off", false, nil},
		{"metrics", true, nil},
		{"sampled_out", true, sdktrace.ParentBased(sdktrace.NeverSample())},
		{"sampled", true, sdktrace.AlwaysSample()},
	}
	const block = 50
	took := make([]time.Duration, len(variants))
	calls := make([]int, len(variants))
	defer telemetry.SetMetricsEnabled(true)
	b.ReportAllocs()
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		v := round % len(variants)
		telemetry.SetMetricsEnabled(variants[v].metrics)
		restore := func() {}
		if variants[v].sampler != nil {
			restore = telemetry.UseTracing(discardSpans{}, variants[v].sampler)
		}
		for range min(block, b.N-done) {
			start := time.Now()
			res, err := f.h.Call(context.Background(), req)
			took[v] += time.Since(start)
			calls[v]++
			done++
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
		restore()
		runtime.GC() // no block pays for another's garbage
	}
	b.StopTimer()
	if calls[0] == 0 {
		return
	}
	off := float64(took[0]) / float64(calls[0])
	for i, v := range variants {
		if calls[i] == 0 {
			continue
		}
		per := float64(took[i]) / float64(calls[i])
		b.ReportMetric(per, v.name+"-ns/call")
		if i > 0 {
			b.ReportMetric(per/off, v.name+"/off")
		}
	}
}

// discardSpans is a span processor that drops every span.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
