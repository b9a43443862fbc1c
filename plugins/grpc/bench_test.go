package grpcadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/dynamicpb"

	grpcadapter "github.com/crankmcp/crank/plugins/grpc"
	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// BenchmarkUnary measures one unary call of the same loopback server
// three ways in one run and prints the adapter's added latency as a ratio:
//
//	direct    a grpc-go client call with a prebuilt request (the floor)
//	adapter   the adapter's Invoke in-process: JSON → message, call,
//	          message → JSON (the adapter's own cost)
//	harness   through the adapter protocol over gRPC on a local socket
//	          (adaptertest), as the host calls it (adapter + plugin
//	          protocol cost)
func BenchmarkUnary(b *testing.B) {
	ts := startTestServer(b, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	ctx := context.Background()
	cfg, _ := json.Marshal(ts.cfg("Echo", "metadata", map[string]string{"x-api-key": "secret"}))
	args := []byte(`{"text":"hello, bench","id":"42"}`)

	conn, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	md := ts.method("Echo")
	in := dynamicpb.NewMessage(md.Input())
	if err := protojson.Unmarshal(args, in); err != nil {
		b.Fatal(err)
	}
	direct := func() error {
		_, err := directCall(ctx, conn, md, in)
		return err
	}

	a := grpcadapter.New()
	req := &sdk.Request{Operation: sdk.Operation{Config: cfg}, Arguments: args}
	adapter := func() error {
		_, err := a.Invoke(ctx, req)
		return err
	}

	h := adaptertest.New(b, grpcadapter.New())
	call := adaptertest.Call{Config: json.RawMessage(cfg), Args: json.RawMessage(args)}
	viaSDK := func() error {
		_, ue, err := h.Invoke(ctx, call)
		if ue != nil {
			return fmt.Errorf("%s", ue.Message)
		}
		return err
	}

	p50 := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		call func() error
	}{{"direct", direct}, {"adapter", adapter}, {"harness", viaSDK}} {
		b.Run(c.name, func(b *testing.B) {
			for range 100 { // warm up connections and caches
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
	if p50["direct"] > 0 && p50["adapter"] > 0 && p50["harness"] > 0 {
		fmt.Printf("\nunary gRPC call, same run (p50 latency, sequential):\n"+
			"  direct grpc-go call      %9v\n"+
			"  adapter in-process       %9v  (%.2fx direct, +%v)\n"+
			"  through the harness      %9v  (%.2fx direct, +%v)\n",
			p50["direct"],
			p50["adapter"], float64(p50["adapter"])/float64(p50["direct"]), p50["adapter"]-p50["direct"],
			p50["harness"], float64(p50["harness"])/float64(p50["direct"]), p50["harness"]-p50["direct"])
	}
}

// BenchmarkInvokeParallel shows the adapter under concurrent load.
func BenchmarkInvokeParallel(b *testing.B) {
	ts := startTestServer(b, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := adaptertest.New(b, grpcadapter.New())
	cfg, _ := json.Marshal(ts.cfg("Echo"))
	call := adaptertest.Call{Config: json.RawMessage(cfg), Args: json.RawMessage(`{"text":"hello","id":"42"}`)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, ue, err := h.Invoke(ctx, call); err != nil || ue != nil {
				b.Errorf("invoke: %v %v", err, ue)
				return
			}
		}
	})
}

// BenchmarkStreamRoundTrip measures one stream call of n items through
// the adapter protocol (adaptertest, as the host calls it), a
// server-streaming call (one request, n answers) beside a bidirectional
// one (n requests out, n answers in), and reports the time per item.
func BenchmarkStreamRoundTrip(b *testing.B) {
	ts := startTestServer(b, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	h := adaptertest.New(b, grpcadapter.New())
	const n = 10
	reqs := make([]map[string]any, n)
	for i := range reqs {
		reqs[i] = map[string]any{"text": "hello, bench", "id": i}
	}
	bidiArgs, _ := json.Marshal(map[string]any{"requests": reqs})
	for _, c := range []struct {
		name string
		call adaptertest.Call
	}{
		{"server_stream", adaptertest.Call{Config: ts.cfg("Count"), Args: fmt.Sprintf(`{"count": %d}`, n)}},
		{"bidi", adaptertest.Call{Config: ts.cfg("Chat"), Args: json.RawMessage(bidiArgs)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				events, ue, err := h.Stream(ctx, c.call, 0)
				if err != nil || ue != nil || len(events) != n+1 {
					b.Fatalf("stream: %d events, %v %v", len(events), ue, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/item")
		})
	}
}
