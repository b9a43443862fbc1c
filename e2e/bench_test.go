package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/client"
)

// bareMCPEnv makes the test binary serve bareMCP for the upstream it
// names instead of running tests (TestMain calls serveBareMCP first): the
// bare go-sdk server in a process of its own, as a gateway is.
const bareMCPEnv = "CRANK_E2E_BARE_MCP_UPSTREAM"

// bareMCP is a bare go-sdk MCP server whose tools call the upstream
// themselves: the floor any MCP gateway built on the go-sdk pays. get_user
// makes one call (BenchmarkUnaryREST's upstream), or, with an adapter
// process, calls it over the adapter hop (floorGetUser: the design floor);
// stream reads the SSE stream of BenchmarkStreamingTool's upstream and
// sends every event as a progress notification, as a window tool does.
// It serves sessions at any path but /sessionless, where it serves the
// sessionless 2026-07-28 protocol (bareEndpoint): the go-sdk serves that
// only from a stateless handler, which in turn opens no sessions.
func bareMCP(upstream string, adapter *client.Process) http.Handler {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&mcp.Tool{Name: "stream", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				N    int
				Pace string
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			resp, err := httpc.Get(fmt.Sprintf("%s/stream?n=%d&pace=%s", upstream, args.N, args.Pace))
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			rd, i := newSSEReader(resp.Body), 0
			for ev, ok := rd.next(); ok; ev, ok = rd.next() {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: ev.Data})
				i++
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(i)}}}, nil
		})
	getUser := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		resp, err := httpc.Get(upstream + "/users/1")
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
			StructuredContent: json.RawMessage(body)}, err
	}
	if adapter != nil {
		getUser = floorGetUser(adapter, upstream) // bench_floor_test.go
	}
	bare.AddTool(&mcp.Tool{Name: "get_user", InputSchema: map[string]any{"type": "object"}}, getUser)
	return bareHandler(bare) // bench_federation_test.go
}

// bareSessionless is the path at which bareMCP serves the sessionless
// protocol.
const bareSessionless = "/sessionless"

// bareEndpoint is the endpoint of the bareMCP server at base (its URL)
// for a client of the generation.
func bareEndpoint(base string, gen generation) string {
	if gen.opts == nil { // the client's own choice: sessionless
		return strings.TrimSuffix(base, "/") + bareSessionless
	}
	return base
}

// serveBareMCP serves bareMCP on a free loopback port, printed as the
// first line of stdout (and the pid of its adapter process, if any, as the
// second), when the environment asks for it; it never returns then. The
// process's allocation counters are on /debug/vars (expvar), as the
// gateway's are on Caddy's admin endpoint.
func serveBareMCP() {
	upstream := os.Getenv(bareMCPEnv)
	if upstream == "" {
		return
	}
	var adapter *client.Process
	if exe := os.Getenv(bareMCPAdapterEnv); exe != "" {
		var err error
		if adapter, err = startFloorAdapter(exe); err != nil {
			fmt.Fprintln(os.Stderr, "the floor's adapter:", err)
			os.Exit(1)
		}
	}
	serveChild(bareMCP(upstream, adapter), func() {
		if adapter != nil {
			fmt.Println(adapter.PID())
		}
	})
}

// serveChild serves h, and the process's allocation counters on
// /debug/vars (expvar), on a free loopback port printed as the first line
// of stdout, then what started prints; it never returns.
func serveChild(h http.Handler, started func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/vars", expvar.Handler())
	mux.Handle("/", h)
	fmt.Printf("http://%s/\n", l.Addr())
	started()
	fmt.Fprintln(os.Stderr, http.Serve(l, mux))
	os.Exit(1)
}

// A bareProcess is bareMCP running in a child process.
type bareProcess struct {
	URL        string
	PID        int
	AdapterPID int // of the floor's adapter process; 0 for none
}

// meter reads what the process (and its adapter) used.
func (p *bareProcess) meter() *serverMeter {
	m := &serverMeter{server: p.PID, vars: strings.TrimSuffix(p.URL, "/") + "/debug/vars"}
	if p.AdapterPID != 0 {
		m.adapters = []int{p.AdapterPID}
	}
	return m
}

