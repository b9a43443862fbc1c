package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// ScopeName is the instrumentation scope of the gateway's spans; adapters'
// spans carry ScopeName + "/adapter/<name>".
const ScopeName = "github.com/crankmcp/crank"

// TracingConfig configures the export of traces over OTLP.
type TracingConfig struct {
	// Endpoint is the collector's host:port (OTLP/gRPC, default port
	// 4317), or its base URL for OTLP/HTTP (http://host:4318).
	Endpoint string `json:"endpoint"`
	// Protocol is grpc (the default) or http.
	Protocol string `json:"protocol,omitempty"`
	// Insecure sends without TLS (a collector on loopback or a sidecar).
	Insecure bool `json:"insecure,omitempty"`
	// Headers are sent with every export (a collector's API key).
	Headers map[string]string `json:"headers,omitempty"`
	// SampleRatio is the share of traces started here that are recorded
	// (0 to 1, default 1); a trace the caller sampled or not keeps the
	// caller's decision.
	SampleRatio *float64 `json:"sample_ratio,omitempty"`
	// ServiceName is the service.name resource attribute (default crank).
	ServiceName string `json:"service_name,omitempty"`
}

// Check reports the first invalid field.
func (c *TracingConfig) Check() error {
	switch {
	case c.Endpoint == "":
		return errors.New("endpoint: required (the OTLP collector's host:port or URL)")
	case c.Protocol != "" && c.Protocol != "grpc" && c.Protocol != "http":
		return fmt.Errorf("protocol: %q is neither grpc nor http", c.Protocol)
	case c.SampleRatio != nil && (*c.SampleRatio < 0 || *c.SampleRatio > 1):
		return fmt.Errorf("sample_ratio: %v is not between 0 and 1", *c.SampleRatio)
	}
	return nil
}

// tracing is the process's tracing: nil while it is off.
type tracing struct {
	key      string
	tracer   trace.Tracer
	provider *sdktrace.TracerProvider
	proc     sdktrace.SpanProcessor
	res      *resource.Resource
}

var (
	current   atomic.Pointer[tracing]
	configure sync.Mutex
	noTracer  = noop.NewTracerProvider().Tracer(ScopeName)
	tc        = propagation.TraceContext{}
)

// ConfigureTracing installs the OTLP export cfg describes, process-wide
// (a reload that keeps the config keeps the exporter), or turns tracing
// off when cfg is nil. The exporter connects lazily: nothing is dialled
// here. A replaced exporter is flushed and shut down in the background.
func ConfigureTracing(cfg *TracingConfig) error {
	configure.Lock()
	defer configure.Unlock()
	var next *tracing
	if cfg != nil {
		if err := cfg.Check(); err != nil {
			return err
		}
		key, _ := json.Marshal(cfg)
		if cur := current.Load(); cur != nil && cur.key == string(key) {
			return nil
		}
		exp, err := newExporter(cfg)
		if err != nil {
			return err
		}
		ratio := 1.0
		if cfg.SampleRatio != nil {
			ratio = *cfg.SampleRatio
		}
		name := cfg.ServiceName
		if name == "" {
			name = "crank"
		}
		res := resource.NewSchemaless(attribute.String("service.name", name))
		bsp := sdktrace.NewBatchSpanProcessor(exp)
		next = newTracing(string(key), bsp, res, sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)))
	}
	replace(next)
	return nil
}

func newExporter(cfg *TracingConfig) (sdktrace.SpanExporter, error) {
	ctx := context.Background()
	if cfg.Protocol == "http" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/") + "/v1/traces")}
		if !strings.Contains(cfg.Endpoint, "://") {
			opts = []otlptracehttp.Option{otlptracehttp.WithEndpoint(cfg.Endpoint)}
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		// The gateway's one HTTP client: redirects within the collector's
		// origin only (an export is a POST whose headers may carry the
		// collector's credentials), the exporter's own 10s timeout.
		client := httpadapter.NewClient(httpadapter.ClientOptions{})
		client.Timeout = 10 * time.Second
		opts = append(opts, otlptracehttp.WithHTTPClient(client))
		return otlptracehttp.New(ctx, opts...)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint)}
	if strings.Contains(cfg.Endpoint, "://") {
		opts = []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(cfg.Endpoint)}
	}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	return otlptracegrpc.New(ctx, opts...)
}

func newTracing(key string, proc sdktrace.SpanProcessor, res *resource.Resource, sampler sdktrace.Sampler) *tracing {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
	return &tracing{key: key, tracer: tp.Tracer(ScopeName), provider: tp, proc: proc, res: res}
}

func replace(next *tracing) {
	if old := current.Swap(next); old != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = old.provider.Shutdown(ctx)
		}()
	}
}

// UseSpanProcessor sends every span to proc (a tracetest.SpanRecorder in
// tests, a processor of the caller's exporter), sampling every trace,
// until the returned function restores the previous tracing.
func UseSpanProcessor(proc sdktrace.SpanProcessor) (restore func()) {
	return UseTracing(proc, sdktrace.AlwaysSample())
}

