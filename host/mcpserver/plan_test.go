package mcpserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
)

// The plan of a tools/call resolves its name once: the view's tool and
// the host's tool it stands for, the names the view hides, the
// meta-tools, and the policy's decision for the caller. Metrics and
// spans label a call with a name the plan says the endpoint serves: the
// view's published names and the meta-tools, not the names it hides.
func TestCallPlan(t *testing.T) {
	t.Parallel()
	hst := viewHost(t)
	policy, err := auth.CompilePolicy([]auth.Rule{
		{Name: "admins-delete", Expression: `tool.name != "delete_user" || caller.id == "header:admin"`},
		{Name: "small-ids", Expression: `tool.name != "get_user" || int(args.id) < 100`},
	})
	if err != nil {
		t.Fatal(err)
	}
	// want: the host's tool ("" for none), then the flags served, hidden,
	// denied and refused as a string of 0s and 1s.
	type call struct{ name, args, tool, want string }
	for _, c := range []struct {
		cfg    *ViewConfig
		policy *auth.Policy
		calls  []call
	}{
		{nil, nil, []call{
			{"get_user", `{"id":7}`, "get_user", "1000"},
			{"call_tool", `{}`, "", "0000"},
			{"nope", `{}`, "", "0000"},
		}},
		{&ViewConfig{Discovery: DiscoveryBeside, Exclude: []string{"delete_*"}, Tools: map[string]ToolOverride{"get_user": {Name: "lookup_user"}}}, nil, []call{
			{"lookup_user", `{"id":7}`, "get_user", "1000"},
			{"get_user", `{"id":7}`, "", "0100"},
			{"delete_user", `{"id":7}`, "", "0100"},
			{"call_tool", `{}`, "", "1000"},
			{"report_start", `{"id":1}`, "report_start", "1000"},
			{"nope", `{}`, "", "0000"},
		}},
		{nil, policy, []call{
			{"get_user", `{"id":7}`, "get_user", "1000"},
			{"get_user", `{"id":700}`, "get_user", "1001"},
			{"delete_user", `{"id":7}`, "delete_user", "1010"},
			{"report_status", `{"job_id":"x"}`, "report_status", "1000"},
		}},
	} {
		opts := testOptions("default")
		opts.View, opts.Policy = c.cfg, c.policy
		ep, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ep.Attach(hst, nil)
		extra := &mcp.RequestExtra{Header: http.Header{"X-Agent": {"intern"}}}
		for _, call := range c.calls {
			var p plan
			ep.resolve(&p, "tools/call", &mcp.CallToolRequest{Extra: extra,
				Params: &mcp.CallToolParamsRaw{Name: call.name, Arguments: json.RawMessage(call.args)}})
			flag := func(b bool) string {
				if b {
					return "1"
				}
				return "0"
			}
			got := flag(p.served()) + flag(p.hidden) + flag(p.denied != nil) + flag(p.refused != nil)
			tool := ""
			if p.tool.Served() {
				tool = p.tool.Name()
			}
			if p.h != hst || p.scope.AgentID != "header:intern" || got != call.want || tool != call.tool {
				t.Errorf("view %+v, policy %v: the plan of %s %s: tool %q, flags %s; want %q, %s",
					c.cfg, c.policy != nil, call.name, call.args, tool, got, call.tool, call.want)
			}
		}
		ep.Detach(hst)
		_ = ep.Close()
	}
}