// startBareMCPProcess runs bareMCP in a child process (this test binary);
// with adapterExe (a crank executable) its get_user calls that
// executable's REST adapter in a process of its own: the design floor.
func startBareMCPProcess(b *testing.B, upstream, adapterExe string) *bareProcess {
	env := []string{bareMCPEnv + "=" + upstream}
	if adapterExe != "" {
		env = append(env, bareMCPAdapterEnv+"="+adapterExe)
	}
	p, rd := startChild(b, "bare MCP process", env...)
	if adapterExe != "" {
		line, err := rd.ReadString('\n')
		if err == nil {
			p.AdapterPID, err = strconv.Atoi(strings.TrimSpace(line))
		}
		if err != nil {
			b.Fatalf("bare MCP process: its adapter's pid: %v", err)
		}
	}
	return p
}

// startChild runs this test binary in a child process with env added,
// stopped when the benchmark ends, and reads the URL it serves at
// (serveChild); rd reads the rest of its stdout.
func startChild(b *testing.B, what string, env ...string) (p *bareProcess, rd *bufio.Reader) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) // an adapter sees its parent gone and exits
	rd = bufio.NewReader(out)
	line, err := rd.ReadString('\n')
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	return &bareProcess{URL: strings.TrimSpace(line), PID: cmd.Process.Pid}, rd
}

// benchGenerations are the protocol generations BenchmarkUnaryREST
// measures, each with the suffix of its variants' and ratios' names:
// 2025-11-25 in a session (the names the benchmark always reported) and
// 2026-07-28 without one, what go-sdk 1.8 clients speak by default. Each
// server serves both; a variant's client speaks one.
var benchGenerations = []struct {
	generation
	suffix string
}{{generationNamed("sessions"), ""}, {generationNamed("sessionless"), "-sessionless"}}

// defaultSuffix is the generation BenchmarkUnaryREST also measures
// through Crank with its default configuration (the sessionless budget
// per address on).
const defaultSuffix = "-sessionless"

// benchConnect opens a benchmark client session of the generation,
// which the server must speak (a server that answered an older version
// would measure another path), closed when the benchmark ends.
func benchConnect(b *testing.B, endpoint string, gen generation) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, gen.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != gen.version {
		b.Fatalf("%s negotiated %s, want %s", endpoint, got, gen.version)
	}
	return cs
}

// generationNamed is the generation (generations_test.go) named name.
func generationNamed(name string) generation {
	return generations[slices.IndexFunc(generations, func(g generation) bool { return g.name == name })]
}

