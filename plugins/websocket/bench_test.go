package websocket_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// benchFeed sends ?n= copies of a small JSON message as fast as it can,
// then closes normally; ?n=0 sends nothing and holds the connection.
func benchFeed(b *testing.B) string {
	msg := []byte(`{"type":"tick","seq":12345,"host":"web-1","cpu":41.5,"latency_ms":37,"msg":"` + strings.Repeat("x", 64) + `"}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			defer cancel()
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		if n == 0 {
			<-ctx.Done()
			return
		}
		for range n {
			if c.Write(ctx, ws.MessageText, msg) != nil {
				return
			}
		}
		c.Close(ws.StatusNormalClosure, "")
	}))
	b.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// BenchmarkWindowThroughput: messages per second the adapter delivers as
// stream items (over in-process gRPC, as the host reads them), against
// reading the same server directly with coder/websocket in the same run.
func BenchmarkWindowThroughput(b *testing.B) {
	url := benchFeed(b)
	h := newHarness(b)
	ctx := context.Background()
	n := max(b.N, 100)

	start := time.Now()
	c, _, err := ws.Dial(ctx, fmt.Sprintf("%s/?n=%d", url, n), nil)
	if err != nil {
		b.Fatal(err)
	}
	got := 0
	for {
		if _, _, err := c.Read(ctx); err != nil {
			break
		}
		got++
	}
	direct := time.Since(start)
	if got != n {
		b.Fatalf("direct: %d of %d messages", got, n)
	}

	b.ResetTimer()
	start = time.Now()
	events, ue, err := h.Stream(ctx, adaptertest.Call{Config: map[string]any{
		"url": fmt.Sprintf("%s/?n=%d", url, n), "filter": "@.type == 'tick'", "id_path": "$.seq",
	}}, 0)
	adapter := time.Since(start)
	b.StopTimer()
	if err != nil || ue != nil || len(events) != n+1 || events[n].Kind != client.EventEnd {
		b.Fatalf("adapter: %d events, %v %v", len(events), ue, err)
	}
	b.ReportMetric(float64(n)/direct.Seconds(), "direct_msgs/s")
	b.ReportMetric(float64(n)/adapter.Seconds(), "adapter_msgs/s")
	b.ReportMetric(adapter.Seconds()/direct.Seconds(), "x_direct_time")
}

// BenchmarkLiveSessionMemory: heap and goroutines per open subscription
// held by the adapter (with its gRPC stream), against a bare coder/websocket
// connection to the same server, measured in the same run (both include
// the loopback server's side). One measurement of 100 each, whatever b.N.
func BenchmarkLiveSessionMemory(b *testing.B) {
	const k = 100
	url := benchFeed(b) + "/?n=0"
	h := newHarness(b)
	openDirect := func(ctx context.Context) {
		c, _, err := ws.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			_, _, _ = c.Read(ctx)
			c.CloseNow()
		}()
	}
	openAdapter := func(ctx context.Context) {
		st, err := h.Client.Stream(ctx, &sdk.Request{
			Operation: sdk.Operation{Config: []byte(`{"url":"` + url + `","subscribe":{"op":"sub"}}`)},
		})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _, _ = st.Recv() }()
	}
	// Warm up: pools and lazily started parts are not per session.
	measure(b, 10, openDirect)
	measure(b, 10, openAdapter)
	direct, dg := measure(b, k, openDirect)
	adapter, ag := measure(b, k, openAdapter)
	b.ReportMetric(direct, "direct_B/conn")
	b.ReportMetric(adapter, "adapter_B/session")
	b.ReportMetric(adapter/direct, "x_direct_mem")
	b.ReportMetric(dg, "direct_goroutines/conn")
	b.ReportMetric(ag, "adapter_goroutines/session")
}

// measure opens k of something and returns the heap bytes and goroutines
// per one once they are all up, then closes them.
func measure(b *testing.B, k int, open func(ctx context.Context)) (float64, float64) {
	ctx, cancel := context.WithCancel(context.Background())
	before, g0 := heap()
	for range k {
		open(ctx)
	}
	settle()
	after, g1 := heap()
	cancel()
	settle()
	return float64(after-before) / float64(k), float64(g1-g0) / float64(k)
}

// settle waits until the goroutine count stops changing: connections are
// up, or closed.
func settle() {
	last := -1
	for g := runtime.NumGoroutine(); g != last; g = runtime.NumGoroutine() {
		last = g
		time.Sleep(100 * time.Millisecond)
	}
}

func heap() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}
