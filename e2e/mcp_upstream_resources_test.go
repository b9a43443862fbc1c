package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPublishingOps federates a go-sdk server over Streamable HTTP with its
// tools, resources and prompts, and server-everything over stdio for its
// resources and prompts alone (no tool).
func mcpPublishingOps(t *testing.T, url string) string {
	t.Helper()
	node, js := serverEverything(t) // mcp_upstream_test.go
	return fmt.Sprintf(`
operations:
  - name: gosdk
    description: A go-sdk server over Streamable HTTP.
    adapter: mcp
    timeout: 30s
    config:
      url: %q
      prefix: go_
      resources: true
      prompts: true
  - name: everything_docs
    description: server-everything's resources and prompts.
    adapter: mcp
    timeout: 30s
    config:
      command: %q
      args: [%q, stdio]
      prefix: ev_
      exclude: ["*"]
      resources: true
      prompts: true
`, url, node, js)
}

// publishingUpstream is the e2e go-sdk server with a resource, a resource
// template and a prompt.
func publishingUpstream() *mcp.Server { return publishingUpstreamWith(nil) }

// publishingUpstreamWith is publishingUpstream with the server's options.
func publishingUpstreamWith(opts *mcp.ServerOptions) *mcp.Server {
	up := mcpUpstreamServerWith(opts)
	up.AddResource(&mcp.Resource{URI: "file:///notes.txt", Name: "notes", Title: "Notes", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "the notes"}}}, nil
		})
	up.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///days/{day}", Name: "day"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Blob: []byte("day " + strings.TrimPrefix(req.Params.URI, "file:///days/"))}}}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hello to " + req.Params.Arguments["name"]}}}}, nil
		})
	return up
}

// TestMCPUpstreamResourcesAndPrompts: the resources, resource templates
// and prompts of two real MCP servers, published by their entries, are
// listed, read and rendered through the built gateway by the go-sdk
// client, and a prompt the upstream adds reaches it with
// notifications/prompts/list_changed.
func TestMCPUpstreamResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	up := publishingUpstream()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Operations: mcpPublishingOps(t, srv.URL)})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	cs := g.connectWith(ctx, &mcp.ClientOptions{PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
		changed <- struct{}{}
	}})

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if strings.HasPrefix(tool.Name, "ev_") {
			t.Errorf("everything_docs serves a tool: %s", tool.Name)
		}
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byURI := map[string]*mcp.Resource{}
	var static string
	for _, r := range res.Resources {
		byURI[r.URI] = r
		if strings.HasPrefix(r.URI, "demo://resource/static/document/") && static == "" {
			static = r.URI
		}
	}
	if r := byURI["file:///notes.txt"]; r == nil || r.Name != "go_notes" || r.Title != "Notes" {
		t.Fatalf("resources/list: no go_notes in %+v", res.Resources)
	}
	if static == "" || !strings.HasPrefix(byURI[static].Name, "ev_") {
		t.Fatalf("resources/list: no server-everything document in %+v", res.Resources)
	}
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uriTemplates []string
	for _, rt := range tmpls.ResourceTemplates {
		uriTemplates = append(uriTemplates, rt.URITemplate)
	}
	if !slices.Contains(uriTemplates, "file:///days/{day}") || !slices.Contains(uriTemplates, "demo://resource/dynamic/text/{resourceId}") {
		t.Fatalf("resources/templates/list: %v", uriTemplates)
	}
	read := func(uri string) *mcp.ResourceContents {
		t.Helper()
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(r.Contents) == 0 {
			t.Fatalf("resources/read %s: %v %+v\n%s", uri, err, r, g.log.String())
		}
		return r.Contents[0]
	}
	if c := read("file:///notes.txt"); c.Text != "the notes" || c.MIMEType != "text/plain" {
		t.Errorf("notes: %+v", c)
	}
	if c := read("file:///days/monday"); string(c.Blob) != "day monday" {
		t.Errorf("a day: %+v", c)
	}
	if c := read(static); c.Text == "" {
		t.Errorf("%s: %+v", static, c)
	}
	if c := read("demo://resource/dynamic/text/7"); !strings.Contains(c.Text, "7") {
		t.Errorf("dynamic text 7: %+v", c)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///elsewhere"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an unpublished URI: %v", err)
	}

	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	if !slices.Contains(names, "go_greet") || !slices.Contains(names, "ev_args-prompt") || slices.Contains(names, "go_later") {
		t.Fatalf("prompts/list: %v", names)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go_greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Say hello to Ada" {
		t.Fatalf("go_greet: %v %+v", err, pr)
	}
	pr, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "ev_args-prompt", Arguments: map[string]string{"city": "Lyon"}})
	if err != nil || len(pr.Messages) == 0 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Lyon") {
		t.Fatalf("ev_args-prompt: %v %+v", err, pr)
	}

	up.AddPrompt(&mcp.Prompt{Name: "later", Description: "Added while the gateway runs."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "later prompt"}}}}, nil
		})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("no notifications/prompts/list_changed\n%s", g.log.String())
	}
	waitFor(t, "go_later to be listed", func() bool {
		p, err := cs.ListPrompts(ctx, nil)
		return err == nil && slices.ContainsFunc(p.Prompts, func(p *mcp.Prompt) bool { return p.Name == "go_later" })
	})
	if pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "go_later"}); err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "later prompt" {
		t.Fatalf("go_later: %v %+v", err, pr)
	}
}

// TestMCPUpstreamResourcesTypeScriptClient reads the federated resources
// and prompts with the official TypeScript SDK client.
func TestMCPUpstreamResourcesTypeScriptClient(t *testing.T) {
	t.Parallel()
	up := publishingUpstream()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Operations: mcpPublishingOps(t, srv.URL)})
	out := runTSClient(t, g.MCPURL, `[
		{"op":"listResources"},
		{"op":"readResource","uri":"file:///notes.txt"},
		{"op":"readResource","uri":"demo://resource/dynamic/text/3"},
		{"op":"listPrompts"},
		{"op":"getPrompt","name":"ev_args-prompt","arguments":{"city":"Oslo","state":"Oslo"}}
	]`)
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				Resources []struct{ URI, Name string }
				Contents  []struct{ URI, Text string }
				Prompts   []struct{ Name string }
				Messages  []struct {
					Role    string
					Content struct{ Text string }
				}
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 5 {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	st := run.Steps
	if !st[0].OK || !slices.ContainsFunc(st[0].Result.Resources, func(r struct{ URI, Name string }) bool { return r.Name == "go_notes" }) {
		t.Errorf("listResources: %s", out)
	}
	if c := st[1].Result.Contents; !st[1].OK || len(c) != 1 || c[0].Text != "the notes" {
		t.Errorf("readResource notes: %s", out)
	}
	if c := st[2].Result.Contents; !st[2].OK || len(c) != 1 || !strings.Contains(c[0].Text, "3") {
		t.Errorf("readResource dynamic: %s", out)
	}
	if !st[3].OK || !slices.ContainsFunc(st[3].Result.Prompts, func(p struct{ Name string }) bool { return p.Name == "go_greet" }) {
		t.Errorf("listPrompts: %s", out)
	}
	if m := st[4].Result.Messages; !st[4].OK || len(m) == 0 || !strings.Contains(m[0].Content.Text, "Oslo, Oslo") {
		t.Errorf("getPrompt: %s", out)
	}
}
