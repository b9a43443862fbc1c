package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/crankmcp/crank/internal/telemetry"
)

// metricsInterceptor times every unary etcd request (crank_etcd_request_
// duration_seconds) and counts its failures, by the etcd RPC (Range, Txn,
// Put, DeleteRange, LeaseGrant, ...: a closed set), and records it as a
// span "etcd <RPC>" under the caller's span (a tool call's, an MCP
// request's) when there is one.
func metricsInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rpc := rpcName(method)
	var span trace.Span
	if trace.SpanFromContext(ctx).IsRecording() {
		ctx, span = telemetry.Tracer().Start(ctx, "etcd "+rpc, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system.name", "etcd"), attribute.String("db.operation.name", rpc)))
	}
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	class := etcdErrorClass(err)
	telemetry.EtcdRequest(rpc, class, time.Since(start))
	if span != nil {
		if class != "" {
			telemetry.Fail(span, class)
		}
		span.End()
	}
	return err
}

// rpcName is the method name of a full gRPC method (/etcdserverpb.KV/Range).
func rpcName(method string) string {
	return method[strings.LastIndexByte(method, '/')+1:]
}

// etcdErrorClass is the error label of a failed etcd request, "" for none.
func etcdErrorClass(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Canceled:
		return "cancelled"
	case codes.DeadlineExceeded, codes.Unavailable:
		return "unavailable"
	case codes.ResourceExhausted:
		if strings.Contains(st.Message(), "space") {
			return "no_space"
		}
		return "too_large"
	case codes.InvalidArgument:
		if strings.Contains(st.Message(), "too large") {
			return "too_large"
		}
	case codes.FailedPrecondition:
		return "conflict"
	}
	return "other"
}
