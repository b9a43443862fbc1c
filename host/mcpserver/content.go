package mcpserver

import (
	"bytes"
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
		if out, ok := textBlocks(res.Content); ok {
			return out
		}
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

// textBlocks decodes content made of plain text blocks only ({"type":
// "text", "text": ...}, nothing else: what most tools answer) without
// go-sdk's decoder, which allocates and zeroes a 32 KiB buffer per decode
// (docs/performance.md); ok is false for any other content, which
// contentBlocks decodes as go-sdk does.
func textBlocks(content []byte) (out []mcp.Content, ok bool) {
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	d := json.NewDecoder(bytes.NewReader(content))
	d.DisallowUnknownFields()
	if d.Decode(&blocks) != nil || d.More() || len(blocks) == 0 {
		return nil, false
	}
	out = make([]mcp.Content, len(blocks))
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return nil, false
		}
		out[i] = &mcp.TextContent{Text: *b.Text}
	}
	return out, true
}
