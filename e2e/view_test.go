package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/mcptest"
)

// viewOperations: a read-only get_user and a destructive drop_user over
// the upstream at base.
const viewOperations = `
operations:
  - name: get_user
    title: Get a user
    description: Fetch a user by id.
    adapter: rest
    annotations: {read_only: true}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: drop_user
    title: Drop a user
    description: Remove a user account for good.
    adapter: rest
    annotations: {destructive: true}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
`

// Two endpoints over one operations file publish different views: /curated
// a renamed and overridden get_user alone, /mcp the discovery meta-tools
// under a policy that keeps drop_user for the admin agent. A caller the
// policy denies drop_user neither finds it nor calls it through them.
func TestViewEndpoints(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(viewOperations, up.URL),
		Site: `crank /curated ops.yaml {
		view {
			include get_user
			tool get_user {
				name lookup_user
				title "Look up a customer"
				description "Find one customer account by its numeric id."
			}
		}
	}`,
		Handler: `agent_header X-Agent-Id
		policy {
			rule admins-drop ` + "`" + `tool.name != "drop_user" || caller.id == "header:admin"` + "`" + `
		}
		view {
			discovery only
		}`})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	curated := g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: strings.Replace(g.MCPURL, "/mcp", "/curated", 1)})
	tools, err := curated.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("/curated tools/list: %v %+v", err, tools)
	}
	if lu := tools.Tools[0]; lu.Name != "lookup_user" || lu.Title != "Look up a customer" ||
		lu.Description != "Find one customer account by its numeric id." {
		t.Errorf("/curated publishes %+v", lu)
	}
	res, err := curated.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_user", Arguments: map[string]any{"id": 7}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), `"User 7"`) {
		t.Errorf("lookup_user: %v %s", err, textOf(res))
	}
	for _, name := range []string{"get_user", "drop_user"} {
		if _, err := curated.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"id": 7}}); err == nil ||
			!strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s on /curated: %v", name, err)
		}
	}

	// The admin API lists each endpoint's view.
	resp, err := http.Get(g.AdminURL + "/crank/endpoints")
	if err != nil {
		t.Fatal(err)
	}
	var eps struct {
		Endpoints []struct {
			View *struct {
				Discovery string `json:"discovery"`
				Tools     []struct {
					Name, Tool string
				} `json:"tools"`
			} `json:"view"`
		} `json:"endpoints"`
	}
	err = json.NewDecoder(resp.Body).Decode(&eps)
	resp.Body.Close()
	views := map[string]string{}
	for _, ep := range eps.Endpoints {
		if ep.View != nil {
			var tools []string
			for _, tl := range ep.View.Tools {
				tools = append(tools, tl.Name+"="+tl.Tool)
			}
			views[ep.View.Discovery] = strings.Join(tools, ",")
		}
	}
	if err != nil || len(views) != 2 || views["off"] != "lookup_user=get_user" || views["only"] != "drop_user=drop_user,get_user=get_user" {
		t.Errorf("GET /crank/endpoints: %v %v", err, views)
	}

	intern, admin := g.connectAs(ctx, "intern"), g.connectAs(ctx, "admin")
	if got := toolNames(t, ctx, intern); got != "search_tools,describe_tool,call_tool" {
		t.Errorf("/mcp lists %s", got)
	}
	search := func(cs *mcp.ClientSession, query string) []string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": query}})
		if err != nil || res.IsError {
			t.Fatalf("search_tools %q: %v %s", query, err, textOf(res))
		}
		var out struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		if err := json.Unmarshal([]byte(textOf(res)), &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range out.Tools {
			names = append(names, h.Name)
		}
		return names
	}
	if got := search(admin, "drop a user account"); len(got) == 0 || got[0] != "drop_user" {
		t.Errorf("the admin's search: %v", got)
	}
	if got := search(intern, "drop a user account"); slices.Contains(got, "drop_user") || !slices.Contains(got, "get_user") {
		t.Errorf("the intern's search: %v", got)
	}
	for meta, args := range map[string]map[string]any{
		"describe_tool": {"name": "drop_user"},
		"call_tool":     {"name": "drop_user", "arguments": map[string]any{"id": 1}},
	} {
		res, err := intern.CallTool(ctx, &mcp.CallToolParams{Name: meta, Arguments: args})
		if err != nil || !res.IsError || !strings.Contains(textOf(res), `unknown tool "drop_user"`) {
			t.Errorf("%s drop_user as the intern: %v %s", meta, err, textOf(res))
		}
	}
	res, err = admin.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "drop_user", "arguments": map[string]any{"id": 3}}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), `"User 3"`) {
		t.Errorf("call_tool drop_user as the admin: %v %s", err, textOf(res))
	}
	res, err = intern.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "get_user", "arguments": map[string]any{"id": 4}}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), `"User 4"`) {
		t.Errorf("call_tool get_user as the intern: %v %s", err, textOf(res))
	}
}

