package caddymodule

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/mesh"
	"github.com/crankmcp/crank/host/servercard"
)

// TestHandlerProvisionConfigErrors checks config errors Provision reports
// before it asks for the crank app.
func TestHandlerProvisionConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		h    Handler
		want []string
	}{
		{name: "no operations file", h: Handler{}, want: []string{"crank: operations", "required"}},
		{
			name: "bad allowed origin",
			h:    Handler{Operations: []string{"ops.yaml"}, AllowedOrigins: []string{"https://ok.example", "ok.example"}},
			want: []string{"crank: allowed_origins", `"ok.example"`, "scheme://host"},
		},
		{
			name: "allowed origin with a path",
			h:    Handler{Operations: []string{"ops.yaml"}, AllowedOrigins: []string{"https://ok.example/app"}},
			want: []string{"crank: allowed_origins", `"https://ok.example/app"`, "no path"},
		},
		{
			name: "session state over the largest limit",
			h:    Handler{Operations: []string{"ops.yaml"}, SessionLimits: SessionLimits{MaxMCPSessionState: 1 << 20}},
			want: []string{"crank: max_mcp_session_state", "1-65536 bytes", "1048576"},
		},
		{
			name: "null is not an allowed origin",
			h:    Handler{Operations: []string{"ops.yaml"}, AllowedOrigins: []string{"null"}},
			want: []string{"crank: allowed_origins", `"null"`},
		},
		{
			name: "view selector of an unknown toolset",
			h: Handler{Operations: []string{"ops.yaml"}, View: &mcpserver.ViewConfig{
				Toolsets: map[string][]string{"users": {"*_user"}}, Include: []string{"get_*", "toolset:user"}}},
			want: []string{"crank: view.include[1]", `unknown toolset "user"`, "toolsets: users"},
		},
		{
			name: "server card without a description, of a bad url",
			h: Handler{Operations: []string{"ops.yaml"}, ServerCard: &servercard.Config{Name: "com.example/weather",
				URL: "https://mcp.example.com/mcp#x"}},
			want: []string{"crank: server_card.description: required", "crank: server_card.url: must have no credentials, query or fragment"},
		},
		{
			name: "mesh registration of a bad agent id, without a url",
			h: Handler{Operations: []string{"ops.yaml"}, Mesh: &mesh.Config{Registry: "{env.CRANK_TEST_NO_SUCH_VAR}http://127.0.0.1:8000",
				AgentID: "bad id"}},
			want: []string{"crank: mesh.agent_id: must be 1 to 64 letters", "crank: mesh.url: required"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			h := tc.h
			err := h.Provision(ctx)
			if err == nil {
				t.Fatal("Provision succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
