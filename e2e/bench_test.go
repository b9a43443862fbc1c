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

// bareMCP is a bare go-sdk MCP server whose get_user tool calls the
// upstream itself: the floor any MCP gateway built on the go-sdk pays.
func bareMCP(upstream string) http.Handler {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
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
// and returns its URL.
func startBareMCPProcess(b *testing.B, upstream string) string {
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
	return strings.TrimSpace(line)
}

// BenchmarkUnaryREST measures a unary REST tool call through Crank (go-sdk
// client → Caddy → crank handler → host → rest adapter process → upstream)
// against baselines measured in the same run: calling the upstream
// directly, a bare go-sdk MCP server (no Caddy, no adapter process) whose
// tool calls the upstream in-process, the same bare server in a process
// of its own (paying the process boundaries a gateway pays), and Crank
// without its SSE event log (event_store off). It prints p50 latencies,
// throughputs and their ratios.
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
	bareProc := startBareMCPProcess(b, up.URL)

	p50 := map[string]time.Duration{}
	rate := map[string]float64{}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"direct", direct},
		{"bare-mcp", mcpCall(connect(bareHTTP.URL))},
		{"bare-mcp-process", mcpCall(connect(bareProc))},
		{"crank", mcpCall(g.connect(ctx))},
		{"crank-no-log", mcpCall(gNoLog.connect(ctx))},
	} {
		b.Run(c.name+"/latency", func(b *testing.B) {
			for range 50 { // warm up connections and the adapter
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
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
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
		b.Run(c.name+"/throughput", func(b *testing.B) {
			var once sync.Once
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.call(); err != nil {
						once.Do(func() { b.Error(err) })
						return
					}
				}
			})
			rate[c.name] = float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rate[c.name], "calls/s")
		})
	}
	for _, k := range []string{"direct", "bare-mcp", "bare-mcp-process", "crank", "crank-no-log"} {
		if p50[k] == 0 || rate[k] == 0 {
			return // a -bench filter skipped some
		}
	}
	fmt.Printf("\nunary REST tool call, same run (p50 latency, sequential; throughput, 8 callers):\n"+
		"  direct HTTP                p50 %9v  %7.0f calls/s\n"+
		"  bare go-sdk MCP            p50 %9v  %7.0f calls/s  (in the benchmark's process)\n"+
		"  bare go-sdk MCP, process   p50 %9v  %7.0f calls/s  (in a process of its own)\n"+
		"  through Crank              p50 %9v  %7.0f calls/s  (stateful, events logged in etcd for resumption)\n"+
		"  Crank, no log              p50 %9v  %7.0f calls/s  (event_store off)\n"+
		"  Crank adds %v p50 over the direct call (%.1fx), %v over a bare MCP server (%.2fx), %v over one in its own process (%.2fx; %.2fx without the log);\n"+
		"  throughput ratio Crank/direct %.3f, Crank/bare MCP %.2f, Crank/bare MCP process %.2f (%.2f without the log) (goal: ≤150µs added p50)\n",
		p50["direct"], rate["direct"], p50["bare-mcp"], rate["bare-mcp"], p50["bare-mcp-process"], rate["bare-mcp-process"],
		p50["crank"], rate["crank"], p50["crank-no-log"], rate["crank-no-log"],
		p50["crank"]-p50["direct"], float64(p50["crank"])/float64(p50["direct"]),
		p50["crank"]-p50["bare-mcp"], float64(p50["crank"])/float64(p50["bare-mcp"]),
		p50["crank"]-p50["bare-mcp-process"], float64(p50["crank"])/float64(p50["bare-mcp-process"]),
		float64(p50["crank-no-log"])/float64(p50["bare-mcp-process"]),
		rate["crank"]/rate["direct"], rate["crank"]/rate["bare-mcp"], rate["crank"]/rate["bare-mcp-process"],
		rate["crank-no-log"]/rate["bare-mcp-process"])
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

	// A bare go-sdk server streaming the upstream itself: the floor for a
	// gateway built on the go-sdk.
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&mcp.Tool{Name: "stream", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				N    int
				Pace string
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			resp, err := httpc.Get(fmt.Sprintf("%s/stream?n=%d&pace=%s", up.URL, args.N, args.Pace))
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
	bareHTTP := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil))
	defer bareHTTP.Close()

	rate := map[string]float64{}
	p50 := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		call run
	}{{"direct", directRun}, {"bare-mcp", mcpRun(bareHTTP.URL)}, {"crank", mcpRun(g.MCPURL)}, {"crank-no-log", mcpRun(gNoLog.MCPURL)}} {
		// One benchmark iteration is one chunk, streamed in calls of up to
		// the given size.
		calls := func(b *testing.B, size int, pace string, lat *[]time.Duration) {
			for left := b.N; left > 0; left -= size {
				if err := c.call(min(left, size), pace, lat); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(c.name+"/throughput", func(b *testing.B) {
			if err := c.call(chunks, "0s", nil); err != nil { // warm up
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			calls(b, chunks, "0s", nil)
			rate[c.name] = float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rate[c.name], "chunks/s")
		})
		b.Run(c.name+"/latency", func(b *testing.B) {
			var lat []time.Duration
			calls(b, 200, "1ms", &lat)
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs/chunk")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs/chunk")
		})
	}
	if rate["direct"] > 0 && rate["crank"] > 0 && rate["bare-mcp"] > 0 && rate["crank-no-log"] > 0 {
		fmt.Printf("\nstreaming tool, %d-chunk SSE upstream, same run (throughput unpaced; latency upstream write → client handler, paced 1ms):\n"+
			"  direct HTTP        %9.0f chunks/s  p50 %8v/chunk\n"+
			"  bare go-sdk MCP    %9.0f chunks/s  p50 %8v/chunk\n"+
			"  through Crank      %9.0f chunks/s  p50 %8v/chunk  (stateful, events logged in etcd for resumption)\n"+
			"  Crank, no log      %9.0f chunks/s  p50 %8v/chunk  (event_store off)\n"+
			"  throughput ratio Crank/direct %.3f, Crank/bare MCP %.2f, no log/bare MCP %.2f; Crank adds %v per chunk over direct, %v over a bare MCP server (%v without the log)\n",
			chunks, rate["direct"], p50["direct"], rate["bare-mcp"], p50["bare-mcp"], rate["crank"], p50["crank"], rate["crank-no-log"], p50["crank-no-log"],
			rate["crank"]/rate["direct"], rate["crank"]/rate["bare-mcp"], rate["crank-no-log"]/rate["bare-mcp"],
			p50["crank"]-p50["direct"], p50["crank"]-p50["bare-mcp"], p50["crank-no-log"]-p50["bare-mcp"])
	}
}
