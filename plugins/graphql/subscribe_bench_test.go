package graphql_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
	"github.com/crankmcp/crank/plugins/websocket"
)

// benchEvent is one event's data, the same bytes for every feed.
var benchEvent = `{"bookAdded":{"id":"12345","title":"` + strings.Repeat("x", 64) + `","genre":"FICTION"}}`

// benchFeeds serves ?n= events as fast as it can, then ends normally:
// /gql over graphql-transport-ws (next messages, then complete), /sse
// over GraphQL over SSE (next events, then complete), /ws as plain
// WebSocket messages of the same data (then a normal close) for the
// websocket adapter.
func benchFeeds(b *testing.B) string {
	next := []byte(`{"id":"1","type":"next","payload":{"data":` + benchEvent + `}}`)
	mux := http.NewServeMux()
	mux.HandleFunc("/gql", func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, &ws.AcceptOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		_, _, _ = c.Read(ctx) // connection_init
		_ = c.Write(ctx, ws.MessageText, []byte(`{"type":"connection_ack"}`))
		_, _, _ = c.Read(ctx) // subscribe
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		for range n {
			if c.Write(ctx, ws.MessageText, next) != nil {
				return
			}
		}
		_ = c.Write(ctx, ws.MessageText, []byte(`{"id":"1","type":"complete"}`))
		time.Sleep(time.Second) // the client closes
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/event-stream")
		ev := []byte("event: next\ndata: {\"data\":" + benchEvent + "}\n\n")
		for range n {
			if _, err := w.Write(ev); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("event: complete\ndata:\n\n"))
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		for range n {
			if c.Write(ctx, ws.MessageText, []byte(benchEvent)) != nil {
				return
			}
		}
		_ = c.Close(ws.StatusNormalClosure, "")
	})
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv.URL
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSubscriptionIngest: events per CPU-second that a GraphQL
// subscription delivers as stream items (over in-process gRPC, as the
// host reads them), over graphql-transport-ws and over GraphQL over SSE,
// beside the websocket adapter reading the same data as plain WebSocket
// messages, in one run. The CPU is the whole process's (the loopback
// server's share included, alike for all three); x_ws_cpu is the GraphQL
// adapter's CPU per event over the websocket adapter's.
func BenchmarkSubscriptionIngest(b *testing.B) {
	base := benchFeeds(b)
	wsBase := "ws" + strings.TrimPrefix(base, "http")
	gh := adaptertest.New(b, graphql.New())
	wh := adaptertest.New(b, websocket.New())
	ctx := context.Background()
	n := max(b.N, 1000)
	tool := func(sub map[string]any) adaptertest.Call {
		tools, diags, err := gh.Expand(ctx, adaptertest.Call{Config: map[string]any{"endpoint": base + "/graphql", "schema": "testdata/library.graphqls",
			"query": "subscription BookAdded { bookAdded { id title genre } }", "subscriptions": sub}})
		if err != nil || len(diags) > 0 {
			b.Fatal(diags, err)
		}
		return adaptertest.Call{Config: tools[0].Config}
	}
	runs := []struct {
		name string
		h    *adaptertest.Harness
		call adaptertest.Call
	}{
		{"graphql_ws", gh, tool(map[string]any{"url": fmt.Sprintf("%s/gql?n=%d", wsBase, n)})},
		{"graphql_sse", gh, tool(map[string]any{"transport": "sse", "url": fmt.Sprintf("%s/sse?n=%d", base, n)})},
		{"websocket", wh, adaptertest.Call{Config: map[string]any{"url": fmt.Sprintf("%s/ws?n=%d", wsBase, n)}}},
	}
	perCPU := map[string]float64{}
	b.ResetTimer()
	for _, r := range runs {
		cpu0, start := cpuTime(b), time.Now()
		events, ue, err := r.h.Stream(ctx, r.call, 0)
		cpu, wall := cpuTime(b)-cpu0, time.Since(start)
		if err != nil || ue != nil || len(events) != n+1 || events[n].Kind != client.EventEnd {
			b.Fatalf("%s: %d events, %v %v", r.name, len(events), ue, err)
		}
		perCPU[r.name] = float64(n) / cpu.Seconds()
		b.ReportMetric(perCPU[r.name], r.name+"_items/cpu_s")
		b.ReportMetric(float64(n)/wall.Seconds(), r.name+"_items/s")
	}
	b.StopTimer()
	b.ReportMetric(perCPU["websocket"]/perCPU["graphql_ws"], "x_ws_cpu")
	b.ReportMetric(perCPU["websocket"]/perCPU["graphql_sse"], "x_ws_cpu_sse")
}