// BenchmarkUnaryREST measures a unary REST tool call through Crank (go-sdk
// client → Caddy → crank handler → host → rest adapter process → upstream)
// against baselines measured in the same run: calling the upstream
// directly; a bare go-sdk MCP server (no Caddy, no adapter process) whose
// tool calls the upstream in-process, in the benchmark's process and in a
// process of its own (paying the process boundaries a gateway pays); the
// design floor, that bare server process calling the upstream through
// the REST adapter in a process of its own, over the go-plugin gRPC hop
// Crank's gateway uses (bench_floor_test.go); Crank without its SSE
// event log (event_store off); and, sessionless, Crank with its default
// configuration, whose per-address budget the 8 callers of the
// throughput run, all from one address, must not meet. Each MCP variant but the in-process one is
// measured in both protocol generations (benchGenerations), all variants
// taking turns in blocks of calls (bench_interleave_test.go). It reports
// p50 and p99 latencies, throughputs, the server processes' CPU time and
// allocation per call, and their ratios: Crank to the bare server process
// and to the floor, the floor to the bare server process, and each
// generation's Crank and bare server sessionless to in a session.
func BenchmarkUnaryREST(b *testing.B) {
	up := newUpstream(b)
	ops := opsFile(b, up, "5s", "")
	// The budget of requests without a session
	// (max_sessionless_requests_per_client, 10000 a second per client
	// by default, in bursts of 20000) is off, as no baseline has one, so
	// that what is measured is the call path. A CRANK_BENCH_BEFORE
	// executable must know the option (any since the budget was added).
	const noBudget = "max_sessionless_requests_per_client off"
	g := startGateway(b, gatewayOptions{Operations: ops, Handler: noBudget})
	// And Crank with its default configuration, budget on, for the
	// sessionless generation: what an agent host whose callers all come
	// from one address sees (8 of them in the throughput run). A refusal
	// fails the run.
	gDefault := startGateway(b, gatewayOptions{Operations: ops})
	gNoLog := startGateway(b, gatewayOptions{Operations: ops, Handler: "event_store off\n\t\t" + noBudget})
	gBefore := startBeforeGateway(b, gatewayOptions{Operations: ops, Handler: noBudget})
	before := gBefore != nil
	ctx := context.Background()

	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	direct := func() error {
		resp, err := httpc.Get(up.URL + "/users/1")
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	mcpCall := func(cs *mcp.ClientSession) func() error {
		return func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %s", textOf(res))
			}
			return err
		}
	}
	connect := func(endpoint string, gen generation) func() error { return mcpCall(benchConnect(b, endpoint, gen)) }
	bareHTTP := httptest.NewServer(bareMCP(up.URL, nil))
	b.Cleanup(bareHTTP.Close) // after the sessions' cleanups
	bare := startBareMCPProcess(b, up.URL, "")
	floor := startBareMCPProcess(b, up.URL, crankBin)

	vs := []benchVariant{{name: "direct", call: direct},
		{name: "bare-mcp", call: connect(bareEndpoint(bareHTTP.URL, benchGenerations[0].generation), benchGenerations[0].generation)}}
	for _, gen := range benchGenerations {
		vs = append(vs,
			benchVariant{"bare-mcp-process" + gen.suffix, connect(bareEndpoint(bare.URL, gen.generation), gen.generation), bare.meter()},
			benchVariant{"floor" + gen.suffix, connect(bareEndpoint(floor.URL, gen.generation), gen.generation), floor.meter()},
			benchVariant{"crank" + gen.suffix, connect(g.MCPURL, gen.generation), g.meter()},
			benchVariant{"crank-no-log" + gen.suffix, connect(gNoLog.MCPURL, gen.generation), gNoLog.meter()})
		if before {
			vs = append(vs, benchVariant{"crank-before" + gen.suffix, connect(gBefore.MCPURL, gen.generation), gBefore.meter()})
		}
		if gen.suffix == defaultSuffix {
			vs = append(vs, benchVariant{"crank-default" + gen.suffix, connect(gDefault.MCPURL, gen.generation), gDefault.meter()})
		}
	}
	at := func(name string) int { return variantAt(vs, name) }
	defer profileGateway(b, g, vs[at("crank")].call) // bench_profile_test.go

	warmUp(b, vs, 50)
	var lat [][]time.Duration
	var rate []float64
	var use []serverUse
	var calls int // of each variant in the throughput run
	b.Run("latency", func(b *testing.B) {
		lat = reportedLatency(b, vs)
		ratio := func(metric, of, to string, p int) {
			b.ReportMetric(float64(pct(lat[at(of)], p))/float64(pct(lat[at(to)], p)), metric)
		}
		for _, gen := range benchGenerations {
			s := gen.suffix
			ratio("crank/bare-p50"+s, "crank"+s, "bare-mcp-process"+s, 50)
			ratio("crank/bare-p99"+s, "crank"+s, "bare-mcp-process"+s, 99)
			ratio("no-log/bare-p50"+s, "crank-no-log"+s, "bare-mcp-process"+s, 50)
			ratio("crank/floor-p50"+s, "crank"+s, "floor"+s, 50)
			ratio("crank/floor-p99"+s, "crank"+s, "floor"+s, 99)
			ratio("floor/bare-p50"+s, "floor"+s, "bare-mcp-process"+s, 50)
			if before {
				ratio("before/bare-p50"+s, "crank-before"+s, "bare-mcp-process"+s, 50)
				ratio("crank/before-p50"+s, "crank"+s, "crank-before"+s, 50)
				ratio("crank/before-p99"+s, "crank"+s, "crank-before"+s, 99)
			}
		}
		ratio("default/bare-p50"+defaultSuffix, "crank-default"+defaultSuffix, "bare-mcp-process"+defaultSuffix, 50)
		ratio("default/bare-p99"+defaultSuffix, "crank-default"+defaultSuffix, "bare-mcp-process"+defaultSuffix, 99)
		ratio("sessionless/session-crank-p50", "crank-sessionless", "crank", 50)
		ratio("sessionless/session-bare-p50", "bare-mcp-process-sessionless", "bare-mcp-process", 50)
	})
	b.Run("throughput", func(b *testing.B) {
		rate, use = reportedRate(b, vs)
		calls = b.N
		// What the server processes spent on a call, adapters included.
		cpu := func(name string) float64 { u := use[at(name)]; return float64(u.cpu + u.adapterCPU) }
		ratio := func(metric, of, to string) { b.ReportMetric(rate[at(of)]/rate[at(to)], metric) }
		for _, gen := range benchGenerations {
			s := gen.suffix
			ratio("crank/bare-calls/s"+s, "crank"+s, "bare-mcp-process"+s)
			ratio("no-log/bare-calls/s"+s, "crank-no-log"+s, "bare-mcp-process"+s)
			ratio("crank/floor-calls/s"+s, "crank"+s, "floor"+s)
			ratio("floor/bare-calls/s"+s, "floor"+s, "bare-mcp-process"+s)
			b.ReportMetric(cpu("crank"+s)/cpu("bare-mcp-process"+s), "crank/bare-cpu"+s)
			b.ReportMetric(cpu("crank"+s)/cpu("floor"+s), "crank/floor-cpu"+s)
			b.ReportMetric(cpu("floor"+s)/cpu("bare-mcp-process"+s), "floor/bare-cpu"+s)
			if before {
				ratio("before/bare-calls/s"+s, "crank-before"+s, "bare-mcp-process"+s)
				ratio("crank/before-calls/s"+s, "crank"+s, "crank-before"+s)
			}
		}
		ratio("default/bare-calls/s"+defaultSuffix, "crank-default"+defaultSuffix, "bare-mcp-process"+defaultSuffix)
		ratio("sessionless/session-crank-calls/s", "crank-sessionless", "crank")
		ratio("sessionless/session-bare-calls/s", "bare-mcp-process-sessionless", "bare-mcp-process")
		b.ReportMetric(cpu("crank-sessionless")/cpu("crank"), "sessionless/session-crank-cpu")
		if before {
			reportPeakRSS(b, g, gBefore)
		}
	})
	if lat == nil || rate == nil {
		return // a -bench filter skipped one
	}
	printUnary(vs, lat, rate, use, calls, before)
}

