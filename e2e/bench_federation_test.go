package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The federation floor: what an in-process gateway built on go-sdk pays to
// federate an MCP upstream. fedProxyEnv makes this test binary such a
// proxy: a bare go-sdk server whose tools forward each call with one
// go-sdk client session to the upstream the variable names, as Docker's
// MCP gateway does.
const fedProxyEnv = "CRANK_E2E_FED_PROXY_UPSTREAM"

// fedLookup is the ~1 KB JSON result of the upstream's lookup tool.
var fedLookup = func() map[string]any {
	rows := make([]map[string]any, 12)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("user-%02d", i), "email": fmt.Sprintf("user-%02d@example.com", i)}
	}
	return map[string]any{"rows": rows}
}()

// fedSchema is the input schema of the federated tools: a text.
var fedSchema = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}

// fedUpstream is the federated go-sdk MCP server: echo answers its text,
// lookup a ~1 KB structured result. It serves sessions at / and the
// sessionless protocol at /sessionless (bareEndpoint).
// It counts the sessions its clients initialize in sessions.
func fedUpstream(sessions *atomic.Int64) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { sessions.Add(1) }})
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo a text.", InputSchema: fedSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil
		})
	lookup, _ := json.Marshal(fedLookup)
	s.AddTool(&mcp.Tool{Name: "lookup", Description: "Look up users.", InputSchema: fedSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(lookup)}},
				StructuredContent: json.RawMessage(lookup)}, nil
		})
	return bareHandler(s)
}

// bareHandler serves s in sessions at / and sessionless at bareSessionless.
func bareHandler(s *mcp.Server) http.Handler {
	server := func(*http.Request) *mcp.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/", mcp.NewStreamableHTTPHandler(server, nil))
	mux.Handle(bareSessionless, mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true}))
	return mux
}

// fedProxy is the federation floor's server: echo and lookup forwarded
// over one client session to upstream.
func fedProxy(upstream string) (http.Handler, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "proxy", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: upstream}, nil)
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "proxy", Version: "1"}, nil)
	forward := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
	}
	for _, name := range []string{"echo", "lookup"} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: fedSchema}, forward)
	}
	return bareHandler(s), nil
}

// serveFedProxy serves fedProxy on a free loopback port, printed as the
// first line of stdout, when the environment asks for it; it never
// returns then.
func serveFedProxy() {
	upstream := os.Getenv(fedProxyEnv)
	if upstream == "" {
		return
	}
	h, err := fedProxy(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "federation proxy:", err)
		os.Exit(1)
	}
	serveChild(h, func() {}) // bench_test.go
}

// startFedProxy runs fedProxy for upstream in a child process.
func startFedProxy(b *testing.B, upstream string) *bareProcess {
	p, _ := startChild(b, "federation proxy", fedProxyEnv+"="+upstream) // bench_test.go
	return p
}

