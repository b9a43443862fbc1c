package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Every config Caddy loads has a registry of its own; the collectors go
// into each, twice into one without an error, and keep their values.
func TestRegisterAcrossReloads(t *testing.T) {
	first, second := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	if err := Register(first); err != nil {
		t.Fatal(err)
	}
	if err := Register(first); err != nil {
		t.Fatalf("registering again: %v", err)
	}
	before := testutil.ToFloat64(quotaRefusals.WithLabelValues("max_jobs_per_agent"))
	QuotaRefusal("max_jobs_per_agent")
	if err := Register(second); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(quotaRefusals.WithLabelValues("max_jobs_per_agent")); got != before+1 {
		t.Errorf("quota refusals = %v, want %v", got, before+1)
	}
	if _, err := second.Gather(); err != nil {
		t.Errorf("gather: %v", err)
	}
	// A different collector of the same name is still refused.
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "crank_etcd_request_errors_total", Help: "x"})
	if err := first.Register(other); err == nil {
		t.Error("a clashing collector was registered")
	}
}

func TestToolLabelBounded(t *testing.T) {
	if ToolLabel("get_user") != "get_user" {
		t.Fatal("a tool lost its label")
	}
	for i := range MaxToolLabels + 10 {
		ToolLabel("tool_" + time.Duration(i).String())
	}
	if got := ToolLabel("one_too_many"); got != OtherTool {
		t.Errorf("label past the cap = %q", got)
	}
	if ToolLabel("get_user") != "get_user" {
		t.Error("a tool lost its label past the cap")
	}
	if MCPMethod("tools/call") != "tools/call" || MCPMethod("x/evil-"+time.Now().String()) != "other" {
		t.Error("method labels are not a closed set")
	}
}

// Spans an adapter sent back are exported as children of the host's span,
// under the adapter's scope; without tracing they are dropped and counted.
func TestExportAdapterSpans(t *testing.T) {
	span := client.Span{TraceID: [16]byte{1}, SpanID: [8]byte{2}, ParentSpanID: [8]byte{3}, Name: "GET api",
		Kind: sdk.SpanClient, Start: time.Now(), End: time.Now(), Failed: true, Message: "the upstream answered 503",
		Attributes: []sdk.Attribute{sdk.Attr("http.response.status_code", int64(503)), sdk.Attr("long", strings.Repeat("x", 5000))}}
	dropped := testutil.ToFloat64(adapterSpansDropped)
	ExportAdapterSpans("rest", []client.Span{span})
	if got := testutil.ToFloat64(adapterSpansDropped); got != dropped+1 {
		t.Errorf("dropped = %v", got)
	}

	rec := tracetest.NewSpanRecorder()
	restore := UseSpanProcessor(rec)
	defer restore()
	ExportAdapterSpans("rest", []client.Span{span})
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("exported %d spans", len(ended))
	}
	s := ended[0]
	if s.Name() != "GET api" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != [8]byte{3} ||
		s.SpanContext().TraceID() != [16]byte{1} || s.InstrumentationScope().Name != ScopeName+"/adapter/rest" ||
		s.Status().Description != "the upstream answered 503" {
		t.Errorf("span = %+v", s)
	}
	for _, a := range s.Attributes() {
		if a.Key == "long" && len(a.Value.AsString()) != maxAdapterString {
			t.Errorf("an adapter's attribute of %d bytes exported", len(a.Value.AsString()))
		}
	}

	// The host's spans carry the caller's trace context through.
	ctx := WithRemoteParent(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v")
	ctx, hs := Tracer().Start(ctx, "tool x")
	tp, ts := TraceHeaders(ctx)
	if tp != "00-0af7651916cd43dd8448eb211c80319c-"+hs.SpanContext().SpanID().String()+"-01" || ts != "k=v" || !Recording(ctx) {
		t.Errorf("trace headers %q %q", tp, ts)
	}
	hs.End()
}

func TestTracingConfigCheck(t *testing.T) {
	bad := 2.0
	for _, c := range []TracingConfig{{}, {Endpoint: "x:1", Protocol: "udp"}, {Endpoint: "x:1", SampleRatio: &bad}} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := ConfigureTracing(&TracingConfig{Endpoint: "127.0.0.1:1", Insecure: true}); err != nil {
		t.Fatal(err)
	}
	if !TracingEnabled() {
		t.Error("tracing off after ConfigureTracing")
	}
	if err := ConfigureTracing(nil); err != nil || TracingEnabled() {
		t.Errorf("tracing not turned off: %v", err)
	}
}
