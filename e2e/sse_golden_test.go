package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var updateSSEGolden = flag.Bool("update-sse", false, "rewrite e2e/testdata/sse/*.golden with the current responses")

// Normalised parts of a golden response: SSE event ids (<stream>_<index>,
// the stream part is random), the window's duration and the server version.
var (
	eventIDs      = regexp.MustCompile(`(?m)^id: [A-Z2-7]+_(\d+)$`)
	durations     = regexp.MustCompile(`"duration_ms":\d+`)
	serverVersion = regexp.MustCompile(`(serverInfo":\{[^}]*"version":)"[^"]*"`)
)

func normaliseSSE(b string) string {
	b = eventIDs.ReplaceAllString(b, "id: STREAM_$1")
	b = durations.ReplaceAllString(b, `"duration_ms":0`)
	return serverVersion.ReplaceAllString(b, `$1"VERSION"`)
}

// TestSSEGolden compares the raw bytes of a streaming tool call's answer —
// status, content type, SSE framing, progress notifications and the final
// response — with golden files, in each mode and protocol version, with
// the progress token as a string, as an integer, and absent. The chunks carry a
// newline and non-ASCII text. Random event ids are normalised.
func TestSSEGolden(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	for _, c := range []struct {
		name, handler, version string
	}{
		{"stateful-2025-06-18", "", "2025-06-18"},
		{"stateful-2025-11-25", "", "2025-11-25"},
		{"stateless-2025-11-25", "mode stateless", "2025-11-25"},
		{"stateless-2026-07-28", "mode stateless", "2026-07-28"},
		// JSON answers, except for a call with a progress token.
		{"stateless-json-2025-11-25", "mode stateless\n\t\tjson_response", "2025-11-25"},
		// The default endpoint serves 2026-07-28 beside its sessions, as
		// a stateless one does.
		{"stateful-2026-07-28", "", "2026-07-28"},
		{"stateful-json-2026-07-28", "json_response", "2026-07-28"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: c.handler})
			raw := &rawMCP{t: t, url: g.MCPURL, version: c.version}
			if !strings.Contains(c.handler, "stateless") && c.version < "2026-07-28" {
				raw.initialize(c.version)
			}
			var out strings.Builder
			for i, tok := range []string{`"6b0c3f0e-uuid"`, `1732950000000`, ``} {
				id := fmt.Sprint(1732950000123 + i)
				meta := `"progressToken":` + tok
				if tok == "" {
					meta, tok = `"other":true`, "(none)"
				}
				hdr := map[string]string{}
				if c.version >= "2026-07-28" {
					meta += `,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}`
					hdr = map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "chat"}
				}
				body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"chat","arguments":{"messages":[{"role":"user","content":"hi"}]},"_meta":{` + meta + `}}}`
				resp := raw.do(context.Background(), http.MethodPost, body, hdr)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "### token %s\nHTTP %d\nContent-Type: %s\nCache-Control: %s\n\n%s",
					tok, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"),
					normaliseSSE(string(b)))
			}
			checkGolden(t, filepath.Join("testdata", "sse", c.name+".golden"), out.String())
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateSSEGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -run TestSSEGolden -update-sse to write it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// TestSSEMultiStream keeps a session's GET stream open while two
// streaming calls run on their own POST streams and a reload changes the
// tool list: each message arrives on exactly one stream — progress and
// the response on their call's stream, the list_changed notification on
// the GET stream.
func TestSSEMultiStream(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	opts := gatewayOptions{Operations: windowOperations(up.URL)}
	g := startGateway(t, opts)
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := c.do(ctx, http.MethodGet, "", map[string]string{"Content-Type": ""})
	defer get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Fatalf("GET: %s", get.Status)
	}
	listChanged := make(chan []sseEvent, 1)
	go func() {
		var evs []sseEvent
		rd := newSSEReader(get.Body)
		for {
			ev, ok := rd.next()
			if !ok {
				listChanged <- evs
				return
			}
			if ev.Comment {
				continue
			}
			evs = append(evs, ev)
			if strings.Contains(ev.Data, "notifications/tools/list_changed") {
				listChanged <- evs
				return
			}
		}
	}()

	var wg sync.WaitGroup
	posts := map[string][]sseEvent{}
	var mu sync.Mutex
	for _, tok := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"`+tok+`","method":"tools/call","params":{"name":"logs_window","arguments":{},"_meta":{"progressToken":"`+tok+`"}}}`, nil)
			defer resp.Body.Close()
			var evs []sseEvent
			rd := newSSEReader(resp.Body)
			for ev, ok := rd.next(); ok; ev, ok = rd.next() {
				if !ev.Comment {
					evs = append(evs, ev)
				}
			}
			mu.Lock()
			posts[tok] = evs
			mu.Unlock()
		}()
	}
	wg.Wait()
	for tok, evs := range posts {
		// prime, 6 progress notifications, the response.
		if len(evs) != 8 || evs[0].Data != "" {
			t.Fatalf("stream of call %s: %d events: %+v", tok, len(evs), evs)
		}
		for i, ev := range evs[1:7] {
			if !strings.Contains(ev.Data, `"progressToken":"`+tok+`"`) || !strings.Contains(ev.Data, fmt.Sprintf(`"progress":%d`, i)) {
				t.Fatalf("call %s, event %d: %s", tok, i+1, ev.Data)
			}
		}
		if !strings.Contains(evs[7].Data, `"id":"`+tok+`"`) || !strings.Contains(evs[7].Data, `"result"`) {
			t.Fatalf("call %s, last event: %s", tok, evs[7].Data)
		}
	}

	// A reload adds a tool: the notification goes to the GET stream.
	opts.Operations += `
  - name: extra
    description: One more tool.
    adapter: rest
    config: {method: GET, url: "` + up.URL + `/metrics"}
`
	g.reload(opts)
	var evs []sseEvent
	select {
	case evs = <-listChanged:
	case <-ctx.Done():
		t.Fatal("no list_changed notification on the GET stream")
	}
	if len(evs) != 1 || !strings.Contains(evs[0].Data, "notifications/tools/list_changed") || evs[0].ID == "" {
		t.Fatalf("GET stream: %+v, want only the list_changed notification, with an event id", evs)
	}
}
