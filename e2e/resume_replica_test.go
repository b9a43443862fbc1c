package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store/storetest"
)

// A client drops a window's SSE stream on replica A after two chunks and
// resumes it on replica B with Last-Event-ID, as a client behind a load
// balancer without affinity would: B answers every remaining event once,
// from the event log in etcd, and the response last (resuming again
// while A has not stored the rest yet).
func TestResumeOnAnotherReplica(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := streamUpstream(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: windowOperations(up.URL), Crank: fmt.Sprintf(`etcd {
			%s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	onA := &rawMCP{t: t, url: a.MCPURL}
	onA.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp := onA.do(ctx, http.MethodPost, fmt.Sprintf(chatCall, "10", `"tok"`), nil)
	rd := newSSEReader(resp.Body)
	var seen []sseEvent
	for len(seen) < 3 { // the priming event and two chunks
		ev, ok := rd.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if !ev.Comment {
			seen = append(seen, ev)
		}
	}
	cancel()
	resp.Body.Close()

	onB := &rawMCP{t: t, url: b.MCPURL, version: onA.version, session: onA.session}
	// B answers what the event log holds; a stream it ends before the
	// response (A has not stored the rest yet) is resumed again from its
	// last event, as the priming event's retry field tells a client to.
	var out []sseEvent
	last := seen[len(seen)-1].ID
	waitFor(t, "the resumed stream on B", func() bool {
		resp := onB.do(context.Background(), http.MethodGet, "", map[string]string{"Last-Event-ID": last, "Content-Type": ""})
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusConflict {
			return false // A has not noticed the drop yet
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("resume on B: %s %s", resp.Status, body)
		}
		rd := newSSEReader(resp.Body)
		for {
			ev, ok := rd.next()
			if !ok {
				return false
			}
			if ev.Comment || ev.Data == "" {
				continue
			}
			out, last = append(out, ev), ev.ID
			if strings.Contains(ev.Data, `"id":10`) {
				return true
			}
		}
	})
	all := append(seen[1:], out...)
	ids := map[string]bool{}
	for i, ev := range all {
		if ev.ID == "" || ids[ev.ID] {
			t.Fatalf("event %d has id %q (duplicate or missing): %+v", i, ev.ID, all)
		}
		ids[ev.ID] = true
		if i < len(chatChunks) && !strings.Contains(ev.Data, `"notifications/progress"`) {
			t.Fatalf("event %d: %s, want progress", i, ev.Data)
		}
	}
	if len(all) != len(chatChunks)+1 || !strings.Contains(all[len(all)-1].Data, `"text":"Echo: hi\nline two — done"`) {
		t.Fatalf("events across A and B: %+v", all)
	}
}

// interruptedPair starts replicas a and b on one etcd, a unable to store
// any stream's events (its session quota is below what one stream's log
// takes), as a replica killed before its writer stored them leaves them
// unstored, and a balancer sending to a.
func interruptedPair(t *testing.T) (up *upstream, a *gateway, lb *balancer) {
	t.Helper()
	etcd := storetest.NewServer(t)
	up = newUpstream(t)
	opts := func(name, handler string) gatewayOptions {
		return gatewayOptions{Operations: opsFile(t, up, "30s", ""), Handler: handler, Crank: fmt.Sprintf(`etcd {
			%s
			owner_ttl 2s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a = startGateway(t, opts("a", "event_max_bytes 512\n\tquotas {\n\t\tmax_event_bytes_per_session 512\n\t}"))
	b := startGateway(t, opts("b", ""))
	lb = &balancer{sse: make(chan struct{}, 1)}
	lb.to(a)
	// When a slow call's SSE stream is open on a, its priming event read:
	// the balancer turns to b, and a is killed.
	go func() {
		<-up.slowStarted
		select { // an earlier stream's (initialize's) signal
		case <-lb.sse:
		default:
		}
		select {
		case <-lb.sse:
		case <-time.After(time.Second): // read before the upstream saw the call
		}
		lb.to(b)
		_ = a.cmd.Process.Kill()
	}()
	return up, a, lb
}

// A call in flight on replica A when A is killed: the go-sdk client
// resumes its stream on B, which cannot replay what A never stored. B
// answers the resume with the call's JSON-RPC error — the stream recorded
// the call's id when it opened — so only that call fails: the client's MCP
// session goes on, and its next call through B succeeds.
func TestRefusedReplayFailsOnlyTheCall(t *testing.T) {
	t.Parallel()
	_, _, lb := interruptedPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := connectThrough(t, ctx, lb)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("the interrupted call: %v, want its error", err)
	}
	if got, err := getUser(ctx, cs, 2); err != nil || !strings.Contains(got, "User 2") {
		t.Errorf("the next call on the same MCP session: %q, %v", got, err)
	}
}

// The same with the TypeScript SDK's client, through a proxy that follows
// the balancer.
func TestRefusedReplayFailsOnlyTheCallTS(t *testing.T) {
	t.Parallel()
	_, _, lb := interruptedPair(t)
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "balancer" },
		Transport:     lb,
		FlushInterval: -1,
	})
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := tsClient(ctx, proxy.URL+"/mcp", `[{"op":"callTool","name":"slow","timeoutMs":60000},
		{"op":"callTool","name":"get_user","arguments":{"id":2}}]`)
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Steps []struct {
			OK     bool
			Result struct{ StructuredContent map[string]any }
			Error  struct{ Message string }
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 2 {
		t.Fatalf("client.mjs: %s: %v", out, err)
	}
	if s := run.Steps[0]; s.OK || !strings.Contains(s.Error.Message, "interrupted") {
		t.Errorf("the interrupted call: %+v, want its error", s)
	}
	if s := run.Steps[1]; !s.OK || s.Result.StructuredContent["name"] != "User 2" {
		t.Errorf("the next call on the same MCP session: %+v", s)
	}
}
