package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store"
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
	// last event, as the priming event's retry field tells a client to;
	// 409 while A has not noticed the drop yet.
	out := resumeUntilAnswer(t, onB, "the resumed stream on B", seen[len(seen)-1].ID, true)
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
	return killedPair(t, "event_max_bytes 512\n\tquotas {\n\t\tmax_event_bytes_per_session 512\n\t}")
}

// killedPair starts replicas a (with the extra handler lines aHandler)
// and b on one etcd, and a balancer sending to a that turns to b and
// kills a once a slow call's SSE stream is open on a, its priming event
// read.
func killedPair(t *testing.T, aHandler string) (up *upstream, a *gateway, lb *balancer) {
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
	a = startGateway(t, opts("a", aHandler))
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
	steps := slowThenGetUserTS(t, lb)
	if s := steps[0]; s.OK || !strings.Contains(s.Error.Message, "interrupted") {
		t.Errorf("the interrupted call: %+v, want its error", s)
	}
	if s := steps[1]; !s.OK || s.Result.StructuredContent["name"] != "User 2" {
		t.Errorf("the next call on the same MCP session: %+v", s)
	}
}

// slowThenGetUserTS runs the TypeScript client through a proxy that
// follows lb: a call of slow (the one a killed replica interrupts), then
// get_user on the same MCP session; it returns the two steps.
func slowThenGetUserTS(t *testing.T, lb *balancer) []tsStep {
	t.Helper()
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "balancer" },
		Transport:     lb,
		FlushInterval: -1,
	})
	t.Cleanup(proxy.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	steps := tsSteps(ctx, t, proxy.URL+"/mcp", `[{"op":"callTool","name":"slow","timeoutMs":60000},
		{"op":"callTool","name":"get_user","arguments":{"id":2}}]`)
	if len(steps) != 2 {
		t.Fatalf("client.mjs ran %d steps, want 2", len(steps))
	}
	return steps
}

