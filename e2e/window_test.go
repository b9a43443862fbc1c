package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// streamUpstream is a loopback upstream with an endless SSE log stream
// (carrying personal data), a long-poll metrics endpoint and an
// OpenAI-compatible chat completions stream.
func streamUpstream(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		next, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		for i := next + 1; ; i++ {
			level := []string{"info", "info", "error"}[i%3]
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"level\":%q,\"msg\":\"line <%d>\",\"user\":{\"email\":\"u%d@example.com\"}}\n\n", i, i, level, i, i)
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("since"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"samples":[{"latency_ms":%d},{"latency_ms":%d}],"next":"%d","done":%t}`, 10*page+10, 10*page+20, page+1, page == 2)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string
			Stream   bool
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.Model != "tiny" || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			d := map[string]any{}
			if delta != "" {
				d["content"] = delta
			}
			var fr any
			if finish != "" {
				fr = finish
			}
			b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": fr}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		for _, part := range []string{"Echo: ", req.Messages[0].Content, "\nline two", " — done"} {
			chunk(part, "")
		}
		chunk("", "stop")
		fmt.Fprint(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func windowOperations(base string) string {
	return fmt.Sprintf(`
operations:
  - name: logs_window
    description: A window over a log stream.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 5000, max_items: 6}
    aggregation: {aggregation_mode: summary_plus_samples, group_by: $.level, sample_size: 1}
    safety: {redacted_paths: [$.user.email]}
    config: {method: GET, url: "%[1]s/logs"}
  - name: latency
    description: Latency statistics from a long-poll endpoint.
    adapter: rest
    mode: window
    transport_behavior: request_response
    limits: {window_duration_ms: 5000, poll_interval_ms: 10}
    aggregation: {aggregation_mode: stats, items_path: "$.samples[*]", value_path: $.latency_ms, cursor_path: $.next, done_path: $.done}
    config: {method: GET, url: "%[1]s/metrics", cursor_param: since}
  - name: chat
    description: An OpenAI-compatible chat stream.
    adapter: rest
    preset: openai_chat
    limits: {window_duration_ms: 10000}
    config: {method: POST, url: "%[1]s/v1/chat/completions", body_fields: {model: tiny, stream: true}}
`, base)
}

type progressLog struct {
	collected[*mcp.ProgressNotificationParams]
}

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.add(req.Params)
}

// take returns the notifications received, waiting up to 5s for n of
// them: the go-sdk client may run its handler after CallTool returned,
// although the server sent every notification before the response.
func (p *progressLog) take(n int) []*mcp.ProgressNotificationParams { return p.wait(n, 5*time.Second) }

func TestWindowGoSDK(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress progressLog
	cs := g.connectProgress(ctx, &progress)

	// The window tool is discoverable: its output schema, the cursor
	// argument and _meta saying how it streams.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != "logs_window" && tool.Name != "chat" {
			continue
		}
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		meta, _ := json.Marshal(tool.Meta)
		// The log stream continues after its events' ids; a chat's text
		// window does not continue, and takes no cursor.
		if strings.Contains(string(in), `"cursor"`) != (tool.Name == "logs_window") || !strings.Contains(string(out), `"window_complete"`) ||
			!strings.Contains(string(meta), `"io.crank/execution"`) {
			t.Errorf("%s: input %s output %s meta %s", tool.Name, in, out, meta)
		}
		if tool.Name == "chat" && !strings.Contains(string(meta), `"stream_type":"text"`) {
			t.Errorf("chat meta: %s", meta)
		}
	}

	// A window with a progress token: every item arrives as a progress
	// notification (0, 1, 2, ...), then the bounded result.
	params := &mcp.CallToolParams{Name: "logs_window", Arguments: map[string]any{}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Items          []map[string]any
		Summary        struct{ Count int }
		Truncated      bool `json:"truncated"`
		WindowComplete bool `json:"window_complete"`
		HasMore        bool `json:"has_more"`
		Cursor         string
		EndReason      string `json:"end_reason"`
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(sc, &w); err != nil || res.IsError {
		t.Fatalf("result %s: %v", sc, err)
	}
	if w.EndReason != "max_items" || !w.Truncated || w.WindowComplete || !w.HasMore || upstreamCursor(t, res) != "6" || w.Summary.Count != 6 || len(w.Items) != 2 {
		t.Fatalf("window: %s", sc)
	}
	got := progress.take(6)
	if len(got) != 6 {
		t.Fatalf("%d progress notifications, want 6", len(got))
	}
	for i, p := range got {
		if p.ProgressToken != "tok-1" || p.Progress != float64(i) || p.Total != 0 ||
			!strings.Contains(p.Message, fmt.Sprintf(`"n":%d`, i+1)) || !strings.Contains(p.Message, `"email":"[REDACTED]"`) ||
			!strings.Contains(p.Message, "<") {
			t.Fatalf("progress %d: %+v", i, p)
		}
	}
	if strings.Contains(string(sc), "@example.com") || strings.Contains(textOf(res), "@example.com") {
		t.Fatalf("a redacted value reached the result: %s", sc)
	}

	// The cursor continues the stream where the window ended.
	params = &mcp.CallToolParams{Name: "logs_window", Arguments: map[string]any{"cursor": w.Cursor}}
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("next window: %v %v", err, res)
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"n":7`) || upstreamCursor(t, res) != "12" {
		t.Fatalf("next window: %s", sc)
	}
	time.Sleep(100 * time.Millisecond)
	if p := progress.take(0); len(p) != 0 {
		t.Fatalf("progress without a token: %d notifications", len(p))
	}

	// A long-poll window.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "latency"})
	if err != nil || res.IsError {
		t.Fatalf("latency: %v %v", err, res)
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"summary":{"avg":25,"count":6,"max":40,"min":10,"non_numeric":0,"numeric":6,"p50":20,"p95":40,"sum":150}`) ||
		!strings.Contains(string(sc), `"end_reason":"done"`) {
		t.Fatalf("latency: %s", sc)
	}

	// An LLM text stream: each delta is a chunk; the result is the text.
	params = &mcp.CallToolParams{Name: "chat", Arguments: map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}
	params.SetProgressToken(7)
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("chat: %v %+v", err, res)
	}
	var chunks []string
	for _, p := range progress.take(4) {
		if p.ProgressToken != float64(7) {
			t.Fatalf("token %v (%T), want 7", p.ProgressToken, p.ProgressToken)
		}
		chunks = append(chunks, p.Message)
	}
	if strings.Join(chunks, "|") != "Echo: |hi|\nline two| — done" || textOf(res) != "Echo: hi\nline two — done" {
		t.Fatalf("chunks %q text %q", chunks, textOf(res))
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"summary":{"chunks":4,"finish_reason":"stop","text":"Echo: hi\nline two — done","usage":{"completion_tokens":4,"prompt_tokens":3}}`) {
		t.Fatalf("chat result: %s", sc)
	}
}

