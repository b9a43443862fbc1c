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

// bareProxyEnv makes the test binary serve bareProxy for the upstream MCP
// endpoint it names instead of running tests (TestMain calls
// serveBareProxy first): a bare go-sdk proxy in a process of its own.
const bareProxyEnv = "CRANK_E2E_BARE_PROXY_UPSTREAM"

// fedTools are the upstream's tools BenchmarkFederation calls, each with
// the suffix of its variants' and ratios' names: echo answers a few bytes,
// lookup a record of about 1 KB of JSON.
var fedTools = []struct {
	name, suffix string
	args         map[string]any
}{{"echo", "", map[string]any{"text": "hi"}}, {"lookup", "-lookup", map[string]any{"id": 7}}}

type fedLookupIn struct {
	ID int `json:"id"`
}

// fedRecord is lookup's answer: about 1 KB of JSON.
type fedRecord struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Fields map[string]string `json:"fields"`
}

// fedUpstream is the go-sdk MCP server BenchmarkFederation federates,
// over Streamable HTTP: sessions at any path but /sessionless, where it
// serves the sessionless protocol (bareEndpoint).
// It counts the sessions its clients initialize in sessions.
func fedUpstream(sessions *atomic.Int64) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "fed-upstream", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { sessions.Add(1) }})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in upEchoIn) (*mcp.CallToolResult, upEchoOut, error) {
			return nil, upEchoOut{Echo: in.Text}, nil
		})
	fields := map[string]string{}
	for i := range 12 {
		fields[fmt.Sprintf("field_%02d", i)] = strings.Repeat(string(rune('a'+i)), 48)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Looks a record up: about 1 KB of JSON."},
		func(_ context.Context, _ *mcp.CallToolRequest, in fedLookupIn) (*mcp.CallToolResult, fedRecord, error) {
			return nil, fedRecord{ID: in.ID, Name: "record", Fields: fields}, nil
		})
	server := func(*http.Request) *mcp.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/", mcp.NewStreamableHTTPHandler(server, nil))
	mux.Handle(bareSessionless, mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true}))
	return mux
}

// bareProxy is a bare go-sdk MCP server whose tools forward each call
// with a go-sdk client, over one client session shared by all callers, to
// the upstream: what an in-process MCP gateway does, the floor of
// federation. It serves sessions at any path but /sessionless, where it
// serves the sessionless protocol.
func bareProxy(upstream string) (http.Handler, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bare-proxy", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: upstream,
			HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}, nil)
	if err != nil {
		return nil, err
	}
	proxy := mcp.NewServer(&mcp.Implementation{Name: "bare-proxy", Version: "1"}, nil)
	for _, tool := range fedTools {
		proxy.AddTool(&mcp.Tool{Name: tool.name, InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return cs.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments})
			})
	}
	server := func(*http.Request) *mcp.Server { return proxy }
	mux := http.NewServeMux()
	mux.Handle("/", mcp.NewStreamableHTTPHandler(server, nil))
	mux.Handle(bareSessionless, mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true}))
	return mux, nil
}

// serveBareProxy serves bareProxy on a free loopback port, printed as the
// first line of stdout, when the environment asks for it; it never returns
// then. Its allocation counters are on /debug/vars, as serveBareMCP's.
func serveBareProxy() {
	upstream := os.Getenv(bareProxyEnv)
	if upstream == "" {
		return
	}
	proxy, err := bareProxy(upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "the bare proxy's upstream:", err)
		os.Exit(1)
	}
	serveChild(proxy)
}

