package caddymodule

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/mesh"
)

// TestMeshFieldsDocumented holds the guide's mesh block (docs/guide/mesh.md) to mesh.Config:
// every field is there.
func TestMeshFieldsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/guide/mesh.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)\n( *)mesh \{\n(.*?)\n( *)\}\n`).FindSubmatch(readme)
	if block == nil {
		t.Fatal("docs/guide/mesh.md has no mesh block")
	}
	for _, f := range mesh.Fields() {
		if !regexp.MustCompile(`(?m)^\s+` + f.Name + `\s`).Match(block[2]) {
			t.Errorf("docs/guide/mesh.md's mesh block does not show %s (%s)", f.Name, f.Doc)
		}
	}
}

// Two endpoints of one config cannot register as one agent; handlers that
// share an endpoint (the same settings) share its agent.
func TestMeshAgentOfOneEndpoint(t *testing.T) {
	t.Parallel()
	cfg := &mesh.Config{Registry: "http://127.0.0.1:8000", AgentID: "crank", URL: "http://127.0.0.1:8080/mcp"}
	one, two := new(mcpserver.Endpoint), new(mcpserver.Endpoint)
	shared := &App{handlers: []*Handler{{Mesh: cfg, ep: one}, {Mesh: cfg, ep: one}}}
	if err := shared.checkMeshAgents(); err != nil {
		t.Errorf("one endpoint, two handlers: %v", err)
	}
	other := *cfg
	other.AgentID = "crank-2"
	apart := &App{handlers: []*Handler{{Mesh: cfg, ep: one}, {Mesh: &other, ep: two}}}
	if err := apart.checkMeshAgents(); err != nil {
		t.Errorf("two endpoints, two agents: %v", err)
	}
	clash := &App{handlers: []*Handler{{Mesh: cfg, ep: one}, {Mesh: cfg, ep: two}}}
	if err := clash.checkMeshAgents(); err == nil || !strings.Contains(err.Error(), `mesh.agent_id: two endpoints register as the agent "crank"`) {
		t.Errorf("two endpoints, one agent: %v", err)
	}
}
