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
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errorsSecret is a configured secret (an upstream header) that an
// upstream's error quotes: the gateway redacts it.
const errorsSecret = "e2e-errors-secret-7f3a"

// erringUpstream is a go-sdk server whose tools answer JSON-RPC errors
// (the upstream's own codes, messages and data) and an isError result
// with an image and structured content, served over Streamable HTTP
// behind a handler that answers a tools/call of "garbled" with two
// JSON-RPC messages in one application/json body.
func erringUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-erring", Version: "1"}, nil)
	raw := func(name string, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: "Fails: " + name + ".", InputSchema: map[string]any{"type": "object"}}, h)
	}
	rpcErr := func(code int64, msg, data string) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: code, Message: msg, Data: json.RawMessage(data)}
		}
	}
	raw("needs_sampling", rpcErr(mcp.CodeMissingRequiredClientCapabilities, "this tool needs the sampling capability",
		`{"requiredCapabilities":{"sampling":{}}}`))
	raw("bad_params", rpcErr(jsonrpc.CodeInvalidParams, "params.arguments.n: must be positive", `{"field":"n"}`))
	raw("custom", rpcErr(-31999, "the ledger is closed", `{"reopens":"monday","attempt":[1,2]}`))
	raw("leaky", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key := req.Extra.Header.Get("X-Api-Key")
		return nil, &jsonrpc.Error{Code: -32050, Message: "key " + key + " is revoked", Data: json.RawMessage(fmt.Sprintf(`{"key":%q}`, key))}
	})
	raw("fail", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
			&mcp.TextContent{Text: "no such account"},
			&mcp.ImageContent{Data: []byte("PNG-bytes"), MIMEType: "image/png"},
		}, StructuredContent: map[string]any{"account": "7", "reason": "closed"}}, nil
	})
	for _, name := range []string{"garbled", "garbled_late"} {
		raw(name, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "never sent"}}}, nil
		})
	}
	sdkHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && strings.HasPrefix(msg.Params.Name, "garbled") {
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"one"}]}}`, msg.ID)
				first := answer // two answers
				if msg.Params.Name == "garbled_late" {
					// A notification, then the answer: the go-sdk client
					// reads the first alone.
					first = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"before"}}`
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, first+"\n"+answer)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdkHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestMCPUpstreamErrors: errors stay errors through the gateway, in both
// protocol generations. An upstream's JSON-RPC error reaches the go-sdk
// client as the same JSON-RPC error (code, message, data; -32021 and
// -32602 at HTTP 400 in 2026-07-28, as the upstream answers them),
// redacted; its isError result
// arrives unchanged (no text added, every block, its structured
// content); a malformed answer fails the call at once with an error
// naming the upstream, not after the entry's timeout.
func TestMCPUpstreamErrors(t *testing.T) {
	t.Parallel()
	up := erringUpstream(t)
	g := startGateway(t, gatewayOptions{
		Env: []string{"CRANK_E2E_ERRORS_KEY=" + errorsSecret},
		Operations: fmt.Sprintf(`
operations:
  - name: erring
    description: A go-sdk server that fails.
    adapter: mcp
    timeout: 300s
    config:
      url: %q
      headers: {X-Api-Key: "{env.CRANK_E2E_ERRORS_KEY}"}
      prefix: up_
`, up.URL)})
	for _, gen := range generations { // generations_test.go
		t.Run(gen.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL}, gen.opts)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, g.log.String())
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != gen.version {
				t.Fatalf("negotiated %s, want %s", got, gen.version)
			}

			for _, want := range []struct {
				tool string
				code int64
				msg  string
				data string
			}{
				{"up_needs_sampling", mcp.CodeMissingRequiredClientCapabilities, "this tool needs the sampling capability", `{"requiredCapabilities":{"sampling":{}}}`},
				{"up_bad_params", jsonrpc.CodeInvalidParams, "params.arguments.n: must be positive", `{"field":"n"}`},
				{"up_custom", -31999, "the ledger is closed", `{"reopens":"monday","attempt":[1,2]}`},
				{"up_leaky", -32050, "key [REDACTED] is revoked", `{"key":"[REDACTED]"}`},
			} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: want.tool, Arguments: map[string]any{}})
				var rpc *jsonrpc.Error
				if !errors.As(err, &rpc) {
					t.Errorf("%s: want the upstream's JSON-RPC error %d, got %v %+v", want.tool, want.code, err, res)
					if res != nil {
						t.Logf("%s: %s", want.tool, textOf(res))
					}
					continue
				}
				if rpc.Code != want.code || rpc.Message != want.msg || !jsonEqual(rpc.Data, want.data) {
					t.Errorf("%s: got error %d %q %s, want %d %q %s", want.tool, rpc.Code, rpc.Message, rpc.Data, want.code, want.msg, want.data)
				}
				if strings.Contains(err.Error(), errorsSecret) {
					t.Errorf("%s: the secret reached the client: %v", want.tool, err)
				}
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_fail", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("up_fail: %v", err)
			}
			switch b, _ := json.Marshal(res.StructuredContent); {
			case !res.IsError || len(res.Content) != 2:
				t.Errorf("up_fail: want the upstream's isError result with 2 blocks, got %+v %q", res, textOf(res))
			case textOf(res) != "no such account":
				t.Errorf("up_fail: text %q, want exactly the upstream's %q", textOf(res), "no such account")
			case !jsonEqual(b, `{"account":"7","reason":"closed"}`):
				t.Errorf("up_fail: structuredContent %s", b)
			default:
				if im, ok := res.Content[1].(*mcp.ImageContent); !ok || string(im.Data) != "PNG-bytes" {
					t.Errorf("up_fail: block 2 %#v, want the upstream's image", res.Content[1])
				}
			}

			// The entry's timeout is longer than the test's: a call that
			// waits for it fails with the test's context.
			for _, tool := range []string{"up_garbled", "up_garbled_late"} {
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
				switch {
				case err != nil:
					t.Fatalf("%s: %v, want a tool error at once", tool, err)
				case !res.IsError || !strings.Contains(textOf(res), "mcp 127.0.0.1") || !strings.Contains(textOf(res), "application/json"):
					t.Errorf("%s: want a tool error naming the upstream and what was wrong, got %+v %q", tool, res, textOf(res))
				}
				t.Logf("%s: %s", tool, textOf(res))
			}

			// On the wire: the error's HTTP status is the generation's
			// (400 for -32021 and -32602 in 2026-07-28), not 200.
			raw := rawGeneration(t, g.MCPURL, gen.version, "") // generations_test.go
			for tool, status := range map[string]int{"up_needs_sampling": http.StatusBadRequest, "up_bad_params": http.StatusBadRequest} {
				if gen.version < "2026-07-28" {
					status = http.StatusOK
				}
				raw.Header.Set("Mcp-Name", tool)
				r := raw.Call("tools/call", newGenParams(gen.version, false, "name", tool, "arguments", map[string]any{}))
				if r.HTTPStatus != status || r.Error == nil || r.Result != nil {
					t.Errorf("%s on the wire: HTTP %d, result %s, error %+v; want HTTP %d and a JSON-RPC error", tool, r.HTTPStatus, r.Result, r.Error, status)
				}
			}

			// The malformed answer left the upstream usable.
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up_custom", Arguments: map[string]any{}}); err == nil {
				t.Errorf("up_custom after up_garbled: no error")
			}
		})
	}
}

// jsonEqual reports whether JSON a has the value of JSON b.
func jsonEqual(a []byte, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
