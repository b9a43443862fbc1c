package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type upLogsIn struct {
	Levels []string `json:"levels"`
	Text   string   `json:"text"`
}

// addLogsTool adds a tool that sends a log message at each of the levels
// it is given (at the level the client set), then answers.
func addLogsTool(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "logs", Description: "Sends a log message at each of levels, then answers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in upLogsIn) (*mcp.CallToolResult, upEchoOut, error) {
			for i, l := range in.Levels {
				//nolint:staticcheck // logging is deprecated as of 2026-07-28
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(l), Logger: "e2e-upstream",
					Data: map[string]any{"n": i, "text": in.Text}}); err != nil {
					return nil, upEchoOut{}, err
				}
			}
			return nil, upEchoOut{Echo: fmt.Sprintf("%d logs", len(in.Levels)), PID: os.Getpid()}, nil
		})
}

// collected are the notifications a client handler received.
type collected[T any] struct {
	mu   sync.Mutex
	list []T
}

func (c *collected[T]) add(v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, v)
}

// wait returns what was received, waiting up to max for n of them, and
// forgets it.
func (c *collected[T]) wait(n int, max time.Duration) []T {
	deadline := time.Now().Add(max)
	for {
		c.mu.Lock()
		if len(c.list) >= n || time.Now().After(deadline) {
			out := c.list
			c.list = nil
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
}

// logLog records the log messages a client receives.
type logLog struct {
	collected[*mcp.LoggingMessageParams]
}

func (l *logLog) handler(_ context.Context, req *mcp.LoggingMessageRequest) { l.add(req.Params) }

// take returns the messages received, waiting up to 30s for n of them
// (the go-sdk client may hand them over after CallTool returned).
func (l *logLog) take(n int) []*mcp.LoggingMessageParams { return l.wait(n, 30*time.Second) }

// TestMCPUpstreamLogs: the log messages a federated upstream sends for a
// call (go-sdk servers over stdio and over Streamable HTTP) reach the
// go-sdk client that set a logging level, on the call's stream, at that
// level and above; a client that set none gets none.
func TestMCPUpstreamLogs(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up := mcpUpstreamServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: stdio_logs
    description: The go-sdk server's logs tool over stdio.
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      env: {%s: stdio}
      tool: logs
  - name: http_logs
    description: The go-sdk server's logs tool over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      tool: logs
`, self, mcpUpstreamEnv, srv.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var logs logLog
	cs := g.connectWith(ctx, &mcp.ClientOptions{LoggingMessageHandler: logs.handler})
	quiet := g.connectWith(ctx, &mcp.ClientOptions{LoggingMessageHandler: logs.handler})
	//nolint:staticcheck // logging is deprecated as of 2026-07-28, and still served before it
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"levels": []string{"debug", "info", "warning", "error"}, "text": "secret-free"}
	for _, tool := range []string{"stdio_logs", "http_logs"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v\n%s", tool, err, res, g.log.String())
		}
		got := logs.take(2)
		var seen []string
		for _, m := range got {
			b, _ := json.Marshal(m.Data)
			seen = append(seen, fmt.Sprintf("%s %s %s", m.Level, m.Logger, b))
		}
		want := `warning e2e-upstream {"n":2,"text":"secret-free"}|error e2e-upstream {"n":3,"text":"secret-free"}`
		if strings.Join(seen, "|") != want {
			t.Errorf("%s: log messages %q, want %q", tool, seen, want)
		}
		// A client that set no level gets no log messages.
		if res, err := quiet.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil || res.IsError {
			t.Fatalf("%s without a level: %v %+v", tool, err, res)
		}
	}
	// The first client's next call proves the quiet one's got nothing
	// (messages of one session arrive in order).
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_logs", Arguments: map[string]any{"levels": []string{"error"}, "text": "last"}}); err != nil {
		t.Fatal(err)
	}
	if got := logs.take(1); len(got) != 1 || got[0].Level != "error" {
		t.Errorf("after the quiet calls: %d messages: %+v", len(got), got)
	}
}
