package mcpserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/plugins/sdk"
)

// publishAdapter publishes the resources, templates and prompts of the
// JSON file its config names, and serves them.
type publishAdapter struct{}

func (publishAdapter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "publish", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (publishAdapter) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{Structured: req.Arguments}, nil
}

func (publishAdapter) ExpandOperation(context.Context, *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	return nil, nil
}

func (publishAdapter) Publish(_ context.Context, op *sdk.Operation) (*sdk.Published, []sdk.Diagnostic) {
	var c struct {
		File string `json:"file"`
	}
	_ = json.Unmarshal(op.Config, &c)
	var defs struct{ Resources, Templates, Prompts []json.RawMessage }
	b, err := os.ReadFile(c.File)
	if err == nil {
		err = json.Unmarshal(b, &defs)
	}
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf("file", "%v", err)}
	}
	list := func(in []json.RawMessage) (out []sdk.Publication) {
		for _, d := range in {
			out = append(out, sdk.Publication{Definition: d})
		}
		return out
	}
	return &sdk.Published{Resources: list(defs.Resources), ResourceTemplates: list(defs.Templates), Prompts: list(defs.Prompts)}, nil
}

// ReadResource answers the contents of a URI; one whose path starts
// with hinted- with the upstream's caching hints too, scoped as its path
// ends (results_test.go).
func (publishAdapter) ReadResource(_ context.Context, req *sdk.ResourceRequest) (json.RawMessage, error) {
	contents := []map[string]string{{"uri": req.URI, "text": "contents of " + req.URI}}
	if scope, ok := strings.CutPrefix(req.URI, "file:///hinted-"); ok {
		return json.Marshal(map[string]any{"contents": contents, "ttlMs": 60000, "cacheScope": scope})
	}
	return json.Marshal(contents)
}

// GetPrompt renders a prompt as a 2026-07-28 upstream answers it, with
// its resultType.
func (publishAdapter) GetPrompt(_ context.Context, req *sdk.PromptRequest) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"resultType": "complete", "messages": []any{
		map[string]any{"role": "user", "content": map[string]string{"type": "text", "text": req.Name + " " + req.Arguments["name"]}}}})
}

// Published resources, templates and prompts reach a go-sdk client: listed,
// read (a template's URI too) and rendered; the policy hides and refuses
// them as it does tools; a re-expansion that changes them is announced.
func TestPublishedThroughEndpoint(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pub.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"resources": [{"uri": "file:///readme", "name": "readme", "mimeType": "text/plain"},
	                       {"uri": "file:///secret", "name": "secret_notes"}],
	        "templates": [{"uriTemplate": "file:///logs/{day}", "name": "logs"}],
	        "prompts": [{"name": "greet", "arguments": [{"name": "name"}]}, {"name": "admin_prompt"}]}`)
	h := newTestHostOf(t, "publish", `version: 1
operations:
  - name: docs
    adapter: publish
    config: {file: "`+file+`"}
`, nil, nil)
	policy, err := auth.CompilePolicy([]auth.Rule{
		{Name: "no-secrets", Expression: `!tool.name.startsWith("secret") && !tool.name.startsWith("admin")`},
		{Name: "no-private-logs", Expression: `tool.mode != "resource_template" || !args.uri.endsWith("private")`},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions("default")
	opts.Policy = policy
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(h, nil)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	changed := make(chan string, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { changed <- "prompts" },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { changed <- "resources" },
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || caps.Prompts == nil {
		t.Fatalf("capabilities: %+v", caps)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 1 || rl.Resources[0].URI != "file:///readme" {
		t.Fatalf("resources/list: %+v %v", rl, err)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 {
		t.Fatalf("resources/templates/list: %+v %v", tl, err)
	}
	pl, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pl.Prompts) != 1 || pl.Prompts[0].Name != "greet" {
		t.Fatalf("prompts/list: %+v %v", pl, err)
	}
	read := func(uri string) (string, error) {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return r.Contents[0].Text, nil
	}
	if got, err := read("file:///readme"); err != nil || got != "contents of file:///readme" {
		t.Errorf("read: %q %v", got, err)
	}
	if got, err := read("file:///logs/monday"); err != nil || got != "contents of file:///logs/monday" {
		t.Errorf("read through the template: %q %v", got, err)
	}
	if _, err := read("file:///secret"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a hidden resource: %v", err)
	}
	if _, err := read("file:///logs/private"); err == nil || !strings.Contains(err.Error(), `denied by policy rule "no-private-logs"`) {
		t.Errorf("a refused read: %v", err)
	}
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || pr.Messages[0].Content.(*mcp.TextContent).Text != "greet Ada" {
		t.Errorf("prompts/get: %+v %v", pr, err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "admin_prompt"}); err == nil || !strings.Contains(err.Error(), `unknown prompt "admin_prompt"`) {
		t.Errorf("a hidden prompt: %v", err)
	}

	write(`{"prompts": [{"name": "greet", "arguments": [{"name": "name"}]}, {"name": "farewell"}]}`)
	if ok, err := h.Reexpand(ctx, "docs"); err != nil || !ok {
		t.Fatalf("reexpand: %v %v", ok, err)
	}
	ep.republish(h)
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case k := <-changed:
			seen[k] = true
		case <-ctx.Done():
			t.Fatalf("list_changed notifications: %v", seen)
		}
	}
	if rl, err := cs.ListResources(ctx, nil); err != nil || len(rl.Resources) != 0 {
		t.Errorf("resources after the change: %+v %v", rl, err)
	}
	if pl, err := cs.ListPrompts(ctx, nil); err != nil || len(pl.Prompts) != 2 {
		t.Errorf("prompts after the change: %+v %v", pl, err)
	}
}
