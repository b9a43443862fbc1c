package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// bareMCPAdapterEnv, set beside bareMCPEnv, names a crank executable: the
// bare server process then serves get_user by calling that executable's
// REST adapter, started as a process of its own through the SDK's client
// (go-plugin, AutoMTLS, gRPC) as Crank's gateway starts it, instead of
// calling the upstream itself. That is the design floor of a gateway built
// on the go-sdk that keeps its adapters out of process: a generic MCP
// server, one adapter hop, nothing else (BenchmarkUnaryREST's "floor").
const bareMCPAdapterEnv = "CRANK_E2E_BARE_MCP_ADAPTER"

// floorTimeout bounds a floor call, as an operation's timeout bounds
// Crank's.
const floorTimeout = 30 * time.Second

// startFloorAdapter starts the REST adapter of the crank executable exe
// the way the gateway does (`crank crank-adapter rest` when no
// crank-adapter-rest sits beside it, as in these tests) and describes it.
func startFloorAdapter(exe string) (*client.Process, error) {
	cmd := exec.Command(exe, "crank-adapter", "rest")
	cmd.Env = os.Environ()
	p, err := client.Start(client.Config{Cmd: cmd})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), floorTimeout)
	defer cancel()
	if _, err := p.Describe(ctx, "e2e-floor"); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// floorGetUser is get_user over the adapter hop: the operation
// BenchmarkUnaryREST's gateways serve (e2e_test.go's operations), its
// arguments passed through as they came and the adapter's answer returned
// as Crank returns it (the text and the structured content).
func floorGetUser(p *client.Process, upstream string) mcp.ToolHandler {
	op := sdk.Operation{Name: "get_user", Mode: sdk.ModeUnary, Timeout: floorTimeout,
		Config: json.RawMessage(fmt.Sprintf(`{"method":"GET","url":%q}`, upstream+"/users/{id}"))}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(ctx, floorTimeout)
		defer cancel()
		deadline, _ := ctx.Deadline()
		res, err := p.Invoke(ctx, &sdk.Request{Context: sdk.RequestContext{Deadline: deadline},
			Operation: op, Arguments: req.Params.Arguments})
		if err != nil {
			return nil, err
		}
		text := res.Text
		if text == "" {
			text = string(res.Structured)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}},
			StructuredContent: res.Structured}, nil
	}
}
