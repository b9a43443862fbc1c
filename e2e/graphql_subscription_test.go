package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startGraphQLReference starts e2e/graphqlws/server.mjs, the reference
// GraphQL subscription server (graphql-js, graphql-ws, graphql-sse from
// its lockfile), on a free loopback port and returns its address. It
// skips the test when the server's node_modules are missing (fails it on
// CI): `make graphql-deps` installs them.
func startGraphQLReference(t *testing.T) string {
	t.Helper()
	return startNodeServer(t, "graphqlws", "graphql-ws", "graphql-deps")
}

// graphqlSubscriptionOps are the subscription tools over the reference
// server: a unary entry whose subscriptions become window tools, windows
// over both transports, wrong credentials on both, a session over SSE
// and a job over the WebSocket.
func graphqlSubscriptionOps(addr string) string {
	return strings.ReplaceAll(`
version: 1
operations:
  - name: gql
    adapter: graphql
    config:
      endpoint: "http://ADDR/graphql"
      tool_prefix: gql_
      query: |
        # Counts down from a number, then completes.
        subscription countdown($from: Int!) { countdown(from: $from) { n label } }
        # Ticks forever.
        subscription ticks($every: Int) { ticks(every: $every) { n label } }
      subscriptions:
        connection_init: {token: s3cret}
  - name: tick_window
    description: Five ticks over graphql-transport-ws.
    adapter: graphql
    mode: window
    limits: {window_duration_ms: 20000, max_items: 5}
    config:
      endpoint: "http://ADDR/graphql"
      query: "subscription ticks { ticks(every: 10) { n label } }"
      subscriptions: {connection_init: {token: s3cret}}
  - name: tick_window_sse
    description: Five ticks over GraphQL over SSE.
    adapter: graphql
    mode: window
    limits: {window_duration_ms: 20000, max_items: 5}
    config:
      endpoint: "http://ADDR/graphql"
      headers: {Authorization: "Bearer s3cret"}
      query: "subscription ticks { ticks(every: 10) { n label } }"
      subscriptions: {transport: sse, url: "http://ADDR/graphql/stream"}
  - name: flaky_window
    description: Tick 2's label fails.
    adapter: graphql
    mode: window
    limits: {window_duration_ms: 20000, max_items: 3}
    config:
      endpoint: "http://ADDR/graphql"
      query: "subscription flaky { flaky { n label } }"
      subscriptions: {connection_init: {token: s3cret}}
  - name: broken_window
    description: One tick, then the source breaks (an error message).
    adapter: graphql
    mode: window
    limits: {window_duration_ms: 20000}
    config:
      endpoint: "http://ADDR/graphql"
      query: "subscription broken { broken { n label } }"
      subscriptions: {connection_init: {token: s3cret}}
  - name: wrong_token
    adapter: graphql
    mode: window
    config:
      endpoint: "http://ADDR/graphql"
      query: "subscription ticks { ticks { n } }"
      subscriptions: {connection_init: {token: nope}}
  - name: wrong_token_sse
    adapter: graphql
    mode: window
    config:
      endpoint: "http://ADDR/graphql"
      headers: {Authorization: "Bearer nope"}
      query: "subscription ticks { ticks { n } }"
      subscriptions: {transport: sse, url: "http://ADDR/graphql/stream"}
  - name: tick_feed
    description: Ticks in the background, over SSE.
    adapter: graphql
    mode: session
    limits: {max_items: 100, idle_timeout_ms: 60000}
    config:
      endpoint: "http://ADDR/graphql"
      headers: {Authorization: "Bearer s3cret"}
      query: "subscription ticks { ticks(every: 20) { n label } }"
      subscriptions: {transport: sse, url: "http://ADDR/graphql/stream"}
  - name: tick_job
    description: Ticks collected by a job.
    adapter: graphql
    mode: async_job
    transport_behavior: server_stream
    limits: {window_duration_ms: 60000, max_items: 20}
    input_schema: {type: object, properties: {every: {type: integer}}}
    config:
      endpoint: "http://ADDR/graphql"
      query: "subscription ticks($every: Int) { ticks(every: $every) { n label } }"
      subscriptions: {connection_init: {token: s3cret}}
`, "ADDR", addr)
}

