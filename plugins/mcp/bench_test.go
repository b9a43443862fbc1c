package mcp

import (
	"context"
	"net/http"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// BenchmarkCall compares a tools/call through the adapter (over the
// adapter protocol, as the gateway makes it) with the same call made
// directly by a go-sdk client, against one loopback upstream in the same
// run: Adapter/Direct is the adapter's overhead per call.
func BenchmarkCall(b *testing.B) {
	up := newHTTPUpstream(b, false)
	ctx := context.Background()
	b.Run("Direct", func(b *testing.B) {
		client := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := client.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: up.srv.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		params := &gomcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Adapter", func(b *testing.B) {
		a := newAdapter()
		defer a.pool.closeAll()
		h := adaptertest.New(b, a)
		c := adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "tool": "echo"}, Args: `{"text": "hi"}`, Timeout: 5 * time.Second}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ue, err := h.Invoke(ctx, c); err != nil || ue != nil {
				b.Fatal(ue, err)
			}
		}
	})
	// Eight concurrent callers per CPU over one upstream session each way: the
	// adapter's connections to the upstream must not throttle them.
	b.Run("DirectParallel", func(b *testing.B) {
		pooled := http.DefaultTransport.(*http.Transport).Clone()
		pooled.MaxIdleConnsPerHost = 128
		client := gomcp.NewClient(&gomcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := client.Connect(ctx, &gomcp.StreamableClientTransport{Endpoint: up.srv.URL, HTTPClient: &http.Client{Transport: pooled}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		params := &gomcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.CallTool(ctx, params); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("AdapterParallel", func(b *testing.B) {
		a := newAdapter()
		defer a.pool.closeAll()
		h := adaptertest.New(b, a)
		c := adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "tool": "echo"}, Args: `{"text": "hi"}`, Timeout: 5 * time.Second}
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ue, err := h.Invoke(ctx, c); err != nil || ue != nil {
					b.Error(ue, err)
					return
				}
			}
		})
	})
}
