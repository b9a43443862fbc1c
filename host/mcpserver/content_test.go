package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
)

// TestTextBlocksAsGoSDK: content of plain text blocks decodes to what
// go-sdk's decoder makes of it, and any other content is left to go-sdk.
func TestTextBlocksAsGoSDK(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		content string
		fast    bool
	}{
		{`[{"type":"text","text":"hi"}]`, true},
		{`[{"type":"text","text":""},{"type":"text","text":"two \u00e9\n"}]`, true},
		{` [ {"text":"x","type":"text"} ] `, true},
		{`[{"type":"text","text":"hi","annotations":{"priority":1}}]`, false},
		{`[{"type":"text","text":"hi","_meta":{"a":1}}]`, false},
		{`[{"type":"image","data":"UE5H","mimeType":"image/png"}]`, false},
		{`[{"type":"text"}]`, false},
		{`[{"type":"text","text":"a"},{"type":"resource_link","uri":"file:///a","name":"a"}]`, false},
		{`[]`, false},
		{`[{"type":"text","text":"a"}] trailing`, false},
	} {
		_, fast := textBlocks([]byte(tc.content))
		if fast != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.content, fast, tc.fast)
		}
		var want mcp.CallToolResult
		wantErr := json.Unmarshal([]byte(`{"content":`+tc.content+`}`), &want)
		got := contentBlocks(&host.Result{Content: json.RawMessage(tc.content), Text: "fallback"})
		if wantErr != nil || len(want.Content) == 0 {
			want.Content = []mcp.Content{&mcp.TextContent{Text: "fallback"}}
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want.Content)
		if string(gb) != string(wb) {
			t.Errorf("%s: blocks %s, go-sdk decodes %s", tc.content, gb, wb)
		}
	}
}