// BenchmarkFederation measures a federated MCP tool call: a go-sdk client
// calling a go-sdk upstream (in the benchmark's process, over Streamable
// HTTP) directly, through the federation floor (a bare go-sdk proxy
// process, fedProxy) and through Crank federating it (the mcp adapter),
// for a small result (echo) and a ~1 KB one (lookup), in both protocol
// generations, all variants taking turns in the same run. It reports p50,
// p99, throughput at 8 callers, the servers' CPU (Crank's adapter
// included) and allocation per call, and Crank's ratios to the floor
// (the goals' metrics: crank/proxy-p50-echo, ...-lookup-sessionless), the
// new connections and sessions the upstream saw in the throughput run
// (Crank must reuse both), and the gateway's RSS after it / after the
// warm-up. With CRANK_BENCH_PROFILE, the gateway's profiles under its
// echo calls (bench_profile_test.go); with CRANK_BENCH_FED_LOAD, its
// memory under a long load (fedRSS).
func BenchmarkFederation(b *testing.B) {
	// The upstream counts its sessions and connections: Crank must reuse
	// both, whatever the callers.
	var sessions, conns atomic.Int64
	up := httptest.NewUnstartedServer(fedUpstream(&sessions))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	b.Cleanup(up.Close)
	proxy := startFedProxy(b, up.URL)
	g := startGateway(b, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: upstream
    description: A go-sdk server over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
`, up.URL), Handler: "max_sessionless_requests_per_client off"})
	ctx := context.Background()
	connect := func(endpoint string, gen generation, tool string) func() error {
		cs := benchConnect(b, endpoint, gen) // bench_test.go
		return func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hello"}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %s", textOf(res))
			}
			return err
		}
	}
	// Crank lists the upstream's tools once its adapter has connected.
	deadline := time.Now().Add(time.Minute)
	for {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, nil)
		if err == nil {
			res, lerr := cs.ListTools(ctx, nil)
			_ = cs.Close()
			if lerr == nil && len(res.Tools) >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("Crank never listed the upstream's tools")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var vs []benchVariant
	for _, tool := range []string{"echo", "lookup"} {
		for _, gen := range benchGenerations {
			s := "-" + tool + gen.suffix
			vs = append(vs,
				benchVariant{"direct" + s, connect(bareEndpoint(up.URL, gen.generation), gen.generation, tool), nil},
				benchVariant{"proxy" + s, connect(bareEndpoint(proxy.URL, gen.generation), gen.generation, tool), proxy.meter()},
				benchVariant{"crank" + s, connect(g.MCPURL, gen.generation, tool), g.meter()})
		}
	}
	at := func(name string) int { return variantAt(vs, name) }
	defer profileGateway(b, g, vs[at("crank-echo")].call) // bench_profile_test.go
	warmUp(b, vs, 50)
	var lat [][]time.Duration
	var rate []float64
	var use []serverUse
	var calls int
	// The goals' ratios (internal/benchgoals), Crank to the floor, named
	// by tool and generation: crank/proxy-p50-echo, ...-lookup-sessionless.
	each := func(f func(s string)) {
		for _, tool := range []string{"echo", "lookup"} {
			for _, gen := range benchGenerations {
				f("-" + tool + gen.suffix)
			}
		}
	}
	b.Run("latency", func(b *testing.B) {
		lat = reportedLatency(b, vs)
		each(func(s string) {
			c, p := at("crank"+s), at("proxy"+s)
			b.ReportMetric(float64(pct(lat[c], 50))/float64(pct(lat[p], 50)), "crank/proxy-p50"+s)
			b.ReportMetric(float64(pct(lat[c], 99))/float64(pct(lat[p], 99)), "crank/proxy-p99"+s)
		})
	})
	rss0 := procStatus(g.cmd.Process.Pid, "VmRSS")
	b.Run("throughput", func(b *testing.B) {
		sessions0, conns0 := sessions.Load(), conns.Load()
		rate, use = reportedRate(b, vs)
		calls = b.N
		// Over all variants' calls (len(vs) × b.N): a variant that opened
		// a connection or session per call would show here.
		b.ReportMetric(float64(conns.Load()-conns0), "upstream-new-conns")
		b.ReportMetric(float64(sessions.Load()-sessions0), "upstream-new-sessions")
		each(func(s string) {
			c, p := at("crank"+s), at("proxy"+s)
			b.ReportMetric(rate[c]/rate[p], "crank/proxy-calls/s"+s)
			b.ReportMetric(float64(use[c].cpu+use[c].adapterCPU)/float64(use[p].cpu+use[p].adapterCPU), "crank/proxy-cpu"+s)
		})
		if rss := procStatus(g.cmd.Process.Pid, "VmRSS"); rss > 0 && rss0 > 0 {
			b.ReportMetric(float64(rss)/float64(rss0), "crank-rss/warm")
		}
	})
	if lat == nil || rate == nil {
		return
	}
	defer func() {
		if d, err := time.ParseDuration(os.Getenv(benchFedLoadEnv)); err == nil && d > 0 {
			var crank []func() error
			for _, v := range vs {
				if strings.HasPrefix(v.name, "crank") {
					crank = append(crank, v.call)
				}
			}
			// The testing package may run a sub-benchmark twice (b.N 1,
			// then the -benchtime's): the load runs once, its figures
			// reported each time.
			var report func(*testing.B)
			b.Run("rss", func(b *testing.B) {
				if report == nil {
					report = fedRSS(b, g, crank, d)
				}
				report(b)
			})
		}
	}()
	fmt.Printf("\nfederated MCP tool call, same run, variants interleaved (latency: sequential calls; throughput, server CPU\n" +
		"(adapter processes included) and allocation per call: 8 callers):\n")
	for _, tool := range []string{"echo", "lookup"} {
		for _, gen := range benchGenerations {
			s := "-" + tool + gen.suffix
			fmt.Printf(" %s, %s (%s):\n", tool, gen.name, gen.version)
			for _, v := range []string{"direct", "proxy", "crank"} {
				i := at(v + s)
				fmt.Printf("  %-8s %7.0fµs %7.0fµs %7.0f/s", v, micros(pct(lat[i], 50)), micros(pct(lat[i], 99)), rate[i])
				if vs[i].meter != nil {
					u := use[i]
					fmt.Printf(" CPU %6.0f µs/call (adapter %4.0f) alloc %7.1f KB/call", micros(u.cpu+u.adapterCPU)/float64(calls),
						micros(u.adapterCPU)/float64(calls), float64(u.allocBytes)/1000/float64(calls))
				}
				fmt.Println()
			}
			c, p := at("crank"+s), at("proxy"+s)
			fmt.Printf("  Crank/floor: p50 %.2fx, p99 %.2fx, throughput %.2fx, CPU %.2fx\n",
				float64(pct(lat[c], 50))/float64(pct(lat[p], 50)), float64(pct(lat[c], 99))/float64(pct(lat[p], 99)), rate[c]/rate[p],
				float64(use[c].cpu+use[c].adapterCPU)/float64(use[p].cpu+use[p].adapterCPU))
		}
	}
}

// benchFedLoadEnv, a duration (10m), makes BenchmarkFederation end by
// loading the gateway that long with 8 callers taking turns over its
// federated calls (both tools, both generations), and report the
// gateway's resident memory after the first minute and at the end, and
// their ratio (the goal: ≤ 1.25): memory kept per call shows as growth.
const benchFedLoadEnv = "CRANK_BENCH_FED_LOAD"

// fedRSS loads g with 8 callers of calls for d, prints its memory, and
// returns what reports it.
func fedRSS(b *testing.B, g *gateway, calls []func() error, d time.Duration) func(*testing.B) {
	pid := g.cmd.Process.Pid
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := i; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := calls[j%len(calls)](); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		})
	}
	// A sample a minute (or at the end), printed: growth that levels off
	// (etcd's compaction, its raft log's snapshots) is not a leak.
	first := min(time.Minute, d/2)
	start := time.Now()
	var rss1, rss int
	var heap1, heap float64
	for at := first; ; at = min(at+time.Minute, d) {
		time.Sleep(time.Until(start.Add(at)))
		rss, heap = procStatus(pid, "VmRSS"), gatewayHeap(b, g)
		if at == first {
			rss1, heap1 = rss, heap
		}
		fmt.Printf("  federation load at %v: gateway RSS %.0f MiB, Go heap in use %.0f MiB, %d calls\n",
			at, float64(rss)/1024, heap/(1<<20), n.Load())
		if at == d {
			break
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(rss1)/1024, "crank-rss-1m-MiB")
		b.ReportMetric(float64(rss)/1024, "crank-rss-end-MiB")
		b.ReportMetric(float64(rss)/float64(rss1), "crank-rss-end/1m")
		b.ReportMetric(float64(n.Load())/d.Seconds(), "crank-calls/s")
		b.ReportMetric(heap/heap1, "crank-heap-end/1m")
	}
	fmt.Printf("\nfederation load, 8 callers for %v (%d calls): gateway RSS %.0f MiB after %v, %.0f MiB at the end (%.2fx);\n"+
		"  its Go heap in use %.0f → %.0f MiB\n",
		d, n.Load(), float64(rss1)/1024, first, float64(rss)/1024, float64(rss)/float64(rss1), heap1/(1<<20), heap/(1<<20))
	if dir := os.Getenv(benchProfileEnv); dir != "" {
		// What the gateway holds after the load (go tool pprof
		// -sample_index=inuse_space).
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		saveProfile(b, g, "/debug/pprof/heap?gc=1", filepath.Join(dir, "gateway.heap.pprof"))
	}
	return report
}

// gatewayHeap is the gateway's Go heap in use, in bytes (/debug/vars).
func gatewayHeap(b *testing.B, g *gateway) float64 {
	resp, err := http.Get(g.AdminURL + "/debug/vars")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var vars struct{ Memstats struct{ HeapInuse uint64 } }
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		b.Fatal(err)
	}
	return float64(vars.Memstats.HeapInuse)
}
