package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUnaryREST measures a unary REST tool call through Crank (go-sdk
// client → Caddy → crank handler → host → rest adapter process → upstream)
// against two baselines measured in the same run: calling the upstream
// directly, and a bare go-sdk MCP server (no Caddy, no adapter process)
// whose tool calls the upstream in-process. It prints p50 latencies,
// throughputs and their ratios.
func BenchmarkUnaryREST(b *testing.B) {
	up := newUpstream(b)
	g := startGateway(b, gatewayOptions{Operations: opsFile(b, up, "5s", "")})
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
	cs := g.connect(ctx)
	viaCrank := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %s", textOf(res))
		}
		return err
	}

	// A bare MCP server whose tool calls the upstream itself: the floor any
	// MCP gateway built on the go-sdk pays.
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	bare.AddTool(&mcp.Tool{Name: "get_user", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			resp, err := httpc.Get(up.URL + "/users/1")
			if err != nil {
				return nil, err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}},
				StructuredContent: json.RawMessage(body)}, err
		})
	bareHTTP := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil))
	defer bareHTTP.Close()
	bareCS, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: bareHTTP.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bareCS.Close()
	viaBare := func() error {
		_, err := bareCS.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
		return err
	}

	p50 := map[string]time.Duration{}
	rate := map[string]float64{}
	for _, c := range []struct {
		name string
		call func() error
	}{{"direct", direct}, {"bare-mcp", viaBare}, {"crank", viaCrank}} {
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
	if p50["direct"] > 0 && p50["bare-mcp"] > 0 && p50["crank"] > 0 && rate["crank"] > 0 {
		fmt.Printf("\nunary REST tool call, same run (p50 latency, sequential; throughput, 8 callers):\n"+
			"  direct HTTP        p50 %9v  %7.0f calls/s\n"+
			"  bare go-sdk MCP    p50 %9v  %7.0f calls/s\n"+
			"  through Crank      p50 %9v  %7.0f calls/s\n"+
			"  Crank adds %v p50 over the direct call (%.1fx), %v over a bare MCP server (%.2fx);\n"+
			"  throughput ratio Crank/direct %.3f, Crank/bare MCP %.2f (goal: ≤150µs added p50)\n",
			p50["direct"], rate["direct"], p50["bare-mcp"], rate["bare-mcp"], p50["crank"], rate["crank"],
			p50["crank"]-p50["direct"], float64(p50["crank"])/float64(p50["direct"]),
			p50["crank"]-p50["bare-mcp"], float64(p50["crank"])/float64(p50["bare-mcp"]),
			rate["crank"]/rate["direct"], rate["crank"]/rate["bare-mcp"])
	}
}
