package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPCommand is the subcommand under which this executable is the demo's
// MCP server over stdio (demo/mcp.yaml federates it: the mcp adapter
// starts it as `<this executable> crank-demo-mcp`).
const MCPCommand = "crank-demo-mcp"

// ExecutableEnv names this executable for the demo's operations files
// ({env.CRANK_DEMO_EXECUTABLE} in demo/mcp.yaml), set when the process
// starts.
const ExecutableEnv = "CRANK_DEMO_EXECUTABLE"

func init() {
	if exe, err := os.Executable(); err == nil {
		_ = os.Setenv(ExecutableEnv, exe)
	}
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  MCPCommand,
		Short: "Serves the demo's MCP server over stdio (started by the mcp adapter, not by hand)",
		Long: `Serves a small MCP server over stdin and stdout: the upstream that the
demo's demo/mcp.yaml federates through the mcp adapter. Its tools: word_stats
(structured output) and countdown (reports each step as progress); a
resource, a resource template and a prompt.`,
		Func: func(caddycmd.Flags) (int, error) {
			if err := MCPServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
				return caddy.ExitCodeFailedQuit, err
			}
			return caddy.ExitCodeSuccess, nil
		},
	})
}

type wordStatsIn struct {
	Text string `json:"text" jsonschema:"the text to count"`
}

type wordStatsOut struct {
	Words   int    `json:"words"`
	Chars   int    `json:"chars"`
	Longest string `json:"longest"`
}

type countdownIn struct {
	From   int `json:"from" jsonschema:"where to count down from (1 to 20)"`
	StepMS int `json:"step_ms,omitempty" jsonschema:"milliseconds between steps (default 300)"`
}

// MCPServer is the demo's MCP server: a structured tool and one that
// streams its steps as progress notifications, a resource, a resource
// template and a prompt.
func MCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "crank-demo-mcp", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "demo://mcp/readme", Name: "readme", Title: "About the demo MCP server", MIMEType: "text/markdown"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown",
				Text: "# The demo MCP server\n\nCrank federates it over stdio: its tools as mcp_word_stats and mcp_countdown, this resource, the countdown/{from} template and the haiku prompt.\n"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "demo://mcp/countdown/{from}", Name: "countdown", Title: "A countdown as text", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			var from int
			if _, err := fmt.Sscanf(strings.TrimPrefix(req.Params.URI, "demo://mcp/countdown/"), "%d", &from); err != nil || from < 1 || from > 20 {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			var b strings.Builder
			for i := from; i > 0; i-- {
				fmt.Fprintf(&b, "%d\n", i)
			}
			b.WriteString("liftoff\n")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: b.String()}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "haiku", Title: "Write a haiku", Description: "Asks for a haiku about a topic.",
		Arguments: []*mcp.PromptArgument{{Name: "topic", Description: "What the haiku is about.", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A haiku about " + req.Params.Arguments["topic"], Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Write a haiku about " + req.Params.Arguments["topic"] + "."}}}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "word_stats", Title: "Word statistics", Description: "Counts the words and characters of a text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in wordStatsIn) (*mcp.CallToolResult, wordStatsOut, error) {
			out := wordStatsOut{Chars: len([]rune(in.Text))}
			for _, w := range strings.Fields(in.Text) {
				out.Words++
				if len(w) > len(out.Longest) {
					out.Longest = w
				}
			}
			return nil, out, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "countdown", Title: "Countdown", Description: "Counts down, reporting each step as progress, then answers liftoff.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in countdownIn) (*mcp.CallToolResult, any, error) {
			if in.From < 1 || in.From > 20 {
				return nil, nil, fmt.Errorf("from must be between 1 and 20")
			}
			step := time.Duration(in.StepMS) * time.Millisecond
			if step <= 0 || step > 5*time.Second {
				step = 300 * time.Millisecond
			}
			tok := req.Params.GetProgressToken()
			for i := in.From; i > 0; i-- {
				if tok != nil {
					msg := fmt.Sprintf(`{"remaining":%d}`, i)
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
						Progress: float64(in.From - i + 1), Total: float64(in.From), Message: msg}); err != nil {
						return nil, nil, err
					}
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(step):
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "liftoff"}}}, nil, nil
		})
	return s
}