// printUnary prints BenchmarkUnaryREST's figures as a table, a row a
// variant and a block a protocol generation, and the ratios the goals
// are about.
func printUnary(vs []benchVariant, lat [][]time.Duration, rate []float64, use []serverUse, calls int, before bool) {
	at := func(name string) int { return variantAt(vs, name) }
	row := func(label, name string) {
		i := at(name)
		fmt.Printf("  %-36s %7.0fµs %7.0fµs %7.0f", label, micros(pct(lat[i], 50)), micros(pct(lat[i], 99)), rate[i])
		if vs[i].meter != nil {
			u := use[i]
			fmt.Printf(" %8.0f µs", micros(u.cpu+u.adapterCPU)/float64(calls))
			if len(vs[i].meter.adapters) > 0 {
				fmt.Printf(" (%3.0f adapter)", micros(u.adapterCPU)/float64(calls))
			} else {
				fmt.Printf("%15s", "")
			}
			fmt.Printf(" %8.1f KB %7.0f", float64(u.allocBytes)/1000/float64(calls), float64(u.allocs)/float64(calls))
		}
		fmt.Println()
	}
	ratio := func(of, to string, p int) float64 { return float64(pct(lat[at(of)], p)) / float64(pct(lat[at(to)], p)) }
	speed := func(of, to string) float64 { return rate[at(of)] / rate[at(to)] }
	fmt.Printf("\nunary REST tool call, same run, variants interleaved (latency: sequential calls; throughput, server CPU\n" +
		"(adapter processes included) and the server process's allocation per call: 8 callers):\n")
	fmt.Printf("  %-36s %9s %9s %7s %11s %14s %11s %7s\n", "", "p50", "p99", "calls/s", "CPU/call", "", "alloc/call", "objects")
	row("direct HTTP", "direct")
	row("bare go-sdk MCP, in the benchmark", "bare-mcp")
	for _, gen := range benchGenerations {
		s := gen.suffix
		fmt.Printf(" %s (%s):\n", gen.name, gen.version)
		row("bare go-sdk MCP process", "bare-mcp-process"+s)
		row("design floor: bare + adapter hop", "floor"+s)
		row("through Crank", "crank"+s)
		row("Crank, no event log", "crank-no-log"+s)
		if before {
			row("Crank before (CRANK_BENCH_BEFORE)", "crank-before"+s)
		}
		if s == defaultSuffix {
			row("Crank, default configuration", "crank-default"+s)
			fmt.Printf("  Crank default configuration/bare process: p50 %.2fx, p99 %.2fx, throughput %.2fx\n",
				ratio("crank-default"+s, "bare-mcp-process"+s, 50), ratio("crank-default"+s, "bare-mcp-process"+s, 99),
				speed("crank-default"+s, "bare-mcp-process"+s))
		}
		fmt.Printf("  Crank/bare process: p50 %.2fx, p99 %.2fx, throughput %.2fx (no log: p50 %.2fx, throughput %.2fx)\n"+
			"  Crank/floor: p50 %.2fx, p99 %.2fx, throughput %.2fx; floor/bare process: p50 %.2fx, throughput %.2fx\n",
			ratio("crank"+s, "bare-mcp-process"+s, 50), ratio("crank"+s, "bare-mcp-process"+s, 99), speed("crank"+s, "bare-mcp-process"+s),
			ratio("crank-no-log"+s, "bare-mcp-process"+s, 50), speed("crank-no-log"+s, "bare-mcp-process"+s),
			ratio("crank"+s, "floor"+s, 50), ratio("crank"+s, "floor"+s, 99), speed("crank"+s, "floor"+s),
			ratio("floor"+s, "bare-mcp-process"+s, 50), speed("floor"+s, "bare-mcp-process"+s))
	}
	fmt.Printf(" sessionless/session: Crank p50 %.2fx, throughput %.2fx; bare process p50 %.2fx, throughput %.2fx\n",
		ratio("crank-sessionless", "crank", 50), speed("crank-sessionless", "crank"),
		ratio("bare-mcp-process-sessionless", "bare-mcp-process", 50), speed("bare-mcp-process-sessionless", "bare-mcp-process"))
}

