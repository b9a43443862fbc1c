package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gone reports whether process pid has ended: it no longer exists, or is
// a zombie nobody has reaped yet.
func gone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// TestMCPUpstreamChildDiesWithAdapter kills the mcp adapter process: the
// stdio upstream it started dies with it (Pdeathsig) even though it
// ignores the end of its input, and the next call
// starts both again.
func TestMCPUpstreamChildDiesWithAdapter(t *testing.T) {
	t.Parallel()
	// The upstream outlives its stdin, so only the parent-death signal
	// ends it when the adapter dies.
	ops := strings.Replace(mcpUpstreamOps(t, ""), mcpUpstreamEnv+": stdio}", mcpUpstreamEnv+": stdio, "+mcpLingerEnv+": \"1\"}", 1)
	if !strings.Contains(ops, mcpLingerEnv) {
		t.Fatal("no linger in the operations")
	}
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	pid := func() int {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go_echo", Arguments: map[string]any{"text": "pid"}})
		if err != nil || res.IsError {
			t.Fatalf("go_echo: %v %+v", err, res)
		}
		var out upEchoOut
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &out) != nil || out.PID == 0 {
			t.Fatalf("go_echo: %s", b)
		}
		return out.PID
	}
	child := pid()
	adapter := g.adapter("mcp")
	if adapter.PID == 0 || gone(child) {
		t.Fatalf("adapter %+v, child %d", adapter, child)
	}
	if err := syscall.Kill(adapter.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("upstream child %d to die with its adapter %d", child, adapter.PID), func() bool { return gone(child) })
	var again int
	waitFor(t, "a call after the adapter's restart", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "go_echo", Arguments: map[string]any{"text": "pid"}})
		if err != nil || res.IsError {
			return false
		}
		again = pid()
		return true
	})
	if again == child {
		t.Fatalf("the same child %d served after the adapter's restart", child)
	}
}