// TestGraphQLSubscriptionsGoSDK runs GraphQL subscriptions against the
// reference servers (graphql-ws, graphql-sse) through the gateway with the
// go-sdk client: windows over both transports with progress, a server
// that completes, one that never does (bounded by the window), errors in
// events, a refused subscription, wrong credentials on both transports,
// a session and a job.
func TestGraphQLSubscriptionsGoSDK(t *testing.T) {
	t.Parallel()
	addr := startGraphQLReference(t)
	g := startGateway(t, gatewayOptions{Operations: graphqlSubscriptionOps(addr), Handler: "agent_header X-Agent-Id"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := g.connectAs(ctx, "agent-1")

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, ","); got != "broken_window,flaky_window,gql_countdown,gql_ticks,tick_feed_poll,tick_feed_start,tick_feed_stop,"+
		"tick_job_cancel,tick_job_result,tick_job_start,tick_job_status,tick_window,tick_window_sse,wrong_token,wrong_token_sse" {
		t.Fatalf("tools: %s", got)
	}

	// A server that never completes, bounded by the window: five items,
	// then the gateway completes the subscription.
	for _, tool := range []string{"tick_window", "tick_window_sse"} {
		res, w := callWSWindow(ctx, t, cs, tool, nil)
		if res.IsError || w.EndReason != "max_items" || len(w.Items) != 5 || w.Items[0]["ticks"].(map[string]any)["n"] != float64(1) {
			t.Fatalf("%s: %s %+v", tool, textOf(res), w)
		}
	}
	// A server that completes: the window ends with it.
	res, w := callWSWindow(ctx, t, cs, "gql_countdown", map[string]any{"from": 3})
	if res.IsError || w.EndReason != "upstream_end" || len(w.Items) != 3 || w.Items[2]["countdown"].(map[string]any)["n"] != float64(1) {
		t.Fatalf("gql_countdown: %s %+v", textOf(res), w)
	}
	// An event with errors: its data is an item, counted as partial, not
	// as a gap (nothing was missed), and the window says which field
	// failed.
	res, w = callWSWindow(ctx, t, cs, "flaky_window", nil)
	if res.IsError || len(w.Items) != 3 || len(w.Gaps) != 0 || !strings.Contains(strings.Join(w.Partial, " "), "label service down (at flaky.label)") {
		t.Fatalf("flaky_window: %s %+v", textOf(res), w)
	}
	// A server that errors mid-stream (its source throws: graphql-ws
	// sends an error message): the window keeps what came and says why
	// it ended.
	res, w = callWSWindow(ctx, t, cs, "broken_window", nil)
	if !res.IsError || w.EndReason != "upstream_error" || len(w.Items) != 1 ||
		!strings.Contains(textOf(res), "the GraphQL server ended the subscription with 1 error: the feed broke") {
		t.Fatalf("broken_window: %s %+v", textOf(res), w)
	}
	// A subscription the server refuses (onSubscribe): a clear error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "gql_countdown", Arguments: map[string]any{"from": -1}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "refused the subscription with 1 error: from must not be negative [BAD_USER_INPUT]") {
		t.Fatalf("refused: %v %s", err, textOf(res))
	}
	// Wrong credentials, on both transports: refused clearly, not retried.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "wrong_token", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "4403 (forbidden: the server refused ConnectionInit") {
		t.Fatalf("wrong_token: %v %s", err, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "wrong_token_sse", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "unauthorized [UNAUTHENTICATED]") {
		t.Fatalf("wrong_token_sse: %v %s", err, textOf(res))
	}

	// A session: start, polls in order, stop.
	id := callOK(t, cs, "tick_feed_start", nil)["session_id"].(string)
	var seen []float64
	cursor := ""
	waitFor(t, "ticks in the session", func() bool {
		args := map[string]any{"session_id": id}
		if cursor != "" {
			args["cursor"] = cursor
		}
		p := callOK(t, cs, "tick_feed_poll", args)
		cursor, _ = p["cursor"].(string)
		for _, it := range p["items"].([]any) {
			seen = append(seen, it.(map[string]any)["ticks"].(map[string]any)["n"].(float64))
		}
		return len(seen) >= 3
	})
	if !slices.IsSorted(seen) || seen[0] != 1 {
		t.Errorf("session ticks: %v", seen)
	}
	callOK(t, cs, "tick_feed_stop", map[string]any{"session_id": id})

	// A job: start, status, result; another one cancelled mid-run.
	job := callOK(t, cs, "tick_job_start", map[string]any{"every": 5})["job_id"].(string)
	waitFor(t, "the job to finish", func() bool {
		return callOK(t, cs, "tick_job_status", map[string]any{"job_id": job})["status"] == "succeeded"
	})
	r := callOK(t, cs, "tick_job_result", map[string]any{"job_id": job})
	if b, _ := json.Marshal(r["result"]); r["ready"] != true || !strings.Contains(string(b), `"end_reason":"max_items"`) || strings.Count(string(b), `"ticks"`) != 20 {
		t.Errorf("job result: %v", r)
	}
	slow := callOK(t, cs, "tick_job_start", map[string]any{"every": 1000})["job_id"].(string)
	if c := callOK(t, cs, "tick_job_cancel", map[string]any{"job_id": slow}); c["status"] != "canceling" && c["status"] != "canceled" {
		t.Errorf("cancel: %v", c)
	}
	waitFor(t, "the job to be canceled", func() bool {
		return callOK(t, cs, "tick_job_status", map[string]any{"job_id": slow})["status"] == "canceled"
	})
}

