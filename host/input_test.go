package host_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
)

// A request state comes back to the adapter only from a retry of the call
// it was issued for: the same tool, caller (workspace and agent) and
// arguments, unchanged; anything else is refused naming requestState.
func TestInputStateIsSealed(t *testing.T) {
	args := json.RawMessage(`{"a":1}`)
	sealed := host.SealInput("t", "w", "agent-1", args, "upstream-state")
	if !strings.HasPrefix(sealed, "crank2:") {
		t.Fatalf("sealed %q", sealed)
	}
	if got, refused := host.OpenInput("t", "w", "agent-1", args, sealed); got != "upstream-state" || refused != "" {
		t.Fatalf("the same call: %q %q", got, refused)
	}
	for name, c := range map[string]struct {
		tool, workspace, agent string
		args                   json.RawMessage
		state                  string
	}{
		"another agent":     {"t", "w", "agent-2", args, sealed},
		"another workspace": {"t", "w2", "agent-1", args, sealed},
		"another tool":      {"u", "w", "agent-1", args, sealed},
		"other arguments":   {"t", "w", "agent-1", json.RawMessage(`{"a":2}`), sealed},
		"an edited state":   {"t", "w", "agent-1", args, edit(sealed)},
		"the bare state":    {"t", "w", "agent-1", args, "upstream-state"},
	} {
		if got, refused := host.OpenInput(c.tool, c.workspace, c.agent, c.args, c.state); got != "" || !strings.Contains(refused, "requestState") {
			t.Errorf("%s: %q %q", name, got, refused)
		}
	}
}