// BenchmarkFederation measures a federated MCP tool call (go-sdk client →
// Crank → mcp adapter process → a go-sdk upstream over Streamable HTTP)
// against baselines measured in the same run: calling the upstream
// directly, and the bare go-sdk proxy in a process of its own (bareProxy:
// the federation floor, what an in-process gateway pays). Both tools
// (fedTools: a small answer and about 1 KB of JSON) in both protocol
// generations (benchGenerations), every variant taking turns in blocks
// of calls (bench_interleave_test.go). It reports p50 and p99 latencies,
// throughputs at 8 callers, the server processes' CPU time per call
// (Crank's: gateway and adapter) and allocation, their ratios Crank to the
// proxy (the goals: p50 ≤ 1.2×, throughput ≥ 1×) and the proxy to the
// upstream directly, and the gateway's resident memory before and after
// the throughput run, and the new connections and sessions the upstream
// saw in it (Crank must reuse both). With CRANK_BENCH_BEFORE, also Crank
// before a change; with CRANK_BENCH_PROFILE, the gateway's profiles under
// its echo calls (bench_profile_test.go); with CRANK_BENCH_FED_LOAD, its
// memory under a long load (fedRSS).
func BenchmarkFederation(b *testing.B) {
	// The upstream counts its sessions and connections: Crank must reuse
	// both, whatever the callers.
	var sessions, conns atomic.Int64
	upSrv := httptest.NewUnstartedServer(fedUpstream(&sessions))
	upSrv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	upSrv.Start()
	b.Cleanup(upSrv.Close)
	up := upSrv.URL + "/"
	ops := fmt.Sprintf(`
operations:
  - name: fed
    description: A go-sdk server over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      include: [echo, lookup]
`, up)
	// No budget for requests without a session, as in BenchmarkUnaryREST.
	const noBudget = "max_sessionless_requests_per_client off"
	g := startGateway(b, gatewayOptions{Operations: ops, Handler: noBudget})
	gBefore := startBeforeGateway(b, gatewayOptions{Operations: ops, Handler: noBudget})
	before := gBefore != nil
	proxy := startBareChild(b, []string{bareProxyEnv + "=" + up}, false)
	ctx := context.Background()

	connect := func(endpoint string, gen generation, tool string, args map[string]any) func() error {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
				HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}, gen.opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		if got := cs.InitializeResult().ProtocolVersion; got != gen.version {
			b.Fatalf("%s negotiated %s, want %s", endpoint, got, gen.version)
		}
		return func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err == nil && (res.IsError || res.StructuredContent == nil) {
				err = fmt.Errorf("%s: %s", tool, textOf(res))
			}
			return err
		}
	}
	var vs []benchVariant
	for _, gen := range benchGenerations {
		for _, tool := range fedTools {
			s := tool.suffix + gen.suffix
			vs = append(vs,
				benchVariant{name: "direct" + s, call: connect(bareEndpoint(up, gen.generation), gen.generation, tool.name, tool.args)},
				benchVariant{"proxy" + s, connect(bareEndpoint(proxy.URL, gen.generation), gen.generation, tool.name, tool.args), proxy.meter()},
				benchVariant{"crank" + s, connect(g.MCPURL, gen.generation, tool.name, tool.args), g.meter()})
			if before {
				vs = append(vs, benchVariant{"crank-before" + s, connect(gBefore.MCPURL, gen.generation, tool.name, tool.args), gBefore.meter()})
			}
		}
	}
	at := func(name string) int { return variantAt(vs, name) }
	defer profileGateway(b, g, vs[at("crank")].call) // bench_profile_test.go

	warmUp(b, vs, 50)
	rss0 := procStatus(g.cmd.Process.Pid, "VmRSS")
	var lat [][]time.Duration
	var rate []float64
	var use []serverUse
	var calls int
	b.Run("latency", func(b *testing.B) {
		lat = interleavedLatency(b, vs, b.N)
		ratio := reportLatency(b, vs, lat)
		for _, gen := range benchGenerations {
			for _, tool := range fedTools {
				s := tool.suffix + gen.suffix
				ratio("crank/proxy-p50"+s, "crank"+s, "proxy"+s, 50)
				ratio("crank/proxy-p99"+s, "crank"+s, "proxy"+s, 99)
				ratio("proxy/direct-p50"+s, "proxy"+s, "direct"+s, 50)
				if before {
					ratio("crank/before-p50"+s, "crank"+s, "crank-before"+s, 50)
				}
			}
		}
	})
	b.Run("throughput", func(b *testing.B) {
		sessions0, conns0 := sessions.Load(), conns.Load()
		rate, use = interleavedRate(b, vs, b.N, 8)
		// Over all variants' calls (len(vs) × b.N): a variant that opened
		// a connection or session per call would show here.
		b.ReportMetric(float64(conns.Load()-conns0), "upstream-new-conns")
		b.ReportMetric(float64(sessions.Load()-sessions0), "upstream-new-sessions")
		calls = b.N
		ratio, cpu := reportRate(b, vs, rate, use)
		for _, gen := range benchGenerations {
			for _, tool := range fedTools {
				s := tool.suffix + gen.suffix
				ratio("crank/proxy-calls/s"+s, "crank"+s, "proxy"+s)
				ratio("proxy/direct-calls/s"+s, "proxy"+s, "direct"+s)
				b.ReportMetric(cpu("crank"+s)/cpu("proxy"+s), "crank/proxy-cpu"+s)
				if before {
					ratio("crank/before-calls/s"+s, "crank"+s, "crank-before"+s)
					b.ReportMetric(cpu("crank"+s)/cpu("crank-before"+s), "crank/before-cpu"+s)
				}
			}
		}
		if rss := procStatus(g.cmd.Process.Pid, "VmRSS"); rss > 0 && rss0 > 0 {
			b.ReportMetric(float64(rss)/1024, "crank-rss-MiB")
			b.ReportMetric(float64(rss)/float64(rss0), "crank-rss/warm")
		}
		if before {
			reportPeakRSS(b, g, gBefore)
		}
	})
	if lat == nil || rate == nil {
		return // a -bench filter skipped one
	}
	printFederation(vs, lat, rate, use, calls, before)
	if d, err := time.ParseDuration(os.Getenv(benchFedLoadEnv)); err == nil && d > 0 {
		var crank []func() error
		for _, v := range vs {
			if strings.HasPrefix(v.name, "crank") && !strings.HasPrefix(v.name, "crank-before") {
				crank = append(crank, v.call)
			}
		}
		// The testing package may run a sub-benchmark twice (b.N 1, then
		// the -benchtime's): the load runs once, its figures reported
		// each time.
		var report func(*testing.B)
		b.Run("rss", func(b *testing.B) {
			if report == nil {
				report = fedRSS(b, g, crank, d)
			}
			report(b)
		})
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

// printFederation prints BenchmarkFederation's figures as a table, a
// block a protocol generation and tool, with the ratios the goals are
// about.
func printFederation(vs []benchVariant, lat [][]time.Duration, rate []float64, use []serverUse, calls int, before bool) {
	at := func(name string) int { return variantAt(vs, name) }
	row := func(label, name string) { printVariantRow(label, vs, at(name), lat, rate, use, calls) }
	fmt.Printf("\nfederated MCP tool call, same run, variants interleaved (latency: sequential calls; throughput, server CPU\n" +
		"(adapter processes included) and the server process's allocation per call: 8 callers):\n")
	fmt.Printf("  %-36s %9s %9s %7s %11s %14s %11s %7s\n", "", "p50", "p99", "calls/s", "CPU/call", "", "alloc/call", "objects")
	for _, gen := range benchGenerations {
		for _, tool := range fedTools {
			s := tool.suffix + gen.suffix
			fmt.Printf(" %s, %s (%s):\n", tool.name, gen.name, gen.version)
			row("upstream directly", "direct"+s)
			row("bare go-sdk proxy process", "proxy"+s)
			row("through Crank", "crank"+s)
			if before {
				row("Crank before (CRANK_BENCH_BEFORE)", "crank-before"+s)
			}
			fmt.Printf("  Crank/proxy: p50 %.2fx, p99 %.2fx, throughput %.2fx\n",
				float64(pct(lat[at("crank"+s)], 50))/float64(pct(lat[at("proxy"+s)], 50)),
				float64(pct(lat[at("crank"+s)], 99))/float64(pct(lat[at("proxy"+s)], 99)),
				rate[at("crank"+s)]/rate[at("proxy"+s)])
		}
	}
}
