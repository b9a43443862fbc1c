package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestExampleAdapter runs the SDK's example adapter as a third party
// ships one: built from its own module, named under adapters: in the
// operations file, its tools called through an MCP client. The log file
// it serves lies beside the operations file, which its path is relative
// to.
func TestExampleAdapter(t *testing.T) {
	t.Parallel()
	exampleAdapter(t, adaptertest.Build(t, filepath.Join(repoRoot, "plugins", "sdk", "examples", "filetail")).Path, "")
}

// TestExampleAdapterUnderPreviousGateway runs the example adapter built
// with this SDK under the previous release's gateway: an adapter upgraded
// ahead of the fleet keeps working during the upgrade (the protocol only
// grew).
func TestExampleAdapterUnderPreviousGateway(t *testing.T) {
	t.Parallel()
	exampleAdapter(t, adaptertest.Build(t, filepath.Join(repoRoot, "plugins", "sdk", "examples", "filetail")).Path, previousCrank(t))
}

// TestExampleAdapterPreviousSDK runs the example adapter as the previous
// release's SDK builds it (internal/release/previous: the module
// plugins/sdk/examples/filetail at that commit, with that commit's SDK and
// protocol module), under the current gateway: a third-party adapter need
// not be rebuilt when the fleet is upgraded.
func TestExampleAdapterPreviousSDK(t *testing.T) {
	t.Parallel()
	exampleAdapter(t, filepath.Join(previousBuild(t, "plugins/sdk/examples/filetail", "."), "filetail"), "")
}

// exampleAdapter runs the example adapter exe under the gateway binary
// ("": the current build).
func exampleAdapter(t *testing.T, exe, binary string) {
	g := startGateway(t, gatewayOptions{Binary: binary, Operations: fmt.Sprintf(`
adapters:
  filetail: {command: %q}
operations:
  - name: app_log
    description: The last lines of the application log.
    adapter: filetail
    config: {path: app.log}
  - name: app_log_watch
    description: The lines written to the application log meanwhile.
    adapter: filetail
    mode: window
    limits: {window_duration_ms: 20000, max_items: 3}
    config: {path: app.log, poll_interval: 20ms}
  - name: app_log_follow
    description: Follow the application log.
    adapter: filetail
    mode: session
    config: {path: app.log, poll_interval: 20ms}
`, exe)})
	log := filepath.Join(g.dir, "app.log")
	writeFile(t, log, "one\ntwo\nthree\n")
	appendLog := func(s string) {
		t.Helper()
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(s)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress progressLog
	cs := g.connectProgress(ctx, &progress)

	// The adapter derived the tools' schemas from their config.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "app_log" {
			in, _ := json.Marshal(tool.InputSchema)
			out, _ := json.Marshal(tool.OutputSchema)
			if !strings.Contains(string(in), `"maximum":1000`) || !strings.Contains(string(out), `"cursor"`) {
				t.Errorf("app_log: input %s output %s", in, out)
			}
		}
	}
	if got := strings.Join(names, ","); got != "app_log,app_log_follow_poll,app_log_follow_start,app_log_follow_stop,app_log_watch" {
		t.Fatalf("tools: %s", got)
	}

	// Unary: the last lines and the cursor after them.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "app_log", Arguments: map[string]any{"lines": 2}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"cursor":"14","lines":["two","three"]}` || textOf(res) != "two\nthree" {
		t.Fatalf("app_log: %s %q", sc, textOf(res))
	}

	// A window from the last line on: every line is a progress
	// notification while the window collects.
	params := &mcp.CallToolParams{Name: "app_log_watch", Arguments: map[string]any{"lines": 1}}
	params.SetProgressToken("watch")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if p := progress.take(1); len(p) != 1 || p[0].Message != `{"line":"three"}` {
		t.Fatalf("first progress: %+v", p)
	}
	appendLog("four\nfive\n")
	if res = <-done; res == nil {
		t.FailNow()
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(sc), `"items":[{"line":"three"},{"line":"four"},{"line":"five"}]`) ||
		upstreamCursor(t, res) != "24" || !strings.Contains(string(sc), `"end_reason":"max_items"`) {
		t.Fatalf("window: %s", sc)
	}
	if p := progress.take(2); len(p) != 2 || p[1].Message != `{"line":"five"}` || p[1].Progress != 2 {
		t.Fatalf("progress: %+v", p)
	}

	// A window takes back only the cursors a window of the tool returned:
	// the unary call's cursor (the adapter's own, in a result) is refused
	// before the adapter sees it.
	appendLog("six\n")
	if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "app_log_watch", Arguments: map[string]any{"cursor": "14"}}); err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(textOf(res), `invalid arguments for tool "app_log_watch": cursor: not a cursor this tool returned`) {
		t.Fatalf("window at the unary call's cursor: %s", textOf(res))
	}

	// A session follows the file between polls until it is stopped.
	id := callOK(t, cs, "app_log_follow_start", map[string]any{"lines": 1})["session_id"].(string)
	waitFor(t, "the session's first line", func() bool {
		return len(callOK(t, cs, "app_log_follow_poll", map[string]any{"session_id": id})["items"].([]any)) > 0
	})
	appendLog("seven\n")
	waitFor(t, "the line written after the start", func() bool {
		items := callOK(t, cs, "app_log_follow_poll", map[string]any{"session_id": id})["items"].([]any)
		return fmt.Sprint(items) == "[map[line:six] map[line:seven]]"
	})
	callOK(t, cs, "app_log_follow_stop", map[string]any{"session_id": id})
	waitFor(t, "the session to stop", func() bool {
		return callOK(t, cs, "app_log_follow_poll", map[string]any{"session_id": id})["status"] == "stopped"
	})
}
