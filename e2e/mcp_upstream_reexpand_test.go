package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPUpstreamToolsChange: a federated go-sdk server that adds a tool
// (notifications/tools/list_changed) has Crank expand its entry again and
// tell its clients (notifications/tools/list_changed), and the go-sdk
// client through Crank lists and calls the new tool. A change whose tool
// would collide with another entry's keeps the last good tools and is
// logged, naming both entries.
func TestMCPUpstreamToolsChange(t *testing.T) {
	t.Parallel()
	up := mcpUpstreamServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: gosdk
    description: A go-sdk server over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      prefix: go_
  - name: go_clash
    description: The go-sdk server's echo under a name of its own.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      tool: echo
`, srv.URL, srv.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	cs := g.connectWith(ctx, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	names := func() []string {
		t.Helper()
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range list.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(); slices.Contains(got, "go_added") || !slices.Contains(got, "go_echo") || !slices.Contains(got, "go_clash") {
		t.Fatalf("tools before the change: %v", got)
	}

	up.AddTool(&mcp.Tool{Name: "added", Description: "Added while the gateway runs.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added tool answered"}}}, nil
		})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/tools/list_changed\n%s", g.log.String())
	}
	waitFor(t, "go_added to be listed", func() bool { return slices.Contains(names(), "go_added") })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go_added", Arguments: map[string]any{}})
	if err != nil || res.IsError || textOf(res) != "added tool answered" {
		t.Fatalf("go_added: %v %+v", err, res)
	}

	// An upstream tool that would be served as go_clash, which the other
	// entry serves: the entry keeps its tools, and the log says why.
	up.AddTool(&mcp.Tool{Name: "clash", Description: "Would collide.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	waitFor(t, "the collision to be logged", func() bool {
		return strings.Contains(g.log.String(), `tool \"go_clash\" of entry \"gosdk\": duplicate tool name: entry \"go_clash\" serves it too`)
	})
	if got := names(); !slices.Contains(got, "go_added") || !slices.Contains(got, "go_clash") {
		t.Fatalf("tools after the collision: %v", got)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go_clash", Arguments: map[string]any{"text": "still echo"}}); err != nil || res.IsError {
		t.Fatalf("go_clash after the collision: %v %+v", err, res)
	}
}
