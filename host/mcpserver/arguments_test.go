package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/internal/mcptest"
)

// Arguments with a member name given twice reach no upstream, however
// they arrive: a direct tools/call, a family's start tool (also as an MCP
// task), call_tool's arguments. The policy, which sees the last of the
// two, is no way around it; the answer is the isError of any invalid
// arguments, naming the member.
func TestDuplicateArgumentsRefused(t *testing.T) {
	t.Parallel()
	hst := viewHost(t)
	url := viewEndpoint(t, hst, &ViewConfig{Discovery: DiscoveryBeside},
		[]auth.Rule{{Name: "small-ids", Expression: `!has(args.id) || args.id < 100`}})
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize("2025-11-25")
	for _, params := range []string{
		`{"name":"get_user","arguments":{"id":500,"id":1}}`,
		`{"name":"report_start","arguments":{"id":500,"id":1}}`,
		`{"name":"call_tool","arguments":{"name":"get_user","arguments":{"id":500,"id":1}}}`,
		`{"name":"call_tool","arguments":{"name":"report_start","arguments":{"id":500,"id":1}}}`,
		`{"name":"report_start","arguments":{"id":500,"id":1},"task":{"ttl":60000}}`,
		`{"name":"call_tool","arguments":{"name":"delete_user","arguments":{"id":1},"name":"get_user"}}`,
		`{"name":"search_tools","arguments":{"query":"delete","query":"user"}}`,
	} {
		var res mcptest.CallResult
		c.OK("tools/call", json.RawMessage(params), &res)
		if !res.IsError || !strings.Contains(res.Text(), "invalid arguments") || !strings.Contains(res.Text(), ": appears twice in its object") {
			t.Errorf("%s: %+v, want an isError naming the member", params, res)
		}
	}
	// The same arguments once each are served.
	var res mcptest.CallResult
	c.OK("tools/call", json.RawMessage(`{"name":"get_user","arguments":{"id":1}}`), &res)
	if res.IsError || !strings.Contains(res.Text(), `"id":1`) {
		t.Errorf("get_user: %+v", res)
	}
}
