package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/benchproc"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// hopUpstreamEnv makes TestHopUpstream, in a process of its own, the
// upstream BenchmarkHop calls.
const hopUpstreamEnv = "CRANK_REST_HOP_UPSTREAM"

// TestHopUpstream is not a test: run by BenchmarkHop in a process of its
// own (hopUpstreamEnv set), it serves benchAnswer on a loopback port it
// prints, until its standard input closes.
func TestHopUpstream(t *testing.T) {
	if os.Getenv(hopUpstreamEnv) == "" {
		t.Skip("the upstream process of BenchmarkHop")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchAnswer)
	})}
	go srv.Serve(ln)
	os.Stdout.WriteString("http://" + ln.Addr().String() + "\n")
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// startHopUpstream runs TestHopUpstream in a process of its own and
// returns its URL.
func startHopUpstream(b *testing.B) string {
	_, _, out := benchproc.StartSelf(b, hopUpstreamEnv+"=1", "-test.run=^TestHopUpstream$")
	line, err := out.ReadString('\n')
	if err != nil {
		b.Fatalf("upstream process: %v", err)
	}
	return strings.TrimSpace(line)
}

// BenchmarkHop measures what the REST adapter costs per unary call as
// the gateway pays it: the adapter executable (cmd/crank-adapter-rest)
// launched as the host launches it (go-plugin, AutoMTLS, gRPC) and called
// through the host's client, against a plain net/http client in this
// process, both calling the same upstream, which runs in a process of its
// own so that neither side's CPU counts it; and, as a baseline, a second
// adapter process the client never described, which therefore gets an
// Invoke call per call, as an adapter of an SDK before streams_invoke
// does. The three take turns in blocks of 50 calls, so that a loaded
// machine weighs on each alike. It reports per call:
//
//	adapter-cpu-µs/call  the adapter process's CPU time
//	host-cpu-µs/call     this process's CPU time through the adapter (the
//	                     host's side of the hop)
//	direct-cpu-µs/call   this process's CPU time calling directly
//	adapter/direct-cpu   the ratio of the first to the third: the figure
//	                     the adapter's own work is judged by
//	hop/direct-cpu       both sides of the hop against the direct call
//	host-allocs/call, host-B/call      the host side's allocation
//	direct-allocs/call, direct-B/call  the direct call's
//	invoke-…             the same figures of the Invoke calls
func BenchmarkHop(b *testing.B) {
	upstream := startHopUpstream(b)
	exe := adaptertest.Build(b, "./cmd/crank-adapter-rest")
	h, old := exe.Start(b), exe.Start(b)
	ctx := context.Background()
	// The host describes an adapter before it calls it: the client learns
	// that the adapter takes unary calls on its Streams call. The other
	// process, never described, gets Invoke calls, as an adapter of an
	// SDK before that does.
	if _, err := h.Describe(ctx); err != nil {
		b.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"method":  "GET",
		"url":     upstream + "/users/{id}",
		"query":   []string{"verbose"},
		"headers": map[string]string{"X-Api-Key": "secret"},
	})
	args, _ := json.Marshal(benchArgs)
	op := sdk.Operation{Name: "get_user", Config: cfg, Mode: sdk.ModeUnary, Timeout: 30 * time.Second}
	invoke := func(h *adaptertest.Harness) {
		// As the host calls: a deadline on the context and in the request.
		cctx, cancel := context.WithTimeout(ctx, op.Timeout)
		defer cancel()
		deadline, _ := cctx.Deadline()
		res, err := h.Client.Invoke(cctx, &sdk.Request{
			Context:   sdk.RequestContext{RequestID: "bench", Deadline: deadline},
			Operation: op, Arguments: args,
		})
		if err != nil || len(res.Structured) != len(benchAnswer) {
			b.Fatalf("invoke: %v", err)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	url := upstream + "/users/42?verbose=true"
	direct := func() { directGet(b, ctx, client, url) }
	viaAdapter, viaInvoke := func() { invoke(h) }, func() { invoke(old) }
	// Warm them up: connections, the adapter's prepared config.
	for range 20 {
		viaAdapter()
		viaInvoke()
		direct()
	}

	type use struct {
		cpu, adapterCPU time.Duration
		allocs, bytes   uint64
	}
	var hop, inv, dir use
	var ms runtime.MemStats
	measure := func(into *use, n int, h *adaptertest.Harness, call func()) {
		pid := 0
		if h != nil {
			pid = h.Process.PID()
		}
		runtime.ReadMemStats(&ms)
		allocs, bytes := ms.Mallocs, ms.TotalAlloc
		self, adapter := benchproc.CPU(os.Getpid()), benchproc.CPU(pid)
		for range n {
			call()
		}
		into.cpu += benchproc.CPU(os.Getpid()) - self
		into.adapterCPU += benchproc.CPU(pid) - adapter
		runtime.ReadMemStats(&ms)
		into.allocs += ms.Mallocs - allocs
		into.bytes += ms.TotalAlloc - bytes
	}
	const block = 50
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		measure(&hop, n, h, viaAdapter)
		measure(&inv, n, old, viaInvoke)
		measure(&dir, n, nil, direct)
	}
	b.StopTimer()
	n := float64(b.N)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / n }
	b.ReportMetric(us(hop.adapterCPU), "adapter-cpu-µs/call")
	b.ReportMetric(us(hop.cpu), "host-cpu-µs/call")
	b.ReportMetric(us(dir.cpu), "direct-cpu-µs/call")
	b.ReportMetric(float64(hop.adapterCPU)/float64(dir.cpu), "adapter/direct-cpu")
	b.ReportMetric(float64(hop.adapterCPU+hop.cpu)/float64(dir.cpu), "hop/direct-cpu")
	b.ReportMetric(float64(hop.allocs)/n, "host-allocs/call")
	b.ReportMetric(float64(hop.bytes)/n, "host-B/call")
	b.ReportMetric(us(inv.adapterCPU), "invoke-adapter-cpu-µs/call")
	b.ReportMetric(us(inv.cpu), "invoke-host-cpu-µs/call")
	b.ReportMetric(float64(inv.adapterCPU)/float64(dir.cpu), "invoke-adapter/direct-cpu")
	b.ReportMetric(float64(inv.allocs)/n, "invoke-host-allocs/call")
	b.ReportMetric(float64(inv.bytes)/n, "invoke-host-B/call")
	b.ReportMetric(float64(dir.allocs)/n, "direct-allocs/call")
	b.ReportMetric(float64(dir.bytes)/n, "direct-B/call")
	b.ReportMetric(0, "ns/op") // three calls an op, taking turns: the figures above say it
}