// sseMessages posts one JSON-RPC message and returns the response's
// content type and the JSON of each SSE event's data.
func sseMessages(t *testing.T, url, session string, body string) (string, string, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return ct, resp.Header.Get("Mcp-Session-Id"), []string{string(b)}
	}
	var out []string
	var data bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			out = append(out, data.String())
			data.Reset()
		}
	}
	return ct, resp.Header.Get("Mcp-Session-Id"), out
}

// TestWindowWireContract reads the raw Streamable HTTP answer of a window
// call, as mcp-mesh's consumers do, in a session and in stateless mode:
// text/event-stream, one notifications/progress per chunk with the token
// echoed in its JSON type, then the response, and nothing after it.
func TestWindowWireContract(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	for _, mode := range []string{"session", "stateless"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			handler := ""
			if mode == "stateless" {
				handler = "stateless"
			}
			g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: handler})
			session := ""
			if mode == "session" {
				_, sid, _ := sseMessages(t, g.MCPURL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
				if sid == "" {
					t.Fatal("no session id")
				}
				session = sid
				sseMessages(t, g.MCPURL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			for _, tok := range []string{`"6b0c3f0e-uuid"`, `1732950000000`} {
				id := `1732950000123`
				ct, _, msgs := sseMessages(t, g.MCPURL, session, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"chat","arguments":{"messages":[{"role":"user","content":"hi"}]},"_meta":{"progressToken":`+tok+`}}}`)
				if !strings.HasPrefix(ct, "text/event-stream") {
					t.Fatalf("content type %q: %v", ct, msgs)
				}
				want := []string{"Echo: ", "hi", "\nline two", " — done"}
				if len(msgs) != len(want)+1 {
					t.Fatalf("%d messages, want %d progress + 1 response: %q", len(msgs), len(want), msgs)
				}
				for i, m := range msgs[:len(want)] {
					// Compared field by field as raw JSON: the token keeps
					// its JSON type, progress counts from 0, no total.
					var n struct {
						JSONRPC, Method string
						Params          map[string]json.RawMessage
					}
					chunk, _ := json.Marshal(want[i])
					if err := json.Unmarshal([]byte(m), &n); err != nil || n.JSONRPC != "2.0" || n.Method != "notifications/progress" ||
						len(n.Params) != 3 || string(n.Params["progressToken"]) != tok || string(n.Params["progress"]) != strconv.Itoa(i) ||
						string(n.Params["message"]) != string(chunk) {
						t.Fatalf("message %d: %s, want chunk %s token %s", i, m, chunk, tok)
					}
				}
				var final struct {
					ID     json.RawMessage
					Result struct {
						Content []struct{ Text string }
						IsError bool
					}
				}
				if err := json.Unmarshal([]byte(msgs[len(msgs)-1]), &final); err != nil || string(final.ID) != id ||
					final.Result.IsError || final.Result.Content[0].Text != "Echo: hi\nline two — done" {
					t.Fatalf("final message: %s", msgs[len(msgs)-1])
				}
			}
		})
	}
}

// TestWindowTypeScriptClient drives a window tool with the official
// TypeScript SDK, collecting its progress notifications.
func TestWindowTypeScriptClient(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL)})
	script := `[
		{"op":"callTool","name":"logs_window","arguments":{},"progress":true},
		{"op":"callTool","name":"chat","arguments":{"messages":[{"role":"user","content":"hi"}]},"progress":true}
	]`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "client.mjs"), g.MCPURL, script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var run struct {
		Steps []struct {
			OK     bool
			Error  any
			Result struct {
				Content           []struct{ Text string }
				StructuredContent map[string]any
				IsError           bool
				Progress          []struct {
					Progress float64
					Message  string
				}
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	logs, chat := run.Steps[0], run.Steps[1]
	if !logs.OK || logs.Result.IsError || len(logs.Result.Progress) != 6 || logs.Result.StructuredContent["end_reason"] != "max_items" {
		t.Fatalf("logs window (the SDK validates structuredContent against the output schema): %s", out)
	}
	for i, p := range logs.Result.Progress {
		if p.Progress != float64(i) || !strings.Contains(p.Message, `"level"`) || strings.Contains(p.Message, "@example.com") {
			t.Fatalf("progress %d: %+v", i, p)
		}
	}
	var chunks []string
	for _, p := range chat.Result.Progress {
		chunks = append(chunks, p.Message)
	}
	if !chat.OK || strings.Join(chunks, "") != "Echo: hi\nline two — done" || chat.Result.Content[0].Text != "Echo: hi\nline two — done" {
		t.Fatalf("chat: %s", out)
	}
}
