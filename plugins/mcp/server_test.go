package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// serverEnv, set in a child's environment, makes the test binary an MCP
// server over stdio (TestMain).
const serverEnv = "CRANK_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if kind := os.Getenv(badServerEnv); kind != "" {
		serveBadStdio(kind) // handshake_test.go
	}
	if os.Getenv(serverEnv) == publishStdio {
		servePublishStdio() // publish_test.go
	}
	if os.Getenv(serverEnv) == "stdio" {
		if err := testServer(nil).Run(context.Background(), &gomcp.StdioTransport{}); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}

type echoOut struct {
	Echo string `json:"echo"`
}

// testServer is an MCP server with one tool of each kind the tests need.
// A cancelled call of slow is reported on cancelled, when not nil.
func testServer(cancelled chan<- struct{}) *gomcp.Server {
	s := gomcp.NewServer(&gomcp.Implementation{Name: "upstream", Version: "1"}, nil)
	gomcp.AddTool(s, &gomcp.Tool{Name: "echo", Title: "Echo", Description: "Echoes text.",
		Annotations: &gomcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
		// An MCP App renders its results (both forms of the resource URI).
		Meta: gomcp.Meta{"ui": map[string]any{"resourceUri": "ui://echo/view.html", "visibility": []string{"model", "app"}},
			"ui/resourceUri": "ui://echo/view.html"}},
		func(_ context.Context, _ *gomcp.CallToolRequest, in echoIn) (*gomcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Echo: in.Text}, nil
		})
	raw := func(name, desc string, h gomcp.ToolHandler) {
		s.AddTool(&gomcp.Tool{Name: name, Description: desc, InputSchema: map[string]any{"type": "object"}}, h)
	}
	raw("image", "Answers an image and a text.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		return &gomcp.CallToolResult{Content: []gomcp.Content{
			&gomcp.ImageContent{Data: []byte("PNG"), MIMEType: "image/png"},
			&gomcp.TextContent{Text: "a tiny image"},
		}}, nil
	})
	raw("caps", "Answers the client capabilities its session declared.", func(_ context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		c := req.Session.InitializeParams().Capabilities
		b, _ := json.Marshal(map[string]any{"sampling": c.Sampling, "elicitation": c.Elicitation, "roots": c.RootsV2 != nil, "extensions": c.Extensions}) //nolint:staticcheck // as the client declared them
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: string(b)}}}, nil
	})
	raw("fail", "Fails as a tool.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: "no such account"}}}, nil
	})
	raw("rpc_error", "Fails as a protocol error.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad things"}
	})
	raw("slow", "Waits until cancelled, or five seconds.", func(ctx context.Context, _ *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			if cancelled != nil {
				select {
				case cancelled <- struct{}{}:
				default:
				}
			}
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "late"}}}, nil
		}
	})
	raw("env", "Lists the names of its environment variables.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		var names []string
		for _, kv := range os.Environ() {
			names = append(names, strings.SplitN(kv, "=", 2)[0])
		}
		sort.Strings(names)
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: strings.Join(names, ",")}}}, nil
	})
	raw("ticks", "Reports n progress notifications {\"tick\": i}, then answers; fails after them when fail is set.", func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		var in struct {
			N    int
			Fail bool
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i := 1; i <= in.N; i++ {
				if err := req.Session.NotifyProgress(ctx, &gomcp.ProgressNotificationParams{ProgressToken: tok,
					Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf(`{"tick":%d}`, i)}); err != nil {
					return nil, err
				}
			}
		}
		return &gomcp.CallToolResult{IsError: in.Fail, Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf("%d ticks", in.N)}}}, nil
	})
	raw("logs", "Sends a log message at each of levels, then answers.", func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		var in struct {
			Levels []string
			Text   string
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		for i, l := range in.Levels {
			//nolint:staticcheck // logging is deprecated as of 2026-07-28
			if err := req.Session.Log(ctx, &gomcp.LoggingMessageParams{Level: gomcp.LoggingLevel(l), Logger: "upstream",
				Data: map[string]any{"n": i, "text": in.Text}}); err != nil {
				return nil, err
			}
		}
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf("%d logs", len(in.Levels))}}}, nil
	})
	raw("elicit", "Asks its client for the text with an input-required result, and answers what it got.", func(_ context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		var in struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		got, ok := req.Params.InputResponses["q"].(*gomcp.ElicitResult)
		if !ok {
			return &gomcp.CallToolResult{RequestState: "s-" + in.Text, InputRequests: gomcp.InputRequestMap{"q": &gomcp.ElicitParams{Message: in.Text}}}, nil
		}
		b, _ := json.Marshal(got.Content)
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: fmt.Sprintf("%s %s %s", got.Action, b, req.Params.RequestState)}}}, nil
	})
	raw("grow", "Adds the tool grown to the server.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		raw("grown", "Added by grow.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "grown"}}}, nil
		})
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "grew"}}}, nil
	})
	raw("big", "Answers a text of n bytes.", func(_ context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		var in struct{ N int }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: strings.Repeat("x", in.N)}}}, nil
	})
	raw("crash", "Ends the server process.", func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	return s
}

// httpUpstream serves testServer over Streamable HTTP on a loopback port.
// restart makes it forget every session, as a restarted server does.
type httpUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	handler http.Handler
	// inits counts the sessions used; auth records the Authorization
	// headers received.
	inits       atomic.Int32
	sessions    sync.Map
	auth        sync.Map
	restartWith func() http.Handler
	// cancelled receives when the upstream sees a call of slow cancelled.
	cancelled chan struct{}
}

func newHTTPUpstream(t testing.TB, stateless bool) *httpUpstream {
	u := &httpUpstream{cancelled: make(chan struct{}, 1)}
	mk := func() http.Handler {
		s := testServer(u.cancelled)
		return gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return s },
			&gomcp.StreamableHTTPOptions{Stateless: stateless})
	}
	u.handler = mk()
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			u.auth.Store(a, true)
		}
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			if _, seen := u.sessions.LoadOrStore(id, true); !seen {
				u.inits.Add(1)
			}
		}
		u.mu.Lock()
		h := u.handler
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	u.restartWith = mk
	return u
}

func (u *httpUpstream) restart() {
	h := u.restartWith()
	u.mu.Lock()
	u.handler = h
	u.mu.Unlock()
	u.srv.CloseClientConnections()
}

// transports are the configs of the test server over Streamable HTTP (up)
// and over stdio (a child process), by name.
func transports(t *testing.T, up *httpUpstream) map[string]map[string]any {
	return map[string]map[string]any{"http": {"url": up.srv.URL}, "stdio": stdioConfig(t)}
}

// withTool is the config base with tool set.
func withTool(base map[string]any, tool string) map[string]any {
	cfg := map[string]any{"tool": tool}
	for k, v := range base {
		cfg[k] = v
	}
	return cfg
}

// eachTransport runs f in a subtest per transport of up (transports), each
// with an adapter of its own and the adapter's description.
func eachTransport(t *testing.T, up *httpUpstream, f func(t *testing.T, h *adaptertest.Harness, info *client.Info, base map[string]any)) {
	for name, base := range transports(t, up) {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			info, err := h.Describe(ctxT(t))
			if err != nil {
				t.Fatalf("describe: %v", err)
			}
			f(t, h, info, base)
		})
	}
}