// UseTracing is UseSpanProcessor with the sampler of traces that start
// here (benchmarks compare sampled-out tracing with none).
func UseTracing(proc sdktrace.SpanProcessor, sampler sdktrace.Sampler) (restore func()) {
	configure.Lock()
	defer configure.Unlock()
	t := newTracing("processor", proc, resource.NewSchemaless(attribute.String("service.name", "crank")), sampler)
	prev := current.Swap(t)
	return func() {
		configure.Lock()
		defer configure.Unlock()
		current.Store(prev)
	}
}

// TracingEnabled reports whether spans are exported.
func TracingEnabled() bool { return current.Load() != nil }

// Tracer is the gateway's tracer: a no-op one while tracing is off, which
// still carries a caller's trace context through.
func Tracer() trace.Tracer {
	if t := current.Load(); t != nil {
		return t.tracer
	}
	return noTracer
}

// StartChild starts a span under ctx's span, as Tracer().Start does, but
// when ctx's span is valid and not recorded (its trace is sampled out) it
// returns ctx and that span: a child of a sampled-out span would not be
// recorded either, and this spares its cost.
func StartChild(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if s := trace.SpanFromContext(ctx); s.SpanContext().IsValid() && !s.IsRecording() {
		return ctx, s
	}
	return Tracer().Start(ctx, name, opts...)
}

// WithRemoteParent returns ctx with the W3C trace context traceparent and
// tracestate as its remote parent, unless ctx carries a valid span
// context already or traceparent is not valid.
func WithRemoteParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return tc.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// WithParent returns ctx with the W3C trace context traceparent and
// tracestate as its remote parent, in place of any span ctx carries;
// ctx itself when traceparent is not valid.
func WithParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	out := tc.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
	if !trace.SpanContextFromContext(out).IsRemote() {
		return ctx
	}
	return out
}

// TraceHeaders returns the W3C trace context of ctx's span: what a
// request made under ctx carries ("" when ctx has none).
func TraceHeaders(ctx context.Context) (traceparent, tracestate string) {
	m := propagation.MapCarrier{}
	tc.Inject(ctx, m)
	return m["traceparent"], m["tracestate"]
}

// Recording reports whether ctx's span is recorded and exported: adapters
// then record theirs for it.
func Recording(ctx context.Context) bool {
	s := trace.SpanFromContext(ctx)
	return current.Load() != nil && s.IsRecording() && s.SpanContext().IsSampled()
}

// Fail marks span failed with a message naming the failure's class, never
// a secret or an argument value.
func Fail(span trace.Span, class string) {
	span.SetStatus(codes.Error, class)
	span.SetAttributes(attribute.String("error.type", class))
}

// ExportAdapterSpans exports the spans adapter sent back with its
// answers, under the adapter's instrumentation scope, as if recorded
// here. They are dropped (and counted) while tracing is off.
func ExportAdapterSpans(adapter string, spans []client.Span) {
	t := current.Load()
	if t == nil {
		adapterSpansDropped.Add(float64(len(spans)))
		return
	}
	scope := instrumentation.Scope{Name: ScopeName + "/adapter/" + adapter}
	for i := range spans {
		t.proc.OnEnd(adapterSpan(&spans[i], t.res, scope))
	}
}

func adapterSpan(s *client.Span, res *resource.Resource, scope instrumentation.Scope) sdktrace.ReadOnlySpan {
	ts, _ := trace.ParseTraceState(s.TraceState)
	stub := tracetest.SpanStub{
		Name: capString(s.Name),
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.SpanID,
			TraceFlags: trace.FlagsSampled, TraceState: ts}),
		StartTime: s.Start, EndTime: s.End, Resource: res, InstrumentationScope: scope,
		SpanKind: spanKind(s.Kind),
	}
	if s.ParentSpanID != [8]byte{} {
		stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.TraceID, SpanID: s.ParentSpanID,
			TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	}
	for _, a := range s.Attributes {
		stub.Attributes = append(stub.Attributes, attr(a))
	}
	stub.Attributes = append(stub.Attributes, attribute.Bool("crank.adapter_span", true))
	if s.Failed {
		stub.Status = sdktrace.Status{Code: codes.Error, Description: capString(s.Message)}
	}
	return stub.Snapshot()
}

func spanKind(k sdk.SpanKind) trace.SpanKind {
	switch k {
	case sdk.SpanServer:
		return trace.SpanKindServer
	case sdk.SpanClient:
		return trace.SpanKindClient
	}
	return trace.SpanKindInternal
}

// maxAdapterString caps each string an adapter's span carries.
const maxAdapterString = 256

func capString(s string) string {
	if len(s) > maxAdapterString {
		return strings.ToValidUTF8(s[:maxAdapterString], "")
	}
	return s
}

func attr(a sdk.Attribute) attribute.KeyValue {
	switch v := a.Value.(type) {
	case string:
		return attribute.String(a.Key, capString(v))
	case bool:
		return attribute.Bool(a.Key, v)
	case int64:
		return attribute.Int64(a.Key, v)
	case int:
		return attribute.Int(a.Key, v)
	case float64:
		return attribute.Float64(a.Key, v)
	}
	return attribute.String(a.Key, fmt.Sprint(a.Value))
}
