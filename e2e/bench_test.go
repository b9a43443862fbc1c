package e2e

import (
	"bufio"
	"context"
	"encoding/json"
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
)

// bareMCPEnv makes the test binary serve bareMCP for the upstream it
// names instead of running tests (TestMain calls serveBareMCP first): the
// bare go-sdk server in a process of its own, as a gateway is.
const bareMCPEnv = "CRANK_E2E_BARE_MCP_UPSTREAM"

// bareMCP is a bare go-sdk MCP server whose tools call the upstream
// themselves: the floor any MCP gateway built on the go-sdk pays. get_user
// makes one call (BenchmarkUnaryREST's upstream); stream reads the SSE
// stream of BenchmarkStreamingTool's upstream and sends every event as a
// progress notification, as a window tool does.
func bareMCP(upstream string) http.Handler {
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
	bare.AddTool(&mcp.Tool{Name: "get_user", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			resp, err := httpc.Get(upstream + "/users/1")
			if err != nil {
				return nil, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
				StructuredContent: json.RawMessage(body)}, err
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil)
}

// serveBareMCP serves bareMCP on a free loopback port, printed as the
// first line of stdout, when the environment asks for it; it never
// returns then.
func serveBareMCP() {
	upstream := os.Getenv(bareMCPEnv)
	if upstream == "" {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/\n", l.Addr())
	fmt.Fprintln(os.Stderr, http.Serve(l, bareMCP(upstream)))
	os.Exit(1)
}

// startBareMCPProcess runs bareMCP in a child process (this test binary)
// and returns its URL and process id.
func startBareMCPProcess(b *testing.B, upstream string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), bareMCPEnv+"="+upstream)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("bare MCP process: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// BenchmarkUnaryREST measures a unary REST tool call through Crank (go-sdk
// client → Caddy → crank handler → host → rest adapter process → upstream)
// against baselines measured in the same run: calling the upstream
// directly, a bare go-sdk MCP server (no Caddy, no adapter process) whose
// tool calls the upstream in-process, the same bare server in a process
// of its own (paying the process boundaries a gateway pays), and Crank
// without its SSE event log (event_store off). The variants take turns in
// blocks of calls (bench_interleave_test.go). It reports p50 and p99
// latencies, throughputs and their ratios to the bare server process.
func BenchmarkUnaryREST(b *testing.B) {
	up := newUpstream(b)
	g := startGateway(b, gatewayOptions{Operations: opsFile(b, up, "5s", "")})
	gNoLog := startGateway(b, gatewayOptions{Operations: opsFile(b, up, "5s", ""), Handler: "event_store off"})
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
	connect := func(endpoint string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	bareHTTP := httptest.NewServer(bareMCP(up.URL))
	b.Cleanup(bareHTTP.Close) // after the sessions' cleanups
	bareProc, barePID := startBareMCPProcess(b, up.URL)

	crankCall := mcpCall(g.connect(ctx))
	defer profileGateway(b, g, crankCall) // bench_profile_test.go

	vs := []benchVariant{
		{"direct", direct},
		{"bare-mcp", mcpCall(connect(bareHTTP.URL))},
		{"bare-mcp-process", mcpCall(connect(bareProc))},
		{"crank", crankCall},
		{"crank-no-log", mcpCall(gNoLog.connect(ctx))},
	}
	const vBare, vCrank, vNoLog, vBefore = 2, 3, 4, 5 // indexes in vs
	gBefore := startBeforeGateway(b, gatewayOptions{Operations: opsFile(b, up, "5s", "")})
	before := gBefore != nil
	if before {
		vs = append(vs, benchVariant{"crank-before", mcpCall(gBefore.connect(ctx))})
	}
	warmUp(b, vs, 50)
	var lat [][]time.Duration
	var rate []float64
	b.Run("latency", func(b *testing.B) {
		lat = interleavedLatency(b, vs, b.N)
		for i, v := range vs {
			b.ReportMetric(micros(pct(lat[i], 50)), v.name+"-p50-µs")
			b.ReportMetric(micros(pct(lat[i], 99)), v.name+"-p99-µs")
		}
		b.ReportMetric(float64(pct(lat[vCrank], 50))/float64(pct(lat[vBare], 50)), "crank/bare-p50")
		b.ReportMetric(float64(pct(lat[vCrank], 99))/float64(pct(lat[vBare], 99)), "crank/bare-p99")
		b.ReportMetric(float64(pct(lat[vNoLog], 50))/float64(pct(lat[vBare], 50)), "no-log/bare-p50")
		if before {
			b.ReportMetric(float64(pct(lat[vBefore], 50))/float64(pct(lat[vBare], 50)), "before/bare-p50")
			b.ReportMetric(float64(pct(lat[vCrank], 50))/float64(pct(lat[vBefore], 50)), "crank/before-p50")
			b.ReportMetric(float64(pct(lat[vCrank], 99))/float64(pct(lat[vBefore], 99)), "crank/before-p99")
		}
	})
	b.Run("throughput", func(b *testing.B) {
		// The CPU time the server processes spent on their calls.
		cpu := startServerCPU(g, barePID)
		rate = interleavedRate(b, vs, b.N, 8)
		cpu.report(b, "call", "crank/bare-cpu")
		for i, v := range vs {
			b.ReportMetric(rate[i], v.name+"-calls/s")
		}
		b.ReportMetric(rate[vCrank]/rate[vBare], "crank/bare-calls/s")
		b.ReportMetric(rate[vNoLog]/rate[vBare], "no-log/bare-calls/s")
		if before {
			b.ReportMetric(rate[vBefore]/rate[vBare], "before/bare-calls/s")
			b.ReportMetric(rate[vCrank]/rate[vBefore], "crank/before-calls/s")
			reportPeakRSS(b, g, gBefore)
		}
	})
	if lat == nil || rate == nil {
		return // a -bench filter skipped one
	}
	p50 := func(i int) time.Duration { return pct(lat[i], 50) }
	fmt.Printf("\nunary REST tool call, same run, variants interleaved (p50/p99 latency, sequential; throughput, 8 callers):\n"+
		"  direct HTTP                p50 %9v  p99 %9v  %7.0f calls/s\n"+
		"  bare go-sdk MCP            p50 %9v  p99 %9v  %7.0f calls/s  (in the benchmark's process)\n"+
		"  bare go-sdk MCP, process   p50 %9v  p99 %9v  %7.0f calls/s  (in a process of its own)\n"+
		"  through Crank              p50 %9v  p99 %9v  %7.0f calls/s  (stateful, events logged in etcd for resumption)\n"+
		"  Crank, no log              p50 %9v  p99 %9v  %7.0f calls/s  (event_store off)\n"+
		"  Crank/bare MCP process: p50 %.2fx (%.2fx without the log), p99 %.2fx, throughput %.2fx (%.2fx without the log)\n",
		p50(0), pct(lat[0], 99), rate[0], p50(1), pct(lat[1], 99), rate[1], p50(vBare), pct(lat[vBare], 99), rate[vBare],
		p50(vCrank), pct(lat[vCrank], 99), rate[vCrank], p50(vNoLog), pct(lat[vNoLog], 99), rate[vNoLog],
		float64(p50(vCrank))/float64(p50(vBare)), float64(p50(vNoLog))/float64(p50(vBare)),
		float64(pct(lat[vCrank], 99))/float64(pct(lat[vBare], 99)), rate[vCrank]/rate[vBare], rate[vNoLog]/rate[vBare])
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
	bareHTTP := httptest.NewServer(bareMCP(up.URL))
	defer bareHTTP.Close()
	bareProc, barePID := startBareMCPProcess(b, up.URL)

	vs := []struct {
		name string
		call run
	}{{"direct", directRun}, {"bare-mcp", mcpRun(bareHTTP.URL)}, {"crank", mcpRun(g.MCPURL)}, {"crank-no-log", mcpRun(gNoLog.MCPURL)},
		{"bare-mcp-process", mcpRun(bareProc)}}
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
		// The CPU time the server processes spent per chunk.
		cpu := startServerCPU(g, barePID)
		took := make([]time.Duration, len(vs))
		calls(b, chunks, func(i, n int) {
			start := time.Now()
			if err := vs[i].call(n, "0s", nil); err != nil {
				b.Fatalf("%s: %v", vs[i].name, err)
			}
			took[i] += time.Since(start)
		})
		cpu.report(b, "chunk", "crank/bare-process-cpu")
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
