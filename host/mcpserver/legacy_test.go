package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/store/storetest"
)

// legacyOps: a unary tool, windows over an SSE log stream (three lines,
// then nothing), and a unary tool whose upstream never answers within its
// 30s timeout.
const legacyOps = viewOps + `  - name: long_logs
    description: Watch the log stream for half a minute.
    adapter: rest
    mode: window
    transport_behavior: server_stream
    limits: {window_duration_ms: 30000, max_items: 100}
    config: {method: GET, url: "%[1]s/logs"}
  - name: hang
    description: An upstream that never answers.
    adapter: rest
    timeout: 30s
    input_schema: {type: object}
    config: {method: GET, url: "%[1]s/hang"}
`

// legacyEndpoint serves legacyOps on a stateful endpoint of opts.
func legacyEndpoint(t *testing.T, refuse bool) string {
	t.Helper()
	_, st := storetest.Embedded(t)
	up := viewUpstream(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	ops := strings.ReplaceAll(fmt.Sprintf(legacyOps, up.URL), up.URL+"/hang", hang.URL+"/hang")
	opts := testOptions("default")
	opts.RefuseSessionlessLegacy = refuse
	_, url := serveEndpoint(t, newTestHost(t, ops, st, nil), st, opts)
	return url
}

// meshPost posts body as mcp-mesh's consumers do: no initialize, no
// Mcp-Session-Id, no MCP-Protocol-Version, an X-Mesh-Timeout.
func meshPost(t *testing.T, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Mesh-Timeout", "30")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// meshStream is what mcp-mesh's stream consumers read of a response
// (the rules of shared/spec/streaming-wire-contract.md): the chunks of
// the progress notifications that carry their token, and the final
// message whose id is theirs.
type meshStream struct {
	chunks   []string
	progress []float64
	tokens   []json.RawMessage
	final    map[string]json.RawMessage
	after    int // progress notifications after the final message
}

// readMeshStream reads an SSE response as the Java consumer
// (McpHttpClient.streamTool) does, with the TypeScript consumer's strict
// id equality when strict: data lines with or without a space, joined
// with \n; event: and id: lines ignored; data that is not JSON skipped;
// the chunk from params.message, else params.data; the end at the first
// message whose id equals the request's.
func readMeshStream(t *testing.T, resp *http.Response, token, id json.RawMessage, strict bool) meshStream {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q: the Java consumer fails on anything but text/event-stream", ct)
	}
	var s meshStream
	var data []string
	dispatch := func() {
		if len(data) == 0 {
			return
		}
		var msg map[string]json.RawMessage
		raw := strings.Join(data, "\n")
		data = nil
		if json.Unmarshal([]byte(raw), &msg) != nil {
			return
		}
		if string(msg["method"]) == `"notifications/progress"` {
			var p struct {
				ProgressToken json.RawMessage `json:"progressToken"`
				Progress      float64         `json:"progress"`
				Message       *string         `json:"message"`
				Data          *string         `json:"data"`
			}
			if json.Unmarshal(msg["params"], &p) != nil || !bytes.Equal(p.ProgressToken, token) {
				return
			}
			if s.final != nil {
				s.after++
				return
			}
			chunk := p.Data
			if p.Message != nil {
				chunk = p.Message
			}
			if chunk != nil {
				s.chunks = append(s.chunks, *chunk)
				s.progress = append(s.progress, p.Progress)
				s.tokens = append(s.tokens, p.ProgressToken)
			}
			return
		}
		got, ok := msg["id"]
		if !ok || s.final != nil {
			return
		}
		same := bytes.Equal(got, id)
		if !strict && !same { // Java: the same number as a string matches too
			same = strings.Trim(string(got), `"`) == strings.Trim(string(id), `"`)
		}
		if same {
			s.final = msg
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			dispatch()
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	dispatch()
	return s
}

// A session-less legacy call (issue 37): a bare tools/call with no
// session and no 2026-07-28 version is served as a one-shot stateless
// call instead of 400, a window's chunks streamed as progress the way
// mcp-mesh's Java and TypeScript consumers read them, the final response
// last; a stale session ID still gets 404, X-Mesh-Timeout bounds a unary
// call's timeout, and sessionless_legacy refuse answers 400 as before.
// Before the change every such request got 400 "Mcp-Session-Id header
// is required".
func TestSessionlessLegacyCalls(t *testing.T) {
	t.Parallel()
	url := legacyEndpoint(t, false)

	// A unary tool, as meshctl calls it.
	resp := meshPost(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"id":2},"name":"get_user"}}`)
	s := readMeshStream(t, resp, nil, json.RawMessage(`1`), true)
	if resp.StatusCode != http.StatusOK || s.final == nil || !strings.Contains(string(s.final["result"]), `Ada`) ||
		resp.Header.Get(sessionIDHeader) != "" {
		t.Fatalf("bare tools/call get_user: %d %v", resp.StatusCode, s.final)
	}

	// A window, read as the Java consumer (a UUID token, an epoch-millis
	// id) and as the TypeScript one (an integer token, a string id).
	for _, c := range []struct {
		name      string
		token, id string
		strict    bool
	}{
		{"java", `"6f1c2a9e-6d0b-4c44-9a51-2f0c1f6c9d11"`, `1764660000123`, false},
		{"typescript", `7`, `"req-7"`, true},
	} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"recent_logs","arguments":{},"_meta":{"progressToken":%s}}}`, c.id, c.token)
		resp := meshPost(t, url, body)
		s := readMeshStream(t, resp, json.RawMessage(c.token), json.RawMessage(c.id), c.strict)
		if len(s.chunks) != 3 || s.final == nil || s.after != 0 {
			t.Fatalf("%s consumer: %d chunks %q, final %v, %d after it", c.name, len(s.chunks), s.chunks, s.final, s.after)
		}
		for i, p := range s.progress {
			if p != float64(i) || !strings.Contains(s.chunks[i], fmt.Sprintf("line %d", i)) {
				t.Errorf("%s consumer: chunk %d: progress %v, %q", c.name, i, p, s.chunks[i])
			}
		}
		var res struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(s.final["result"], &res) != nil || res.IsError || string(s.final["id"]) != c.id {
			t.Errorf("%s consumer: final %s", c.name, s.final["result"])
		}
	}

	// A stale or unknown session ID is the session protocol's: 404.
	resp = meshPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sessionIDHeader, "no-such-session")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown Mcp-Session-Id: %d, want 404", resp.StatusCode)
	}

	// X-Mesh-Timeout bounds a unary call's 30s timeout: 2s less the one
	// the answer needs to get back.
	resp = meshPost(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"hang","arguments":{}}}`, "X-Mesh-Timeout", "2")
	s = readMeshStream(t, resp, nil, json.RawMessage(`3`), true)
	if s.final == nil || !strings.Contains(string(s.final["result"]), `timed out after 1s, the bound its caller set (X-Mesh-Timeout)`) {
		t.Errorf("hang with X-Mesh-Timeout 2: %v", s.final)
	}

	// X-Mesh-Timeout shortens a 30s window: it ends complete, by its
	// duration, with what it collected.
	resp = meshPost(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"long_logs","arguments":{},"_meta":{"progressToken":"t4"}}}`, "X-Mesh-Timeout", "3")
	s = readMeshStream(t, resp, json.RawMessage(`"t4"`), json.RawMessage(`4`), true)
	if len(s.chunks) != 3 || s.final == nil || strings.Contains(string(s.final["result"]), `"isError":true`) ||
		!strings.Contains(string(s.final["result"]), `window_duration`) {
		t.Errorf("long_logs with X-Mesh-Timeout 3: %d chunks, %s", len(s.chunks), s.final["result"])
	}
	var win struct {
		StructuredContent struct {
			Stats struct {
				DurationMS int64 `json:"duration_ms"`
			} `json:"stats"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(s.final["result"], &win) != nil || win.StructuredContent.Stats.DurationMS >= 30000 {
		t.Errorf("long_logs with X-Mesh-Timeout 3 collected for its whole 30s: %s", s.final["result"])
	}

	// An endpoint that refuses legacy calls answers 400, saying so.
	refusing := legacyEndpoint(t, true)
	resp = meshPost(t, refusing, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"id":2},"name":"get_user"}}`)
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b.String(), "sessionless_legacy refuse") {
		t.Errorf("refused legacy call: %d %s", resp.StatusCode, b.String())
	}
}

func TestCallBound(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{"": "0s", "30": "29s", "1": "1s", "0.5": "1s", "abc": "0s", "-3": "0s", "1e9": "0s", "2.5": "1.5s"} {
		h := http.Header{}
		h.Set("X-Mesh-Timeout", v)
		if got := callBound(h).String(); got != want {
			t.Errorf("X-Mesh-Timeout %q: %s, want %s", v, got, want)
		}
	}
}
