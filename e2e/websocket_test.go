package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/demo"
)

// wsWindow is a window result's structuredContent.
type wsWindow struct {
	Items          []map[string]any `json:"items"`
	Summary        map[string]any   `json:"summary"`
	Truncated      bool             `json:"truncated"`
	WindowComplete bool             `json:"window_complete"`
	Cursor         string           `json:"cursor"`
	EndReason      string           `json:"end_reason"`
	Gaps           []string         `json:"gaps"`
	Partial        []string         `json:"partial"`
	Error          string           `json:"error"`
}

func callWSWindow(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, wsWindow) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var w wsWindow
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, b)
	}
	return res, w
}

// TestWebSocketDemo runs demo/websocket.yaml against the demo feed of
// `make run` (demo/websocket.go) on loopback: windows of alerts filtered
// by severity, continued by cursor, the alert session family, and
// telemetry statistics.
func TestWebSocketDemo(t *testing.T) {
	t.Parallel()
	feed := httptest.NewServer(demo.NewFeedHandler())
	t.Cleanup(feed.Close)
	demoOps, err := os.ReadFile(filepath.Join(repoRoot, "demo", "websocket.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ops := strings.ReplaceAll(string(demoOps), "127.0.0.1:8081", strings.TrimPrefix(feed.URL, "http://"))
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Contains(names, "alert_window") || !slices.Contains(names, "telemetry_latency") {
		t.Fatalf("tools = %v", names)
	}

	res, w := callWSWindow(ctx, t, cs, "alert_window", map[string]any{"min_severity": "warning"})
	if res.IsError || w.EndReason != "window_duration" || !w.WindowComplete || w.Cursor == "" || len(w.Items) == 0 {
		t.Fatalf("alert_window: %+v", w)
	}
	counts, _ := w.Summary["counts"].(map[string]any)
	if counts["info"] != nil || counts["warning"] == nil && counts["critical"] == nil {
		t.Errorf("min_severity warning: counts %v", counts)
	}
	last := 0.0
	for _, it := range w.Items {
		if it["type"] != "alert" || it["severity"] == "info" {
			t.Errorf("item %v", it)
		}
		last = max(last, it["seq"].(float64))
	}

	// The cursor continues after the window: the feed resumes there.
	res, w2 := callWSWindow(ctx, t, cs, "alert_window", map[string]any{"cursor": w.Cursor})
	if res.IsError || len(w2.Items) == 0 {
		t.Fatalf("alert_window with cursor: %+v", w2)
	}
	for _, it := range w2.Items {
		if it["seq"].(float64) <= last {
			t.Errorf("seq %v repeats the first window (up to %v)", it["seq"], last)
		}
	}

	// The session family: alerts gathered in the background, handed out
	// by polls in order, until stop.
	id := callOK(t, cs, "alert_feed_start", map[string]any{"min_severity": "critical"})["session_id"].(string)
	var seqs []float64
	cursor := ""
	waitFor(t, "alerts in the session", func() bool {
		args := map[string]any{"session_id": id}
		if cursor != "" {
			args["cursor"] = cursor
		}
		p := callOK(t, cs, "alert_feed_poll", args)
		cursor, _ = p["cursor"].(string)
		for _, it := range p["items"].([]any) {
			a := it.(map[string]any)
			if a["severity"] != "critical" {
				t.Fatalf("session item %v", a)
			}
			seqs = append(seqs, a["seq"].(float64))
		}
		return len(seqs) >= 3
	})
	if !slices.IsSorted(seqs) {
		t.Errorf("session items out of order: %v", seqs)
	}
	callOK(t, cs, "alert_feed_stop", map[string]any{"session_id": id})

	res, w3 := callWSWindow(ctx, t, cs, "telemetry_latency", map[string]any{"host": "web-1"})
	if res.IsError || w3.EndReason != "window_duration" {
		t.Fatalf("telemetry_latency: %+v", w3)
	}
	if n, _ := w3.Summary["count"].(float64); n < 1 || w3.Summary["p95"] == nil {
		t.Errorf("telemetry_latency summary: %v", w3.Summary)
	}
}

// wsTestFeed is a loopback WebSocket feed for the window cuts: after the
// subscribe message it sends numbered items, every `every`, forever; a
// connection may be dropped after drop items. It reports the messages
// the client sent and how each connection was closed.
type wsTestFeed struct {
	url    string
	events chan string
}

func newWSTestFeed(t *testing.T) *wsTestFeed {
	f := &wsTestFeed{events: make(chan string, 1024)}
	var mu sync.Mutex
	conns := map[string]int{} // per query: a feed of its own
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		mu.Lock()
		conns[r.URL.RawQuery]++
		conn := conns[r.URL.RawQuery]
		mu.Unlock()
		q := r.URL.Query()
		every, _ := time.ParseDuration(q.Get("every"))
		drop, _ := strconv.Atoi(q.Get("drop"))
		pad := strings.Repeat("x", atoiOr(q.Get("pad"), 0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			defer cancel()
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					f.events <- fmt.Sprintf("closed %d", ws.CloseStatus(err))
					return
				}
				f.events <- string(b)
			}
		}()
		for i := 1; ; i++ {
			if drop > 0 && conn == 1 && i > drop {
				return // dropped without a close frame
			}
			b, _ := json.Marshal(map[string]any{"seq": i, "conn": conn, "pad": pad})
			if c.Write(ctx, ws.MessageText, b) != nil {
				<-ctx.Done()
				return
			}
			if every > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(every):
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	f.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return f
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// waitEvent returns the feed's next event that starts with prefix.
func (f *wsTestFeed) waitEvent(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	for {
		select {
		case e := <-f.events:
			if strings.HasPrefix(e, prefix) {
				return e
			}
		case <-ctx.Done():
			t.Fatalf("the feed never saw %q", prefix)
			return ""
		}
	}
}

// TestWebSocketWindowCuts collects windows from a loopback feed through
// the gateway: cut by max_items, max_bytes and the window's duration,
// and a dropped connection that is reopened with a gap in the result.
// After each window the feed sees the unsubscribe and a normal close. A
// session over the feed is polled several times and stopped, and an async
// job collects a window in the background.
func TestWebSocketWindowCuts(t *testing.T) {
	t.Parallel()
	f := newWSTestFeed(t)
	entry := func(name, query, limits string) string {
		return fmt.Sprintf(`
  - name: %s
    description: A window of the test feed.
    adapter: websocket
    mode: window
    limits: {%s}
    aggregation: {aggregation_mode: raw_items}
    config:
      url: "%s/feed?%s"
      subscribe: {op: subscribe, topic: "{{topic}}"}
      unsubscribe: {op: unsubscribe, topic: "{{topic}}"}
      id_path: $.seq
      reconnect: {initial_delay_ms: 1, max_delay_ms: 5}
`, name, limits, f.url, query)
	}
	ops := "operations:" +
		entry("by_items", "every=0s", "max_items: 50, window_duration_ms: 30000") +
		entry("by_bytes", "every=0s&pad=100", "max_bytes: 2000, window_duration_ms: 30000") +
		entry("by_duration", "every=20ms", "window_duration_ms: 300, max_items: 100000") +
		entry("dropped", "every=0s&drop=3", "max_items: 6, window_duration_ms: 30000") +
		strings.Replace(strings.Replace(entry("followed", "every=10ms", "max_items: 1000"),
			"mode: window", "mode: session\n    transport_behavior: server_stream", 1),
			"    aggregation: {aggregation_mode: raw_items}\n", "", 1) +
		strings.Replace(entry("collected", "every=1ms", "max_items: 20, window_duration_ms: 30000"),
			"mode: window", "mode: async_job\n    transport_behavior: server_stream", 1)
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	// The derived input schema asks for the subscription's topic.
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		in, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(in), `"session_id"`) || strings.Contains(string(in), `"job_id"`) {
			continue // a family's poll, stop, status, result or cancel
		}
		if !strings.Contains(string(in), `"topic"`) || !strings.Contains(string(in), `"required":["topic"]`) {
			t.Errorf("%s input schema: %s", tool.Name, in)
		}
	}

	for _, tc := range []struct {
		tool, end string
		check     func(w wsWindow) bool
	}{
		// No cursor: the subscription does not send {{cursor}}, so a
		// cursor could not continue the feed.
		{"by_items", "max_items", func(w wsWindow) bool { return len(w.Items) == 50 && w.Truncated && w.Cursor == "" }},
		{"by_bytes", "max_bytes", func(w wsWindow) bool { return len(w.Items) > 0 && len(w.Items) < 20 && w.Truncated }},
		{"by_duration", "window_duration", func(w wsWindow) bool { return len(w.Items) > 0 && w.WindowComplete }},
		{"dropped", "max_items", func(w wsWindow) bool {
			return len(w.Items) == 6 && w.Truncated && len(w.Gaps) == 1 &&
				strings.Contains(w.Gaps[0], "messages sent meanwhile may have been missed") &&
				w.Items[2]["conn"] != w.Items[3]["conn"]
		}},
	} {
		res, w := callWSWindow(ctx, t, cs, tc.tool, map[string]any{"topic": "t-" + tc.tool})
		if res.IsError || w.EndReason != tc.end || !tc.check(w) {
			t.Errorf("%s: %s %+v", tc.tool, textOf(res), w)
		}
		// The subscription was made with the argument, and ended with an
		// unsubscribe and a normal close (the dropped feed: on its second
		// connection).
		f.waitEvent(ctx, t, `{"op":"subscribe","topic":"t-`+tc.tool+`"}`)
		f.waitEvent(ctx, t, `{"op":"unsubscribe","topic":"t-`+tc.tool+`"}`)
		if e := f.waitEvent(ctx, t, "closed"); e != fmt.Sprintf("closed %d", ws.StatusNormalClosure) {
			t.Errorf("%s: the window ended with %q, want a normal close", tc.tool, e)
		}
	}

	// A session over the same feed: several polls, each continuing from
	// the last cursor without repeating or skipping an item; stop
	// unsubscribes and closes.
	id := callOK(t, cs, "followed_start", map[string]any{"topic": "t-session"})["session_id"].(string)
	f.waitEvent(ctx, t, `{"op":"subscribe","topic":"t-session"}`)
	var seqs []float64
	cursor, polls := "", 0
	waitFor(t, "three polls with items", func() bool {
		p := callOK(t, cs, "followed_poll", map[string]any{"session_id": id, "cursor": cursor})
		cursor, _ = p["cursor"].(string)
		items := p["items"].([]any)
		for _, it := range items {
			seqs = append(seqs, it.(map[string]any)["seq"].(float64))
		}
		if len(items) > 0 {
			polls++
		}
		return polls >= 3
	})
	for i, s := range seqs {
		if s != float64(i+1) {
			t.Fatalf("session items: %v", seqs)
		}
	}
	callOK(t, cs, "followed_stop", map[string]any{"session_id": id})
	f.waitEvent(ctx, t, `{"op":"unsubscribe","topic":"t-session"}`)
	if e := f.waitEvent(ctx, t, "closed"); e != fmt.Sprintf("closed %d", ws.StatusNormalClosure) {
		t.Errorf("session: stop ended the connection with %q, want a normal close", e)
	}

	// An async job collects a window in the background.
	job := callOK(t, cs, "collected_start", map[string]any{"topic": "t-job"})["job_id"].(string)
	waitFor(t, "the job to finish", func() bool {
		return callOK(t, cs, "collected_status", map[string]any{"job_id": job})["status"] != "running"
	})
	r := callOK(t, cs, "collected_result", map[string]any{"job_id": job})
	b, _ := json.Marshal(r["result"])
	var w wsWindow
	if err := json.Unmarshal(b, &w); err != nil || len(w.Items) != 20 || w.EndReason != "max_items" {
		t.Errorf("job result: %v %s", err, b)
	}
	f.waitEvent(ctx, t, `{"op":"unsubscribe","topic":"t-job"}`)
	if e := f.waitEvent(ctx, t, "closed"); e != fmt.Sprintf("closed %d", ws.StatusNormalClosure) {
		t.Errorf("job: the window ended the connection with %q, want a normal close", e)
	}
}