// A call in flight on replica A when A is killed, whose stream A stored
// (its priming event, with the call's id): the client resumes on B, which
// has every stored event and waits for the rest. Once A's owner lease is
// gone nothing will answer the call, so B answers it with the retryable
// "interrupted" error rather than ending the resume empty again and
// again — only that call fails, and the session goes on.
func TestUnansweredCallOfDeadReplicaFails(t *testing.T) {
	t.Parallel()
	_, _, lb := killedPair(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := connectThrough(t, ctx, lb)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || !strings.Contains(werr.Message, "interrupted") || !strings.Contains(string(werr.Data), `"retryable":true`) {
		t.Errorf("the call of the killed replica: %v, want the retryable interrupted error", err)
	}
	if o := classifyCall("slow", err); !o.retryable || failureCode(o) != "interrupted" {
		t.Errorf("the load counts %v as %s (retryable %t)", err, failureCode(o), o.retryable)
	}
	if got, err := getUser(ctx, cs, 2); err != nil || !strings.Contains(got, "User 2") {
		t.Errorf("the next call on the same MCP session: %q, %v", got, err)
	}
}

// The same with the TypeScript SDK's client, which resumes a stream that
// ended without its answer for as long as it runs: it gets the error in
// time for the next step.
func TestUnansweredCallOfDeadReplicaFailsTS(t *testing.T) {
	t.Parallel()
	if !tsClientAvailable(t) {
		t.Skip("the TypeScript client is not installed (make ts-deps)")
	}
	_, _, lb := killedPair(t, "")
	steps := slowThenGetUserTS(t, lb)
	if s := steps[0]; s.OK || !strings.Contains(s.Error.Message, "interrupted") || s.Error.Data["retryable"] != true {
		t.Errorf("the call of the killed replica: %+v, want the retryable interrupted error", s)
	}
	if s := steps[1]; !s.OK || s.Result.StructuredContent["name"] != "User 2" {
		t.Errorf("the next call on the same MCP session: %+v", s)
	}
}

// A chat stream cut mid-way: replica A relayed two chunks as progress and
// stored them, then died. A resume on B from the first chunk replays the
// second, then — A gone, the call unanswered — answers the call with the
// retryable "interrupted" error: every event once, and an end.
func TestStreamOfDeadReplicaInterruptedMidway(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{"one", "two"} {
			fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", part)
			w.(http.Flusher).Flush()
		}
		select { // the rest never comes while A lives
		case <-r.Context().Done():
		case <-release:
		}
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: windowOperations(up.URL), Crank: fmt.Sprintf(`etcd {
			%s
			owner_ttl 2s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	onA := &rawMCP{t: t, url: a.MCPURL}
	onA.initialize("2025-11-25")

	resp := onA.do(context.Background(), http.MethodPost, fmt.Sprintf(chatCall, "10", `"tok"`), nil)
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
	// Once A stored both chunks, it dies.
	last := seen[len(seen)-1].ID
	sep := strings.LastIndex(last, "_")
	stream, n := last[:sep], last[sep+1:]
	st := storetest.Open(t, etcd.Embedded(), store.EtcdConfig{})
	waitFor(t, "A to store the chunks", func() bool {
		info, err := st.EventStream(context.Background(), onA.session, stream)
		return err == nil && strconv.FormatUint(info.Next-1, 10) == n
	})
	a.kill()
	resp.Body.Close()

	onB := &rawMCP{t: t, url: b.MCPURL, version: onA.version, session: onA.session}
	// The client lost the second chunk.
	out := resumeUntilAnswer(t, onB, "the call's answer on B", seen[1].ID, false)
	if len(out) != 2 || !strings.Contains(out[0].Data, `"message":"two"`) {
		t.Fatalf("events replayed on B: %+v, want the second chunk, then the answer", out)
	}
	var answer struct {
		Error struct {
			Message string
			Data    struct{ Retryable bool }
		}
	}
	if err := json.Unmarshal([]byte(out[1].Data), &answer); err != nil || !strings.Contains(answer.Error.Message, "interrupted") || !answer.Error.Data.Retryable {
		t.Fatalf("the answer on B: %s (%v), want the retryable interrupted error", out[1].Data, err)
	}
}

// A POST whose SSE stream breaks before its first event (its replica died
// before even the priming event left) leaves the TypeScript SDK nothing to
// resume, and its call would wait for its timeout: client.mjs fails that
// call as retryable at once, and the next one goes on.
func TestTSStreamBrokenBeforeFirstEvent(t *testing.T) {
	t.Parallel()
	if !tsClientAvailable(t) {
		t.Skip("the TypeScript client is not installed (make ts-deps)")
	}
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "30s", "")})
	target, _ := url.Parse(g.MCPURL)
	target.Path = "" // the proxy's requests keep their own
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && strings.Contains(string(body), `"name":"slow"`) {
			// The headers of an SSE answer, then the connection drops.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	}))
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
			Error  struct {
				Message, Source string
				Data            map[string]any
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 2 {
		t.Fatalf("client.mjs: %s: %v", out, err)
	}
	if s := run.Steps[0]; s.OK || s.Error.Source != "stream" || s.Error.Data["retryable"] != true {
		t.Errorf("the call whose stream broke: %+v, want a retryable stream error", s)
	}
	if o := classify(errors.New(run.Steps[0].Error.Message)); !o.retryable || failureCode(o) != "stream-broken" {
		t.Errorf("the load counts %q as %s (retryable %t)", run.Steps[0].Error.Message, failureCode(o), o.retryable)
	}
	if s := run.Steps[1]; !s.OK || s.Result.StructuredContent["name"] != "User 2" {
		t.Errorf("the next call on the same MCP session: %+v", s)
	}
}

// resumeUntilAnswer resumes a stream on on from the event id from, again
// from the last event it got each time the stream ends, until the answer
// to call 10 comes, and returns the events with data it got. A 409 (the
// replica serving the stream has not noticed the client left) is resumed
// again when conflictRetried, else fails t as any status but 200 does.
func resumeUntilAnswer(t *testing.T, on *rawMCP, what, from string, conflictRetried bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	waitFor(t, what, func() bool {
		resp := on.do(context.Background(), http.MethodGet, "", map[string]string{"Last-Event-ID": from, "Content-Type": ""})
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusConflict && conflictRetried {
			return false
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %s %s", what, resp.Status, body)
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
			out, from = append(out, ev), ev.ID
			if strings.Contains(ev.Data, `"id":10`) {
				return true
			}
		}
	})
	return out
}
