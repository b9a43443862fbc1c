package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
)

// otlpReceiver is an OTLP/gRPC trace collector served in the test.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu    sync.Mutex
	spans []recvSpan
}

// recvSpan is an exported span with its scope and service.
type recvSpan struct {
	*tracepb.Span
	scope, service string
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: l.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, recvSpan{Span: s, scope: ss.GetScope().GetName(), service: service})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// trace returns the spans of trace id (hex).
func (r *otlpReceiver) trace(id string) []recvSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recvSpan
	for _, s := range r.spans {
		if hex.EncodeToString(s.GetTraceId()) == id {
			out = append(out, s)
		}
	}
	return out
}

// tracingGateway starts a gateway exporting to r; site holds directives of
// the site block.
func tracingGateway(t *testing.T, r *otlpReceiver, ops, site string) *gateway {
	dir := t.TempDir()
	crank := fmt.Sprintf(`embedded_etcd {
			data_dir %s
			client_url http://127.0.0.1:%d
			peer_url http://127.0.0.1:%d
		}
		tracing {
			endpoint %s
			insecure
			service_name crank-e2e
		}`, filepath.Join(dir, "etcd"), freePort(t), freePort(t), r.addr)
	return startGateway(t, gatewayOptions{Operations: ops, Crank: crank, Site: site, Env: []string{"OTEL_BSP_SCHEDULE_DELAY=50",
		// Caddy's tracing handler exports to r too.
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.addr, "OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_SERVICE_NAME=caddy-e2e"}})
}

// span finds the span of the trace named name.
func findSpan(spans []recvSpan, name string) *recvSpan {
	for i := range spans {
		if spans[i].GetName() == name {
			return &spans[i]
		}
	}
	return nil
}

// A REST and a gRPC tool call each make one trace, from the client's
// trace context in _meta through the gateway, the adapter process and its
// upstream request, and the upstream receives the traceparent of the
// adapter's span of its request.
func TestTraceAcrossAdapter(t *testing.T) {
	t.Parallel()
	r := startOTLPReceiver(t)

	restSeen := make(chan string, 4)
	rest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		restSeen <- req.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(rest.Close)
	grpcSeen := make(chan string, 4)
	files := grpctest.MustCompile(t, map[string]string{"accounts.proto": grpcE2EProto}, "accounts.proto")
	_, grpcAddr := grpctest.Start(t, files, grpctest.Handlers{
		"e2e.v1.Accounts/GetAccount": grpctest.Unary(func(ctx context.Context, _ *dynamicpb.Message) (proto.Message, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			grpcSeen <- strings.Join(md.Get("traceparent"), ",")
			m, _ := grpctest.NewMessage(files, "e2e.v1.Account")
			m.Set(m.Descriptor().Fields().ByName("id"), protoreflect.ValueOfInt64(1))
			return m, nil
		}),
	}, grpctest.Options{Reflection: grpctest.ReflectionBoth})

	g := tracingGateway(t, r, fmt.Sprintf(`
operations:
  - name: ping_rest
    description: Ping a REST upstream.
    adapter: rest
    config: {method: GET, url: "%s/ping"}
  - name: get_account
    description: Get an account over gRPC.
    adapter: grpc
    timeout: 5s
    config: {target: "%s", method: e2e.v1.Accounts/GetAccount}
`, rest.URL, grpcAddr), "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	for i, c := range []struct {
		tool, adapter, upstreamSpan string
		args                        map[string]any
		seen                        chan string
	}{
		{"ping_rest", "rest", "GET 127.0.0.1", nil, restSeen},
		{"get_account", "grpc", "e2e.v1.Accounts/GetAccount", map[string]any{"id": "1"}, grpcSeen},
	} {
		traceID := fmt.Sprintf("%032x", 0xabc0+i)
		clientSpan := "00f067aa0ba902b7"
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args,
			Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", c.tool, err, textOf(res))
		}
		seen := <-c.seen

		want := []string{"tools/call " + c.tool, "tool " + c.tool, "adapter invoke " + c.adapter,
			"adapter invoke " + c.tool, c.upstreamSpan}
		var spans []recvSpan
		waitFor(t, "the trace of "+c.tool, func() bool {
			spans = r.trace(traceID)
			for _, name := range want {
				if findSpan(spans, name) == nil {
					return false
				}
			}
			return true
		})
		// Each is the child of the one before; the first is the client's.
		parent := clientSpan
		for _, name := range want {
			s := findSpan(spans, name)
			if got := hex.EncodeToString(s.GetParentSpanId()); got != parent {
				t.Errorf("%s: span %q has parent %s, want %s", c.tool, name, got, parent)
			}
			if s.service != "crank-e2e" {
				t.Errorf("%s: span %q of service %q", c.tool, name, s.service)
			}
			parent = hex.EncodeToString(s.GetSpanId())
		}
		if s := findSpan(spans, "adapter invoke "+c.tool); !strings.HasSuffix(s.scope, "/adapter/"+c.adapter) {
			t.Errorf("%s: the adapter's span has scope %q", c.tool, s.scope)
		}
		if wantTP := "00-" + traceID + "-" + parent + "-01"; seen != wantTP {
			t.Errorf("%s: upstream got traceparent %q, want %q", c.tool, seen, wantTP)
		}
	}
}

// With Caddy's tracing handler on the route, a call without trace context
// of its own joins the handler's span: one trace from Caddy's span of the
// HTTP request to the upstream's request.
func TestTraceJoinsCaddyTracing(t *testing.T) {
	t.Parallel()
	r := startOTLPReceiver(t)
	seen := make(chan string, 4)
	rest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen <- req.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(rest.Close)
	g := tracingGateway(t, r, fmt.Sprintf(`
operations:
  - name: ping_rest
    description: Ping a REST upstream.
    adapter: rest
    config: {method: GET, url: "%s/ping"}
`, rest.URL), "tracing")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ping_rest"}); err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, textOf(res))
	}
	tp := <-seen
	parts := strings.Split(tp, "-")
	if len(parts) != 4 {
		t.Fatalf("upstream traceparent %q", tp)
	}
	var mcpSpan, caddySpan *recvSpan
	waitFor(t, "the trace with Caddy's span", func() bool {
		spans := r.trace(parts[1])
		mcpSpan = findSpan(spans, "tools/call ping_rest")
		if mcpSpan == nil {
			return false
		}
		for i := range spans {
			if string(spans[i].GetSpanId()) == string(mcpSpan.GetParentSpanId()) {
				caddySpan = &spans[i]
			}
		}
		return caddySpan != nil && findSpan(spans, "GET 127.0.0.1") != nil
	})
	if caddySpan.service != "caddy-e2e" || !strings.Contains(caddySpan.scope, "otelhttp") {
		t.Errorf("the MCP request's parent is %q of service %q, scope %q: not Caddy's span", caddySpan.GetName(), caddySpan.service, caddySpan.scope)
	}
}