// TestGraphQLSubscriptionsProgress: a window of a subscription sends
// each item as a progress notification to a client that asks.
func TestGraphQLSubscriptionsProgress(t *testing.T) {
	t.Parallel()
	addr := startGraphQLReference(t)
	g := startGateway(t, gatewayOptions{Operations: graphqlSubscriptionOps(addr)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress progressLog
	cs := g.connectProgress(ctx, &progress)
	params := &mcp.CallToolParams{Name: "tick_window_sse", Arguments: map[string]any{}}
	params.SetProgressToken("gql-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("tick_window_sse: %v %s", err, textOf(res))
	}
	if got := progress.take(5); len(got) < 5 || !strings.Contains(got[0].Message, `"n":1`) {
		var msgs []string
		for _, p := range got {
			msgs = append(msgs, p.Message)
		}
		t.Errorf("progress: %v", msgs)
	}
}

// TestGraphQLSubscriptionsTypeScript: the official TypeScript SDK checks
// the window results of both transports against the tools' output
// schemas.
func TestGraphQLSubscriptionsTypeScript(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	addr := startGraphQLReference(t)
	g := startGateway(t, gatewayOptions{Operations: graphqlSubscriptionOps(addr)})
	out := runTSClient(t, g.MCPURL, `[
		{"op":"callTool","name":"tick_window","arguments":{}},
		{"op":"callTool","name":"tick_window_sse","arguments":{}},
		{"op":"callTool","name":"gql_countdown","arguments":{"from":2}},
		{"op":"callTool","name":"wrong_token","arguments":{}}
	]`)
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				StructuredContent struct {
					Items     []map[string]any `json:"items"`
					EndReason string           `json:"end_reason"`
				}
				Content []struct{ Text string }
				IsError bool
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 4 {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	for i, want := range []struct {
		items int
		end   string
	}{{5, "max_items"}, {5, "max_items"}, {2, "upstream_end"}} {
		st := run.Steps[i]
		if !st.OK || st.Result.IsError || len(st.Result.StructuredContent.Items) != want.items || st.Result.StructuredContent.EndReason != want.end {
			t.Errorf("step %d: %s", i, out)
		}
	}
	if st := run.Steps[3]; !st.OK || !st.Result.IsError || len(st.Result.Content) == 0 || !strings.Contains(st.Result.Content[0].Text, "4403") {
		t.Errorf("wrong_token: %s", out)
	}
}

// demoGraphQLSubscription runs the demo's GraphQL subscription tools
// (demo/graphql.yaml) in the running demo: the window over
// graphql-transport-ws, summarised by kind, and the session over GraphQL
// over SSE.
func demoGraphQLSubscription(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, w := callWSWindow(ctx, t, cs, "book_events_window", map[string]any{"genre": "SCIENCE"})
	counts, _ := w.Summary["counts"].(map[string]any)
	if res.IsError || w.EndReason != "window_duration" || counts["BORROWED"] == nil {
		t.Fatalf("book_events_window: %s %+v", textOf(res), w)
	}
	// Book 3's rating fails: its events are delivered, counted as
	// partial, not as gaps (nothing was missed).
	res, w = callWSWindow(ctx, t, cs, "book_events_window", map[string]any{"genre": "HISTORY"})
	if st, _ := res.StructuredContent.(map[string]any)["stats"].(map[string]any); res.IsError || len(w.Gaps) > 0 || st["partial"] == nil {
		t.Fatalf("book_events_window HISTORY: %s %+v", textOf(res), w)
	}
	id := callOK(t, cs, "book_events_start", map[string]any{"genre": "FICTION"})["session_id"].(string)
	// The session's items are the window's: the events themselves. The
	// first arrive as the upstream sends them: when a poll first finds
	// items, the upstream (an event every 200ms, seq counting them) has
	// sent few more since the first of them — not the 6-9 s burst of an
	// SSE response the upstream never flushed.
	var kinds []string
	var seqs []float64
	waitFor(t, "library events in the session", func() bool {
		items := callOK(t, cs, "book_events_poll", map[string]any{"session_id": id})["items"].([]any)
		for _, it := range items {
			ev := it.(map[string]any)
			if ev["book"].(map[string]any)["genre"] != "FICTION" {
				t.Fatalf("session item %v", ev)
			}
			kinds = append(kinds, ev["kind"].(string))
			seqs = append(seqs, ev["seq"].(float64))
		}
		if len(seqs) > 0 && len(seqs) == len(items) && seqs[len(seqs)-1]-seqs[0] >= 10 {
			t.Fatalf("the first poll with items got events %v at once: the upstream's events were held back", seqs)
		}
		return len(kinds) >= 2
	})
	callOK(t, cs, "book_events_stop", map[string]any{"session_id": id})
}
