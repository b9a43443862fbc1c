package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/crankmcp/crank/internal/missing"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireTSClient skips the test (fails it on CI) when the TypeScript SDK
// is not installed in e2e/ts or node is missing.
func requireTSClient(t *testing.T) {
	t.Helper()
	if !tsClientAvailable(t) {
		t.SkipNow()
	}
}

// tsClientAvailable reports whether the TypeScript SDK client can run,
// for a test that checks more than the client: it logs why not, and
// fails the test under CI, where no TypeScript check may be left out
// silently.
func tsClientAvailable(t *testing.T) bool {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot, "e2e", "ts", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		missing.Part(t, "e2e/ts/node_modules is missing: the TypeScript SDK check is left out", "make ts-deps: npm ci in e2e/ts")
		return false
	} else if _, err := exec.LookPath("node"); err != nil {
		missing.Part(t, "node is not installed: the TypeScript SDK check is left out", "apt-get install nodejs npm")
		return false
	}
	return true
}

// runTSClient runs e2e/ts/client.mjs against the gateway with a script of
// steps, and env (NAME=value) added to its environment, and returns its
// JSON output.
func runTSClient(t *testing.T, url, script string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "client.mjs"), url, script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	return out
}

// tsCalls is client.mjs's output for a script of callTool steps.
type tsCalls struct {
	Steps []struct {
		OK     bool
		Result struct {
			StructuredContent map[string]any
			Content           []struct{ Text string }
			IsError           bool
			Progress          []struct{ Progress float64 }
		}
		Error struct{ Message string }
	}
}

// runTSCalls runs a script of callTool steps with runTSClient and decodes
// its output, failing unless it has steps steps.
func runTSCalls(t *testing.T, url, script string, steps int) tsCalls {
	t.Helper()
	out := runTSClient(t, url, script)
	var run tsCalls
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != steps {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	return run
}

// TestTypeScriptClient drives the gateway with the official TypeScript MCP
// SDK (e2e/ts/client.mjs; `make test` installs its node_modules first).
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "500ms", "")})
	out := runTSClient(t, g.MCPURL, `[
		{"op":"listTools"},
		{"op":"callTool","name":"get_user","arguments":{"id":2}},
		{"op":"callTool","name":"get_user","arguments":{"id":404}},
		{"op":"callTool","name":"get_user","arguments":{"id":"x"}},
		{"op":"callTool","name":"down","arguments":{}},
		{"op":"callTool","name":"no_such_tool","arguments":{}}
	]`)

	type content struct {
		Type, Text string
	}
	var run struct {
		ServerInfo struct{ Name string }
		SessionID  string
		Steps      []struct {
			OK     bool
			Result struct {
				Tools []struct {
					Name         string
					InputSchema  map[string]any
					OutputSchema map[string]any
				}
				Content           []content
				StructuredContent map[string]any
				IsError           bool
			}
			Error struct {
				Code    int
				Message string
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	if run.ServerInfo.Name != "crank" || run.SessionID == "" || len(run.Steps) != 6 {
		t.Fatalf("client run: %s", out)
	}
	st := run.Steps
	if !st[0].OK || len(st[0].Result.Tools) != 4 || st[0].Result.Tools[1].Name != "get_user" || st[0].Result.Tools[1].OutputSchema == nil {
		t.Errorf("listTools: %+v", st[0])
	}
	if !st[1].OK || st[1].Result.IsError || st[1].Result.StructuredContent["name"] != "User 2" {
		t.Errorf("get_user 2: %+v", st[1])
	}
	for i, want := range map[int]string{
		2: "upstream answered 404 Not Found",
		3: `invalid arguments for tool "get_user": id: must be an integer, got a string`,
		4: "upstream could not be reached",
	} {
		r := st[i].Result
		if !st[i].OK || !r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, want) {
			t.Errorf("step %d: want isError with %q, got %+v", i, want, st[i])
		}
	}
	if st[5].OK || st[5].Error.Code != -32602 || !strings.Contains(st[5].Error.Message, `unknown tool "no_such_tool"`) {
		t.Errorf("unknown tool: %+v", st[5])
	}
}