// benchStreamUpstream serves GET /stream?n=N: an SSE stream of N JSON
// events, each carrying its send time in ns, written back to back
// (pace=0) or one per pace.
func benchStreamUpstream(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		pace, _ := time.ParseDuration(r.URL.Query().Get("pace"))
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range n {
			if pace > 0 {
				time.Sleep(pace)
			}
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"sent\":%d,\"pad\":\"0123456789abcdef\"}\n\n", i, i, time.Now().UnixNano())
			f.Flush()
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// chunkSent returns the send time carried by a chunk.
func chunkSent(msg string) time.Time {
	var v struct{ Sent int64 }
	_ = json.Unmarshal([]byte(msg), &v)
	return time.Unix(0, v.Sent)
}

// BenchmarkStreamingTool measures a streaming (window) tool end to end:
// the REST adapter process reads an SSE upstream and every item reaches the
// go-sdk client as a progress notification. It reports chunks/s (upstream
// writing as fast as it can) and the per-chunk latency from the upstream's
// write to the client's handler (upstream paced at 1ms), against two
// baselines in the same run: reading the upstream directly, and a bare
// go-sdk MCP server that reads it in-process and sends the same
// notifications.
func BenchmarkStreamingTool(b *testing.B) {
	const chunks = 500
	up := benchStreamUpstream(b)
	ops := fmt.Sprintf(`
operations:
  - name: stream
    description: A window over an SSE stream.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 60000, max_items: 100000, max_bytes: 8000000}
    input_schema: {type: object, properties: {n: {type: integer}, pace: {type: string}}}
    config: {method: GET, url: "%s/stream", query: [n, pace], stream: {reconnect: false}}
`, up.URL)
	g := startGateway(b, gatewayOptions{Operations: ops})
	// The same without the etcd event log, to show what resumability
	// costs per chunk.
	gNoLog := startGateway(b, gatewayOptions{Operations: ops, Handler: "event_store off"})
	ctx := context.Background()
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

	// Each caller returns the chunks it saw and their latencies.
	type run func(n int, pace string, lat *[]time.Duration) error
	var directRun run = func(n int, pace string, lat *[]time.Duration) error {
		resp, err := httpc.Get(fmt.Sprintf("%s/stream?n=%d&pace=%s", up.URL, n, pace))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rd, got := newSSEReader(resp.Body), 0
		for ev, ok := rd.next(); ok; ev, ok = rd.next() {
			if lat != nil {
				*lat = append(*lat, time.Since(chunkSent(ev.Data)))
			}
			got++
		}
		if got != n {
			return fmt.Errorf("direct: %d chunks, want %d", got, n)
		}
		return nil
	}
	// An MCP client whose progress handler counts (and times) chunks.
	mcpRun := func(endpoint string) run {
		var mu sync.Mutex
		var count int
		var sink *[]time.Duration
		client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				now := time.Now()
				mu.Lock()
				count++
				if sink != nil {
					*sink = append(*sink, now.Sub(chunkSent(req.Params.Message)))
				}
				mu.Unlock()
			}})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return func(n int, pace string, lat *[]time.Duration) error {
			mu.Lock()
			count, sink = 0, lat
			mu.Unlock()
			params := &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{"n": n, "pace": pace}}
			params.SetProgressToken("bench")
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("tool error: %s", textOf(res))
			}
			// The client may run the last handlers just after the result.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
				mu.Lock()
				c := count
				mu.Unlock()
				if c >= n {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%d progress notifications, want %d", c, n)
				}
			}
			mu.Lock()
			sink = nil
			mu.Unlock()
			return nil
		}
	}

	// A bare go-sdk server streaming the upstream itself, in this process
	// and in a process of its own: the floor for a gateway built on the
	// go-sdk, the second paying the process boundaries a gateway pays.
	bareHTTP := httptest.NewServer(bareMCP(up.URL, nil))
	defer bareHTTP.Close()
	bare := startBareMCPProcess(b, up.URL, "")

	vs := []struct {
		name string
		call run
	}{{"direct", directRun}, {"bare-mcp", mcpRun(bareHTTP.URL)}, {"crank", mcpRun(g.MCPURL)}, {"crank-no-log", mcpRun(gNoLog.MCPURL)},
		{"bare-mcp-process", mcpRun(bare.URL)}}
	const vBare, vCrank, vNoLog, vBareProc, vBefore = 1, 2, 3, 4, 5 // indexes in vs
	gBefore := startBeforeGateway(b, gatewayOptions{Operations: ops})
	before := gBefore != nil
	if before {
		vs = append(vs, struct {
			name string
			call run
		}{"crank-before", mcpRun(gBefore.MCPURL)})
	}
	for _, v := range vs {
		if err := v.call(chunks, "0s", nil); err != nil { // warm up
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	// One benchmark iteration is one chunk of each variant, streamed in
	// calls of up to size chunks; the variants take turns call by call,
	// so that the machine's load weighs on each alike.
	calls := func(b *testing.B, size int, each func(i, n int)) {
		for left := b.N; left > 0; left -= size {
			for i := range vs {
				each(i, min(left, size))
			}
		}
	}
	var rate []float64
	var p50 []time.Duration
	b.Run("throughput", func(b *testing.B) {
		// What the server processes spent per chunk (over the whole run:
		// one call is many blocks of chunks).
		crankMeter, bareMeter := g.meter(), bare.meter()
		crank0, bare0 := crankMeter.read(b), bareMeter.read(b)
		took := make([]time.Duration, len(vs))
		calls(b, chunks, func(i, n int) {
			start := time.Now()
			if err := vs[i].call(n, "0s", nil); err != nil {
				b.Fatalf("%s: %v", vs[i].name, err)
			}
			took[i] += time.Since(start)
		})
		crankUse, bareUse := crankMeter.read(b).minus(crank0), bareMeter.read(b).minus(bare0)
		crankUse.report(b, "crank", "chunk", b.N, true)
		bareUse.report(b, "bare-mcp-process", "chunk", b.N, false)
		b.ReportMetric(float64(crankUse.cpu+crankUse.adapterCPU)/float64(bareUse.cpu), "crank/bare-process-cpu")
		rate = make([]float64, len(vs))
		for i, v := range vs {
			rate[i] = float64(b.N) / took[i].Seconds()
			b.ReportMetric(rate[i], v.name+"-chunks/s")
		}
		b.ReportMetric(rate[vCrank]/rate[vBare], "crank/bare-chunks/s")
		b.ReportMetric(rate[vNoLog]/rate[vBare], "no-log/bare-chunks/s")
		b.ReportMetric(rate[vCrank]/rate[vBareProc], "crank/bare-process-chunks/s")
		if before {
			b.ReportMetric(rate[vBefore]/rate[vBare], "before/bare-chunks/s")
			b.ReportMetric(rate[vCrank]/rate[vBefore], "crank/before-chunks/s")
		}
	})
	b.Run("latency", func(b *testing.B) {
		lat := make([][]time.Duration, len(vs))
		calls(b, 200, func(i, n int) {
			if err := vs[i].call(n, "1ms", &lat[i]); err != nil {
				b.Fatalf("%s: %v", vs[i].name, err)
			}
		})
		p50 = make([]time.Duration, len(vs))
		for i, v := range vs {
			slices.Sort(lat[i])
			p50[i] = pct(lat[i], 50)
			b.ReportMetric(micros(p50[i]), v.name+"-p50-µs/chunk")
			b.ReportMetric(micros(pct(lat[i], 99)), v.name+"-p99-µs/chunk")
		}
		b.ReportMetric(micros(p50[vCrank]-p50[vBare]), "crank-bare-p50-µs/chunk")
		b.ReportMetric(micros(p50[vNoLog]-p50[vBare]), "no-log-bare-p50-µs/chunk")
		b.ReportMetric(micros(p50[vCrank]-p50[vBareProc]), "crank-bare-process-p50-µs/chunk")
		if before {
			b.ReportMetric(micros(p50[vBefore]-p50[vBare]), "before-bare-p50-µs/chunk")
		}
	})
	if rate == nil || p50 == nil {
		return // a -bench filter skipped one
	}
	fmt.Printf("\nstreaming tool, %d-chunk SSE upstream, same run, variants interleaved (throughput unpaced; latency upstream write → client handler, paced 1ms):\n"+
		"  direct HTTP        %9.0f chunks/s  p50 %8v/chunk\n"+
		"  bare go-sdk MCP    %9.0f chunks/s  p50 %8v/chunk  (in this process)\n"+
		"  bare, own process  %9.0f chunks/s  p50 %8v/chunk\n"+
		"  through Crank      %9.0f chunks/s  p50 %8v/chunk  (stateful, events logged in etcd for resumption)\n"+
		"  Crank, no log      %9.0f chunks/s  p50 %8v/chunk  (event_store off)\n"+
		"  throughput ratio Crank/direct %.3f, Crank/bare MCP %.2f (own process %.2f), no log/bare MCP %.2f; Crank adds %v per chunk over direct, %v over a bare MCP server (%v without the log, %v over its own process)\n",
		chunks, rate[0], p50[0], rate[vBare], p50[vBare], rate[vBareProc], p50[vBareProc], rate[vCrank], p50[vCrank], rate[vNoLog], p50[vNoLog],
		rate[vCrank]/rate[0], rate[vCrank]/rate[vBare], rate[vCrank]/rate[vBareProc], rate[vNoLog]/rate[vBare],
		p50[vCrank]-p50[0], p50[vCrank]-p50[vBare], p50[vNoLog]-p50[vBare], p50[vCrank]-p50[vBareProc])
}
