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
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Helpers of the tests against real APIs' own documents and validating
// stand-ins (stripe_test.go, slack_test.go).

// startAnnounced starts cmd, a server that says where it listens on a
// line of its output holding marker, and returns the rest of that line;
// the process is killed at the end of the test.
func startAnnounced(t *testing.T, cmd *exec.Cmd, marker string) string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), marker); ok {
			go func() {
				for lines.Scan() { // drain, so that the server never blocks on its output
				}
			}()
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("%s did not say where it listens (%q): %v", cmd.Path, marker, lines.Err())
	return ""
}

// recordingProxy forwards to base and records each request: the proxy's
// URL, and the requests so far (method, URI, Content-Type, body).
func recordingProxy(t *testing.T, base string) (string, func() string) {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wire []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		wire = append(wire, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type")+"\n"+string(b))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec.URL, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(wire, "\n---\n")
	}
}

// importTools starts a gateway whose one REST entry imports the OpenAPI
// document doc against base (more lines of its openapi block in extra)
// and lists its tools (the first page), which must include want; the
// context bounds the test.
func importTools(t *testing.T, doc, base, extra string, want ...string) (context.Context, *gateway, *mcp.ClientSession, map[string]*mcp.Tool) {
	t.Helper()
	ops := fmt.Sprintf(`version: 1
operations:
  - name: api
    adapter: rest
    timeout: 10s
    config:
      openapi:
        document: %s
        base_url: %s%s
`, doc, base, extra)
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	cs := g.connect(ctx)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range want {
		if tools[name] == nil {
			t.Fatalf("no tool %s in %d tools", name, len(list.Tools))
		}
	}
	return ctx, g, cs, tools
}

// tsStep is one step of e2e/ts/client.mjs's output: a listTools summary
// (Count, OutputSchemas) or a call's result (Validated: the official
// TypeScript client checked its structuredContent against the tool's
// output schema).
type tsStep struct {
	OK     bool
	Result struct {
		Count, OutputSchemas int
		IsError              bool
		Validated            bool
		StructuredContent    map[string]any
		Content              []struct{ Text string }
	}
	Error struct {
		Message, Source string
		Data            map[string]any
	}
}

// text is a step's answer as a person reads it: the error, or the
// result's text.
func (s tsStep) text() string {
	if !s.OK {
		return s.Error.Source + ": " + s.Error.Message
	}
	var b strings.Builder
	for _, c := range s.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// tsSteps runs script (client.mjs's JSON steps) through the official
// TypeScript client against the gateway at url, for as long as ctx
// allows (listing a whole document and compiling its output schemas
// takes a while on a loaded machine).
func tsSteps(ctx context.Context, t *testing.T, url, script string) []tsStep {
	t.Helper()
	requireNode(t, "ts", "@modelcontextprotocol/sdk", "ts-deps")
	timeout := "CRANK_E2E_TIMEOUT_MS=120000"
	if d, ok := ctx.Deadline(); ok {
		timeout = fmt.Sprintf("CRANK_E2E_TIMEOUT_MS=%d", time.Until(d).Milliseconds())
	}
	out, err := tsClient(ctx, url, script, timeout)
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ Steps []tsStep }
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("client.mjs printed no JSON: %v\n%.2000s", err, out)
	}
	return run.Steps
}
