package mcpserver

import (
	"os/exec"
	"strings"
	"testing"
)

// The MCP server is Caddy-free and speaks to adapters only through host:
// it depends on no Caddy package and imports no generated protocol code.
func TestImports(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`+"\n---\n"+`{{join .Deps "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports, deps, _ := strings.Cut(string(out), "\n---\n")
	for _, p := range strings.Fields(deps) {
		if strings.HasPrefix(p, "github.com/caddyserver/") {
			t.Errorf("depends on %s", p)
		}
	}
	for _, p := range strings.Fields(imports) {
		if strings.HasPrefix(p, "github.com/crankmcp/crank/proto/") {
			t.Errorf("imports %s", p)
		}
	}
}