// The demo's two endpoints: the size of tools/list in full (/mcp) and in
// discovery mode (/discover), bytes of the JSON-RPC result as a proxy for
// tokens; and an agent-like TypeScript SDK script that finds the log
// window tool by searching, describes it and calls it through call_tool,
// receiving its progress.
func TestDemoDiscoverySize(t *testing.T) {
	t.Parallel()
	d := startDemo(t)
	size := func(path string) (int, int) { return toolsListSize(t, strings.Replace(d.mcpURL(), "/mcp", path, 1)) }
	full, fullTools := size("/mcp")
	disc, discTools := size("/discover")
	t.Logf("demo tools/list: full %d bytes (%d tools), discovery %d bytes (%d tools), %.1fx smaller",
		full, fullTools, disc, discTools, float64(full)/float64(disc))
	if discTools != 3 || disc*5 > full {
		t.Errorf("discovery mode lists %d tools in %d bytes, the full list %d in %d", discTools, disc, fullTools, full)
	}

	t.Run("typescript agent", func(t *testing.T) {
		requireTSClient(t)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "discover.mjs"),
			strings.Replace(d.mcpURL(), "/mcp", "/discover", 1), "recent errors in the logs")
		b, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("discover.mjs: %v\n%s", err, stderr)
		}
		var out struct {
			Tools []string `json:"tools"`
			Hits  []struct {
				Name string `json:"name"`
				Mode string `json:"mode"`
			} `json:"hits"`
			Described struct {
				Name        string         `json:"name"`
				Mode        string         `json:"mode"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"described"`
			Progress int    `json:"progress"`
			IsError  bool   `json:"isError"`
			Result   string `json:"result"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("discover.mjs printed %s: %v", b, err)
		}
		t.Logf("search hits %+v; call_tool relayed %d progress notifications", out.Hits, out.Progress)
		if len(out.Hits) == 0 || out.Hits[0].Name != "recent_logs" || out.Hits[0].Mode != "window" {
			t.Errorf("search for recent errors in the logs: %+v", out.Hits)
		}
		if out.Described.Name != "recent_logs" || out.Described.Mode != "window" || out.Described.InputSchema == nil {
			t.Errorf("describe_tool recent_logs: %+v", out.Described)
		}
		if out.IsError || out.Progress == 0 || !strings.Contains(out.Result, "level") {
			t.Errorf("call_tool recent_logs: %d progress notifications, isError %v, %s", out.Progress, out.IsError, out.Result)
		}
	})
}

// A large imported API: SendGrid's v3 OpenAPI document (sendgrid-oai, MIT
// licence; kin-openapi keeps a copy as test data, read here from the Go
// module cache), one tool per operation, in full (/mcp) and in discovery
// mode (/discover).
func TestLargeAPIDiscoverySize(t *testing.T) {
	t.Parallel()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/getkin/kin-openapi").Output()
	if err != nil {
		t.Fatalf("locating kin-openapi: %v", err)
	}
	doc := filepath.Join(strings.TrimSpace(string(dir)), "openapi3", "testdata", "oai_v3_stoplight.json")
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: sendgrid
    adapter: rest
    config:
      openapi:
        document: %q
        base_url: http://127.0.0.1:1
        credentials: {Authorization: not-a-real-key}
`, doc), Site: `crank /discover ops.yaml {
		view {
			discovery only
		}
	}`})
	size := func(path string) (int, int) { return toolsListSize(t, strings.Replace(g.MCPURL, "/mcp", path, 1)) }
	full, fullTools := size("/mcp")
	disc, discTools := size("/discover")
	t.Logf("SendGrid v3 tools/list: full %d bytes (%d tools), discovery %d bytes (%d tools), %.0fx smaller",
		full, fullTools, disc, discTools, float64(full)/float64(disc))
	if fullTools < 300 || discTools != 3 {
		t.Errorf("%d tools in full, %d in discovery mode", fullTools, discTools)
	}
	// What an agent then reads: one search, one description.
	c := &mcptest.Client{T: t, URL: strings.Replace(g.MCPURL, "/mcp", "/discover", 1)}
	c.Initialize("2025-11-25")
	search := c.Call("tools/call", map[string]any{"name": "search_tools", "arguments": map[string]any{"query": "add emails to a suppression group", "limit": 5}})
	var hits struct {
		StructuredContent struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"structuredContent"`
	}
	if search.Error != nil || json.Unmarshal(search.Result, &hits) != nil || len(hits.StructuredContent.Tools) == 0 {
		t.Fatalf("search_tools: %+v", search)
	}
	top := hits.StructuredContent.Tools[0].Name
	describe := c.Call("tools/call", map[string]any{"name": "describe_tool", "arguments": map[string]any{"name": top}})
	t.Logf("search for \"add emails to a suppression group\": %d bytes, best %s (%v); describe_tool: %d bytes",
		len(search.Result), top, hits.StructuredContent.Tools, len(describe.Result))
	if !strings.Contains(strings.ToLower(top), "suppression") {
		t.Errorf("search for add emails to a suppression group: %v", hits.StructuredContent.Tools)
	}
}

// toolsListSize is the byte size of the result of one tools/list on the
// MCP endpoint url (one page: it fails the test when there are more),
// and how many tools it lists.
func toolsListSize(t *testing.T, url string) (int, int) {
	t.Helper()
	c := &mcptest.Client{T: t, URL: url}
	c.Initialize("2025-11-25")
	r := c.Call("tools/list", map[string]any{})
	var res struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.NextCursor != "" {
		t.Fatalf("tools/list on %s: %+v", url, r)
	}
	return len(r.Result), len(res.Tools)
}
