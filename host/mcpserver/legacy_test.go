package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/internal/meshtest"
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

// meshPost posts body as mcp-mesh's consumers do (meshtest.Post).
func meshPost(t *testing.T, url, body string, hdr ...string) *http.Response {
	t.Helper()
	resp, err := meshtest.Post(url, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readMeshStream reads resp as mcp-mesh's consumers do, failing the test
// on an answer that is not an SSE stream (the Java consumer fails on it).
func readMeshStream(t *testing.T, resp *http.Response, token, id json.RawMessage, strict bool) meshtest.Stream {
	t.Helper()
	s := meshtest.ReadStream(resp, token, id, strict)
	if !strings.HasPrefix(s.ContentType, "text/event-stream") {
		t.Fatalf("Content-Type %q: the Java consumer fails on anything but text/event-stream", s.ContentType)
	}
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
	if resp.StatusCode != http.StatusOK || s.Final == nil || !strings.Contains(string(s.Final["result"]), `Ada`) ||
		resp.Header.Get(sessionIDHeader) != "" {
		t.Fatalf("bare tools/call get_user: %d %v", resp.StatusCode, s.Final)
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
		if len(s.Chunks) != 3 || s.Final == nil || s.After != 0 {
			t.Fatalf("%s consumer: %d chunks %q, final %v, %d after it", c.name, len(s.Chunks), s.Chunks, s.Final, s.After)
		}
		for i, p := range s.Progress {
			if p != float64(i) || !strings.Contains(s.Chunks[i], fmt.Sprintf("line %d", i)) {
				t.Errorf("%s consumer: chunk %d: progress %v, %q", c.name, i, p, s.Chunks[i])
			}
		}
		var res struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(s.Final["result"], &res) != nil || res.IsError || string(s.Final["id"]) != c.id {
			t.Errorf("%s consumer: final %s", c.name, s.Final["result"])
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
	if s.Final == nil || !strings.Contains(string(s.Final["result"]), `timed out after 1s, the bound its caller set (X-Mesh-Timeout)`) {
		t.Errorf("hang with X-Mesh-Timeout 2: %v", s.Final)
	}

	// X-Mesh-Timeout shortens a 30s window: it ends complete, by its
	// duration, with what it collected.
	resp = meshPost(t, url, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"long_logs","arguments":{},"_meta":{"progressToken":"t4"}}}`, "X-Mesh-Timeout", "3")
	s = readMeshStream(t, resp, json.RawMessage(`"t4"`), json.RawMessage(`4`), true)
	if len(s.Chunks) != 3 || s.Final == nil || strings.Contains(string(s.Final["result"]), `"isError":true`) ||
		!strings.Contains(string(s.Final["result"]), `window_duration`) {
		t.Errorf("long_logs with X-Mesh-Timeout 3: %d chunks, %s", len(s.Chunks), s.Final["result"])
	}
	var win struct {
		StructuredContent struct {
			Stats struct {
				DurationMS int64 `json:"duration_ms"`
			} `json:"stats"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(s.Final["result"], &win) != nil || win.StructuredContent.Stats.DurationMS >= 30000 {
		t.Errorf("long_logs with X-Mesh-Timeout 3 collected for its whole 30s: %s", s.Final["result"])
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
