package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Reloads that remove, rename and change operations take effect for the
// sessions already open, a call in flight during the reload finishes on
// the config it started with, and a reload with a broken operations file
// is refused with the file and the reason while the old config serves on.
func TestReloadChangesOperations(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "20s", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	// No keep-alive: a reload closes the old server's idle connections.
	httpc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL, HTTPClient: httpc}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools := func() map[string]*mcp.Tool {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool
		}
		return out
	}
	before := g.adapter("rest")

	// A call in flight across the reload (the upstream answers in 5s).
	slow := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow"})
		if err != nil {
			t.Errorf("slow across the reload: %v", err)
		}
		slow <- res
	}()
	<-up.slowStarted

	// Remove "down", rename "whoami" to "who_am_i", change get_user.
	changedOps := strings.Replace(opsFile(t, up, "20s", ""), "description: Fetch a user by id.", "description: Fetch one user by their id.", 1)
	changedOps = strings.Replace(changedOps, "  - name: whoami\n", "  - name: who_am_i\n", 1)
	i := strings.Index(changedOps, "  - name: down\n")
	j := strings.Index(changedOps, "  - name: who_am_i\n")
	changedOps = changedOps[:i] + changedOps[j:]
	g.reload(gatewayOptions{Operations: changedOps})

	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Error("no tools/list_changed notification after the reload")
	}
	got := tools()
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "get_user,slow,who_am_i" {
		t.Fatalf("tools after the reload: %v", names)
	}
	if d := got["get_user"].Description; !strings.Contains(d, "Fetch one user by their id.") {
		t.Errorf("get_user's description after the reload: %q", d)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "who_am_i"}); err != nil || res.IsError {
		t.Errorf("the renamed tool: %v %+v", err, res)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "down"})
	if err == nil && !res.IsError {
		t.Errorf("the removed tool answered: %+v", res)
	} else if msg := errText(err, res); !strings.Contains(msg, "down") {
		t.Errorf("the removed tool's error does not name it: %s", msg)
	}

	select {
	case res := <-slow:
		if res == nil || res.IsError || !strings.Contains(textOf(res), `"slow":true`) {
			t.Fatalf("the call in flight during the reload: %+v", res)
		}
	case <-ctx.Done():
		t.Fatal("the call in flight during the reload never finished")
	}

	// A broken operations file: the reload is refused, naming the file and
	// the reason, and the previous config serves on.
	code, body := g.tryReload(gatewayOptions{Operations: changedOps + "  - name: [broken\n"})
	if code == http.StatusOK || !strings.Contains(body, "ops.yaml") || !strings.Contains(body, "not valid YAML or JSON") {
		t.Fatalf("a broken operations file was not refused clearly: %d %s", code, body)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 4}}); err != nil || res.IsError {
		t.Fatalf("the previous config after a refused reload: %v %+v", err, res)
	}
	if _, ok := tools()["who_am_i"]; !ok {
		t.Error("the refused reload changed the tools")
	}
	if after := g.adapter("rest"); after.PID != before.PID || after.Starts != before.Starts {
		t.Errorf("the reloads restarted the adapter: before %+v after %+v", before, after)
	}
}

// errText is a call's failure as text: the JSON-RPC error, else the tool
// error.
func errText(err error, res *mcp.CallToolResult) string {
	if err != nil {
		return err.Error()
	}
	return textOf(res)
}
