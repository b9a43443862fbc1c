package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
)

// contentBlocks is the content of a tool result: the adapter's own MCP
// content blocks when it sent them (an MCP upstream's, passed on
// unchanged), else one text block of the result's text. Blocks that do
// not decode as MCP content fall back to the text block.
func contentBlocks(res *host.Result) []mcp.Content {
	if len(res.Content) > 0 {
		var wrapped struct {
			Content json.RawMessage `json:"content"`
		}
		wrapped.Content = res.Content
		b, err := json.Marshal(wrapped)
		var out mcp.CallToolResult
		if err == nil && json.Unmarshal(b, &out) == nil && len(out.Content) > 0 {
			return out.Content
		}
	}
	return []mcp.Content{&mcp.TextContent{Text: res.Text}}
}
