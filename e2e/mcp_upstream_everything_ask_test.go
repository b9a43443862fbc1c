package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingAskTools are server-everything's tools that ask the client
// during the call (registered only for a client that declared sampling,
// form and URL elicitation: the adapter declares them all).
const everythingAskTools = "trigger-sampling-request, trigger-elicitation-request, trigger-url-elicitation"

// everythingHTTP starts server-everything in its streamableHttp mode on a
// free loopback port and returns its MCP endpoint.
func everythingHTTP(t *testing.T, node, js string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(node, js, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	url, _ := serveHTTPProcess(t, "server-everything", cmd, port)
	return url
}

// serveHTTPProcess starts cmd, an MCP server that listens on port on
// loopback, its output kept, killed when the test ends; it returns its MCP
// endpoint once it accepts connections, and its output.
func serveHTTPProcess(t *testing.T, what string, cmd *exec.Cmd, port int) (string, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, what+" listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp", out
}

// TestMCPUpstreamServerEverythingClientRequests: the official reference
// server, @modelcontextprotocol/server-everything, federated over stdio
// and over Streamable HTTP, samples and elicits (form mode with its
// defaults and enums, URL mode) during its tools' calls; the go-sdk client
// and the TypeScript SDK client of the call, on their MCP sessions
// (2025-11-25), are asked through the gateway, and the tools answer what
// their handlers gave.
func TestMCPUpstreamServerEverythingClientRequests(t *testing.T) {
	t.Parallel()
	node, js := serverEverything(t) // mcp_upstream_test.go
	url := everythingHTTP(t, node, js)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: everything-stdio
    description: server-everything over stdio.
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      args: [%q, stdio]
      prefix: stdio_
      include: [%s]
  - name: everything-http
    description: server-everything over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      prefix: http_
      include: [%s]
`, node, js, everythingAskTools, url, everythingAskTools)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var a askingClient // mcp_upstream_ask_test.go
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, a.options()).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	for _, prefix := range []string{"stdio_", "http_"} {
		call := func(name string, args map[string]any) string {
			t.Helper()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: prefix + name, Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s%s: %v %s\n%s", prefix, name, err, textOf(res), g.log.String())
			}
			var texts []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					texts = append(texts, tc.Text)
				}
			}
			return strings.Join(texts, "\n")
		}
		if got := call("trigger-sampling-request", map[string]any{"prompt": "2+2?", "maxTokens": 16}); !strings.Contains(got, `"model": "test-model"`) ||
			!strings.Contains(got, "4, to Resource trigger-sampling-request context: 2+2?") {
			t.Errorf("%s sampling: the tool answered %q", prefix, got)
		}
		// The form's defaults reach the client (go-sdk's client fills
		// them in) and its answer the server.
		if got := call("trigger-elicitation-request", nil); !strings.Contains(got, "- Name: Grace") || !strings.Contains(got, "- Favorite Integer: 42") {
			t.Errorf("%s form elicitation: the tool answered %q", prefix, got)
		}
		if got := call("trigger-url-elicitation", map[string]any{"url": "https://auth.example/login"}); !strings.Contains(got, "User completed the URL elicitation flow") {
			t.Errorf("%s url elicitation: the tool answered %q", prefix, got)
		}
		asked := a.asked.wait(3, 10*time.Second)
		want := []string{"sample Resource trigger-sampling-request context: 2+2?",
			"elicit form Please provide inputs for the following fields: ",
			"elicit url Please open the link to complete this action. https://auth.example/login"}
		if !slices.Equal(asked, want) {
			t.Errorf("%s: the client was asked %q, want %q", prefix, asked, want)
		}
	}

	// The TypeScript SDK client (e2e/ts/client.mjs) answers them too.
	out := runTSClient(t, g.MCPURL, `[
		{"op":"callTool","name":"stdio_trigger-sampling-request","arguments":{"prompt":"3+3?"}},
		{"op":"callTool","name":"http_trigger-sampling-request","arguments":{"prompt":"3+3?"}},
		{"op":"callTool","name":"stdio_trigger-elicitation-request"},
		{"op":"callTool","name":"http_trigger-elicitation-request"}
	]`, "CRANK_E2E_ANSWER=1")
	doc := tsAnswered[json.RawMessage](t, out, 4)
	for i, st := range doc.Steps {
		want := `ts-model`
		if i >= 2 {
			want = `- Name: Grace`
		}
		if !st.OK || !strings.Contains(string(st.Result), want) {
			t.Errorf("TypeScript step %d: want %s in %s", i, want, st.Result)
		}
	}
	if len(doc.Asked) != 4 {
		t.Errorf("the TypeScript client was asked %q", doc.Asked)
	}
}

// tsRun is what e2e/ts/client.mjs printed: what its client was asked
// (CRANK_E2E_ANSWER=1), and each step's outcome and result.
type tsRun[R any] struct {
	Asked []string
	Steps []struct {
		OK     bool
		Result R
	}
}

// tsAnswered is client.mjs's output out of a script of steps steps.
func tsAnswered[R any](t *testing.T, out []byte, steps int) tsRun[R] {
	t.Helper()
	var doc tsRun[R]
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Steps) != steps {
		t.Fatalf("%s: %v", out, err)
	}
	return doc
}
