package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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
func fedUpstream() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
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
// included) and allocation per call, and Crank's ratios to the floor.
func BenchmarkFederation(b *testing.B) {
	up := httptest.NewServer(fedUpstream())
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
	warmUp(b, vs, 50)
	var lat [][]time.Duration
	var rate []float64
	var use []serverUse
	var calls int
	b.Run("latency", func(b *testing.B) {
		lat = reportedLatency(b, vs)
	})
	b.Run("throughput", func(b *testing.B) {
		rate, use = reportedRate(b, vs)
		calls = b.N
	})
	if lat == nil || rate == nil {
		return
	}
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
