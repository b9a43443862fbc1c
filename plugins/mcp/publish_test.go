package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// publishStdio, as serverEnv, makes the test binary publishServer over
// stdio (TestMain).
const publishStdio = "publish"

// logoBytes are the contents of the blob resource mem://logo.png.
var logoBytes = []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}

// publishServer is an MCP server with resources (a text one and a blob
// one), a resource template and a prompt with arguments; withTools adds
// the tools add_resource and add_prompt, which add the resource
// mem://grown and the prompt grown (the upstream's lists change).
func publishServer(withTools bool) *gomcp.Server { return publishServerWith(nil, withTools) }

// publishServerWith is publishServer with the server's options.
func publishServerWith(opts *gomcp.ServerOptions, withTools bool) *gomcp.Server {
	s := gomcp.NewServer(&gomcp.Implementation{Name: "publisher", Version: "1"}, opts)
	text := func(uri, mime, text string) gomcp.ResourceHandler {
		return func(context.Context, *gomcp.ReadResourceRequest) (*gomcp.ReadResourceResult, error) {
			return &gomcp.ReadResourceResult{Contents: []*gomcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
		}
	}
	s.AddResource(&gomcp.Resource{URI: "mem://readme", Name: "readme", Title: "Read me", MIMEType: "text/plain"},
		func(ctx context.Context, req *gomcp.ReadResourceRequest) (*gomcp.ReadResourceResult, error) {
			res, err := text("mem://readme", "text/plain", "hello from the upstream")(ctx, req)
			res.TTLMs, res.CacheScope = 60000, "private" // caching hints of 2026-07-28
			return res, err
		})
	s.AddResource(&gomcp.Resource{URI: "mem://logo.png", Name: "logo", MIMEType: "image/png"},
		func(context.Context, *gomcp.ReadResourceRequest) (*gomcp.ReadResourceResult, error) {
			return &gomcp.ReadResourceResult{Contents: []*gomcp.ResourceContents{{URI: "mem://logo.png", MIMEType: "image/png", Blob: logoBytes}}}, nil
		})
	s.AddResourceTemplate(&gomcp.ResourceTemplate{URITemplate: "mem://notes/{id}", Name: "note", Description: "A note by id."},
		func(_ context.Context, req *gomcp.ReadResourceRequest) (*gomcp.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, "mem://notes/")
			if id == "missing" {
				return nil, &jsonrpc.Error{Code: -32002, Message: "no note missing"}
			}
			return &gomcp.ReadResourceResult{Contents: []*gomcp.ResourceContents{{URI: req.Params.URI, Text: "note " + id}}}, nil
		})
	greet := func(name string) gomcp.PromptHandler {
		return func(_ context.Context, req *gomcp.GetPromptRequest) (*gomcp.GetPromptResult, error) {
			text := fmt.Sprintf("%s, %s!", name, req.Params.Arguments["name"])
			if style := req.Params.Arguments["style"]; style != "" {
				text += " (" + style + ")"
			}
			return &gomcp.GetPromptResult{Meta: gomcp.Meta{"upstream.example/private": "for the adapter only"}, Description: "A greeting.",
				Messages: []*gomcp.PromptMessage{{Role: "user", Content: &gomcp.TextContent{Text: text}}}}, nil
		}
	}
	s.AddPrompt(&gomcp.Prompt{Name: "greet", Title: "Greet", Description: "Greets someone.", Arguments: []*gomcp.PromptArgument{
		{Name: "name", Required: true}, {Name: "style", Description: "How."}}}, greet("Hello"))
	if withTools {
		tool := func(name string, add func()) {
			s.AddTool(&gomcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
					add()
					return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "added"}}}, nil
				})
		}
		tool("add_resource", func() {
			s.AddResource(&gomcp.Resource{URI: "mem://grown", Name: "grown"}, text("mem://grown", "", "grown"))
		})
		tool("add_prompt", func() { s.AddPrompt(&gomcp.Prompt{Name: "grown"}, greet("Grown")) })
	}
	return s
}

// servePublishStdio serves publishServer over stdio and exits.
func servePublishStdio() {
	if err := publishServer(true).Run(context.Background(), &gomcp.StdioTransport{}); err != nil {
		os.Exit(2)
	}
	os.Exit(0)
}

// serveHTTP serves s over Streamable HTTP on a loopback port.
func serveHTTP(t *testing.T, s *gomcp.Server, stateless bool) string {
	srv := httptest.NewServer(gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return s },
		&gomcp.StreamableHTTPOptions{Stateless: stateless}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// publishTransports are the configs of publishServer(true) over stateful
// and stateless Streamable HTTP and over stdio, by name.
func publishTransports(t *testing.T) map[string]map[string]any {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]map[string]any{
		"http":      {"url": serveHTTP(t, publishServer(true), false)},
		"stateless": {"url": serveHTTP(t, publishServer(true), true)},
		"stdio":     {"command": exe, "env": map[string]string{serverEnv: publishStdio}},
	}
}

// with is base plus the fields of more.
func with(base map[string]any, more map[string]any) map[string]any {
	cfg := map[string]any{}
	for k, v := range base {
		cfg[k] = v
	}
	for k, v := range more {
		cfg[k] = v
	}
	return cfg
}

// definition is the fields of a published definition the tests read.
type definition struct {
	Name, Title, URI, URITemplate, MIMEType, Description string
	Arguments                                            []struct {
		Name     string
		Required bool
	}
}

// find returns the publication of list named name, with its definition.
func find(t *testing.T, list []sdk.Publication, name string) (sdk.Publication, definition) {
	t.Helper()
	var names []string
	for _, p := range list {
		var d definition
		if err := json.Unmarshal(p.Definition, &d); err != nil {
			t.Fatalf("definition %s: %v", p.Definition, err)
		}
		if d.Name == name {
			return p, d
		}
		names = append(names, d.Name)
	}
	t.Fatalf("nothing named %q in %v", name, names)
	return sdk.Publication{}, definition{}
}

// contents are the resource contents of a read.
type contents []struct {
	URI, MIMEType, Text string
	Blob                []byte
}

func read(t *testing.T, h *adaptertest.Harness, cfg json.RawMessage, uri string) (contents, *sdk.UpstreamError) {
	t.Helper()
	raw, ue, err := h.ReadResource(ctxT(t), adaptertest.Call{Config: cfg, Timeout: 20 * time.Second}, uri)
	if err != nil {
		t.Fatalf("read %s: adapter error %v", uri, err)
	}
	var c contents
	if ue == nil {
		if len(raw) > 0 && raw[0] == '{' { // with the upstream's caching hints
			var res struct{ Contents contents }
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("read %s: %s: %v", uri, raw, err)
			}
			return res.Contents, nil
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("read %s: %s: %v", uri, raw, err)
		}
	}
	return c, ue
}

// readHints reads uri and returns the upstream's caching hints the
// adapter passed on ("ttlMs cacheScope"), "" for none.
func readHints(t *testing.T, h *adaptertest.Harness, cfg json.RawMessage, uri string) string {
	t.Helper()
	raw, ue, err := h.ReadResource(ctxT(t), adaptertest.Call{Config: cfg, Timeout: 20 * time.Second}, uri)
	if err != nil || ue != nil {
		t.Fatalf("read %s: %v %v", uri, ue, err)
	}
	var res map[string]json.RawMessage
	if json.Unmarshal(raw, &res) != nil {
		return ""
	}
	return string(res["ttlMs"]) + " " + string(res["cacheScope"])
}

// An entry with resources and prompts publishes the upstream's resources,
// resource templates and prompts, with prefix before their names and
// their URIs unchanged, over stateful and stateless Streamable HTTP and
// over stdio; each publication's config, sent back, reads the resource
// (text, blob, or by the template) or renders the prompt upstream, and
// the upstream's JSON-RPC errors keep their code.
func TestPublish(t *testing.T) {
	t.Parallel()
	for name, base := range publishTransports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			info, err := h.Describe(ctxT(t))
			if err != nil || !info.Capabilities.Resources || !info.Capabilities.Prompts {
				t.Fatalf("describe: %+v %v", info, err)
			}
			tools, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{
				Config: with(base, map[string]any{"prefix": "up_", "resources": true, "prompts": true}), Timeout: 20 * time.Second})
			if err != nil || len(diags) > 0 || pub == nil {
				t.Fatalf("expand: %+v %v %v", pub, diags, err)
			}
			if got := toolNames(tools); !slices.Equal(got, []string{"up_add_prompt", "up_add_resource"}) {
				t.Errorf("tools %v", got)
			}
			if len(pub.Resources) != 2 || len(pub.ResourceTemplates) != 1 || len(pub.Prompts) != 1 {
				t.Fatalf("published %d resources, %d templates, %d prompts", len(pub.Resources), len(pub.ResourceTemplates), len(pub.Prompts))
			}
			readme, def := find(t, pub.Resources, "up_readme")
			if def.URI != "mem://readme" || def.Title != "Read me" || def.MIMEType != "text/plain" {
				t.Errorf("readme: %s", readme.Definition)
			}
			var cfg map[string]any
			if json.Unmarshal(readme.Config, &cfg) != nil || cfg["prefix"] != nil || cfg["resources"] != nil ||
				cfg["prompts"] != nil || cfg["tool"] != nil || cfg["prompt"] != nil || cfg["url"] != base["url"] || cfg["command"] != base["command"] {
				t.Errorf("resource config: %s", readme.Config)
			}
			c, ue := read(t, h, readme.Config, "mem://readme")
			if ue != nil || len(c) != 1 || c[0].Text != "hello from the upstream" || c[0].URI != "mem://readme" || c[0].MIMEType != "text/plain" {
				t.Errorf("read readme: %+v %+v", c, ue)
			}
			// The upstream's caching hints are passed on where its
			// protocol has them (2026-07-28: the stateful go-sdk server
			// speaks 2025-11-25 with the adapter).
			want := `60000 "private"`
			if name == "http" {
				want = ""
			}
			if got := readHints(t, h, readme.Config, "mem://readme"); got != want {
				t.Errorf("read readme: caching hints %q, want %q", got, want)
			}
			logo, def := find(t, pub.Resources, "up_logo")
			if def.URI != "mem://logo.png" {
				t.Errorf("logo: %s", logo.Definition)
			}
			if c, ue := read(t, h, logo.Config, "mem://logo.png"); ue != nil || len(c) != 1 || string(c[0].Blob) != string(logoBytes) || c[0].MIMEType != "image/png" {
				t.Errorf("read logo: %+v %+v", c, ue)
			}
			note, def := find(t, pub.ResourceTemplates, "up_note")
			if def.URITemplate != "mem://notes/{id}" || def.Description != "A note by id." {
				t.Errorf("note: %s", note.Definition)
			}
			if c, ue := read(t, h, note.Config, "mem://notes/42"); ue != nil || len(c) != 1 || c[0].Text != "note 42" || c[0].URI != "mem://notes/42" {
				t.Errorf("read note 42: %+v %+v", c, ue)
			}
			if _, ue := read(t, h, note.Config, "mem://notes/missing"); ue == nil || ue.Kind != sdk.KindUpstreamStatus ||
				ue.Status != "-32002" || ue.Message != "no note missing" || !strings.HasPrefix(ue.Upstream, "mcp ") {
				t.Errorf("read missing note: %+v", ue)
			}
			if _, ue := read(t, h, readme.Config, "mem://nope"); ue == nil || ue.Kind != sdk.KindUpstreamStatus ||
				ue.Status != fmt.Sprint(gomcp.CodeResourceNotFound) || ue.Message != "Resource not found" || !strings.Contains(string(ue.Detail), "mem://nope") {
				t.Errorf("read unknown: %+v", ue)
			}

			greet, def := find(t, pub.Prompts, "up_greet")
			if def.Title != "Greet" || len(def.Arguments) != 2 || def.Arguments[0].Name != "name" || !def.Arguments[0].Required {
				t.Errorf("greet: %s", greet.Definition)
			}
			if json.Unmarshal(greet.Config, &cfg) != nil || cfg["prompt"] != "greet" || cfg["prefix"] != nil || cfg["prompts"] != nil {
				t.Errorf("prompt config: %s", greet.Config)
			}
			raw, ue, err := h.GetPrompt(ctxT(t), adaptertest.Call{Config: greet.Config, Timeout: 20 * time.Second}, "up_greet",
				map[string]string{"name": "Ada", "style": "warmly"})
			var res struct {
				Description string
				Messages    []struct {
					Role    string
					Content struct{ Type, Text string }
				}
			}
			if err != nil || ue != nil || json.Unmarshal(raw, &res) != nil || res.Description != "A greeting." || len(res.Messages) != 1 ||
				res.Messages[0].Role != "user" || res.Messages[0].Content.Type != "text" || res.Messages[0].Content.Text != "Hello, Ada! (warmly)" {
				t.Errorf("get greet: %s %+v %v", raw, ue, err)
			}
			if strings.Contains(string(raw), "_meta") {
				t.Errorf("the upstream's _meta was passed on: %s", raw)
			}
			_, ue, err = h.GetPrompt(ctxT(t), adaptertest.Call{Config: with(base, map[string]any{"prompt": "nope"}), Timeout: 20 * time.Second}, "nope", nil)
			if err != nil || ue == nil || ue.Kind != sdk.KindUpstreamStatus || !strings.Contains(ue.Message, "nope") {
				t.Errorf("get unknown prompt: %+v %v", ue, err)
			}
		})
	}
}

// Without resources and prompts an entry publishes nothing; the options
// are not connection fields (entries with and without them share one
// upstream connection, and the derived tools' configs lack them); with
// tool they are a load error naming the field, as is prompt in an entry.
func TestPublishOptions(t *testing.T) {
	t.Parallel()
	url := serveHTTP(t, publishServer(true), false)
	a := newAdapter()
	t.Cleanup(a.pool.closeAll)
	h := adaptertest.New(t, a)
	tools, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": url}})
	if err != nil || len(diags) > 0 || pub != nil || len(tools) != 2 {
		t.Fatalf("options off: %v %+v %v %v", toolNames(tools), pub, diags, err)
	}
	tools, pub, diags, err = h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": url, "resources": true, "prompts": true}})
	if err != nil || len(diags) > 0 || pub == nil || len(tools) != 2 {
		t.Fatalf("options on: %v %+v %v %v", toolNames(tools), pub, diags, err)
	}
	var cfg map[string]any
	if json.Unmarshal(tools[0].Config, &cfg) != nil || cfg["tool"] == nil || cfg["resources"] != nil || cfg["prompts"] != nil {
		t.Errorf("derived tool config: %s", tools[0].Config)
	}
	if n := a.pool.conns.Len(); n != 1 {
		t.Errorf("%d upstream connections, want 1", n)
	}
	for _, c := range []struct {
		config map[string]any
		fields []string
	}{
		{map[string]any{"url": url, "tool": "add_prompt", "resources": true}, []string{"resources"}},
		{map[string]any{"url": url, "tool": "add_prompt", "prompts": true, "resources": true}, []string{"resources", "prompts"}},
		{map[string]any{"url": url, "prompt": "greet", "prefix": "x_"}, []string{"prompt"}},
	} {
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: c.config})
		var fields []string
		for _, d := range diags {
			fields = append(fields, d.Field)
		}
		if err != nil || !slices.Equal(fields, c.fields) {
			t.Errorf("%v: %+v %v", c.config, diags, err)
		}
		if _, _, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: c.config}); err != nil || len(diags) != len(c.fields) || diags[0].Field != c.fields[0] {
			t.Errorf("expand %v: %+v %v", c.config, diags, err)
		}
	}
}

// noToolsList makes s answer tools/list with "method not found", as
// servers without the tools capability may.
func noToolsList(s *gomcp.Server) *gomcp.Server {
	s.AddReceivingMiddleware(func(next gomcp.MethodHandler) gomcp.MethodHandler {
		return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
			if method == "tools/list" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// An entry that publishes resources or prompts loads without tools (an
// upstream with none, whether it lists none or has no tools/list, or
// include selecting none); an upstream without the capability of what
// the entry publishes gets a warning naming the field, and is an error
// only when the entry would then serve nothing.
func TestPublishWithoutTools(t *testing.T) {
	t.Parallel()
	// The upstreams close after the harness's sessions end.
	withoutTools := map[string]string{
		"empty tools/list": serveHTTP(t, publishServer(false), false),
		"no tools/list":    serveHTTP(t, noToolsList(publishServer(false)), false),
	}
	url := serveHTTP(t, publishServer(true), false)
	up := newHTTPUpstream(t, false) // tools only
	empty := serveHTTP(t, noToolsList(gomcp.NewServer(&gomcp.Implementation{Name: "empty", Version: "1"}, nil)), false)
	h := newHarness(t)
	for name, url := range withoutTools {
		tools, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": url, "resources": true}, Timeout: 20 * time.Second})
		if err != nil || len(diags) > 0 || len(tools) != 0 || pub == nil || len(pub.Resources) != 2 || len(pub.Prompts) != 0 {
			t.Errorf("%s: %v %+v %v %v", name, toolNames(tools), pub, diags, err)
		}
	}
	tools, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": url, "prompts": true, "include": []string{"zz*"}}, Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 || len(tools) != 0 || pub == nil || len(pub.Prompts) != 1 {
		t.Errorf("include selecting none: %v %+v %v %v", toolNames(tools), pub, diags, err)
	}

	tools, pub, diags, err = h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": up.srv.URL, "resources": true, "prompts": true}, Timeout: 20 * time.Second})
	if err != nil || len(tools) == 0 || pub != nil || len(diags) != 2 {
		t.Fatalf("tools only: %d tools %+v %+v %v", len(tools), pub, diags, err)
	}
	for i, f := range []string{"resources", "prompts"} {
		if d := diags[i]; d.Field != f || d.Severity != sdk.SeverityWarning || !strings.Contains(d.Message, "offers no "+f) {
			t.Errorf("tools only: %+v", d)
		}
	}
	_, _, diags, err = h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": empty, "prompts": true}, Timeout: 20 * time.Second})
	// The expansion failed, so the entry is not asked what it publishes.
	if err != nil || len(diags) != 1 || diags[0].Field != "url" || diags[0].Severity == sdk.SeverityWarning || !strings.Contains(diags[0].Message, "serves no tools") {
		t.Errorf("nothing at all: %+v %v", diags, err)
	}
}

// An unreachable upstream fails the expansion once: what the entry
// publishes is not asked for (that would reach for it again).
func TestPublishUnreachable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	_, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: map[string]any{"url": "http://127.0.0.1:1/mcp?key=s3cret", "resources": true, "prompts": true}, Timeout: 5 * time.Second})
	if err != nil || pub != nil || len(diags) != 1 {
		t.Fatalf("%+v %+v %v", pub, diags, err)
	}
	if d := diags[0]; d.Field != "url" || d.Severity == sdk.SeverityWarning || strings.Contains(d.Message, "s3cret") ||
		!strings.Contains(d.Message, "listing the tools of mcp 127.0.0.1:1 failed: cannot open an MCP session") {
		t.Errorf("%+v", d)
	}
}

// An upstream whose resources or prompts change
// (notifications/resources/list_changed, notifications/prompts/list_changed)
// has the adapter name the entries that publish them, and only those, to
// the hosts watching, over Streamable HTTP and over stdio; expanding them
// again publishes the new resource or prompt.
func TestWatchPublishedListChanged(t *testing.T) {
	t.Parallel()
	all := publishTransports(t)
	for _, name := range []string{"http", "stdio"} {
		base := all[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			events := make(chan []string, 16)
			go func() { _ = h.Client.WatchOperations(ctx, "test", func(ops []string) { events <- ops }) }()
			entries := map[string]map[string]any{
				"res":   with(base, map[string]any{"resources": true}),
				"pr":    with(base, map[string]any{"prompts": true}),
				"plain": base,
			}
			expand := func(entry string) *sdk.Published {
				_, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Operation: entry, Config: entries[entry], Timeout: 20 * time.Second})
				if err != nil || len(diags) > 0 {
					t.Fatalf("expand %s: %v %v", entry, diags, err)
				}
				return pub
			}
			for _, e := range []string{"res", "pr", "plain"} {
				expand(e)
			}
			// named waits until want is named; entries named before may be
			// named again, others must not be.
			var before []string
			named := func(want string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for {
					select {
					case ops := <-events:
						for _, op := range ops {
							if op != want && !slices.Contains(before, op) {
								t.Fatalf("named %v, want [%s]", ops, want)
							}
						}
						if slices.Contains(ops, want) {
							before = append(before, want)
							return
						}
					case <-deadline:
						t.Fatalf("%s not named within 30s", want)
					}
				}
			}
			if res, ue := call(t, h, base, "add_resource", `{}`, 20*time.Second); ue != nil || res.Text != "added" {
				t.Fatalf("add_resource: %+v %+v", res, ue)
			}
			named("res")
			if pub := expand("res"); pub == nil || len(pub.Resources) != 3 {
				t.Fatalf("expanded again: %+v", pub)
			}
			if res, ue := call(t, h, base, "add_prompt", `{}`, 20*time.Second); ue != nil || res.Text != "added" {
				t.Fatalf("add_prompt: %+v %+v", res, ue)
			}
			named("pr")
			pub := expand("pr")
			if pub == nil || len(pub.Prompts) != 2 {
				t.Fatalf("expanded again: %+v", pub)
			}
			grown, _ := find(t, pub.Prompts, "grown")
			raw, ue, err := h.GetPrompt(ctxT(t), adaptertest.Call{Config: grown.Config, Timeout: 20 * time.Second}, "grown", map[string]string{"name": "Bo"})
			if err != nil || ue != nil || !strings.Contains(string(raw), "Grown, Bo!") {
				t.Errorf("get grown: %s %+v %v", raw, ue, err)
			}
		})
	}
}

// checkEverythingPublished publishes the resources, resource templates and
// prompts of server-everything through the adapter, reads a static
// resource and a templated one, and renders a prompt with arguments.
func checkEverythingPublished(t *testing.T, h *adaptertest.Harness, base map[string]any) {
	_, pub, diags, err := h.ExpandPublished(ctxT(t), adaptertest.Call{Config: with(base, map[string]any{"resources": true, "prompts": true}), Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 || pub == nil {
		t.Fatalf("expand: %+v %v %v", pub, diags, err)
	}
	doc, def := find(t, pub.Resources, "ev_instructions.md")
	if def.URI != "demo://resource/static/document/instructions.md" || def.MIMEType != "text/markdown" {
		t.Errorf("instructions.md: %s", doc.Definition)
	}
	if c, ue := read(t, h, doc.Config, def.URI); ue != nil || len(c) != 1 || c[0].Text == "" || c[0].MIMEType != "text/markdown" {
		t.Errorf("read %s: %+v %+v", def.URI, c, ue)
	}
	tmpl, def := find(t, pub.ResourceTemplates, "ev_Dynamic Text Resource")
	if def.URITemplate != "demo://resource/dynamic/text/{resourceId}" {
		t.Errorf("template: %s", tmpl.Definition)
	}
	if c, ue := read(t, h, tmpl.Config, "demo://resource/dynamic/text/7"); ue != nil || len(c) != 1 || !strings.HasPrefix(c[0].Text, "Resource 7:") {
		t.Errorf("read templated: %+v %+v", c, ue)
	}
	prompt, def := find(t, pub.Prompts, "ev_args-prompt")
	if len(def.Arguments) != 2 {
		t.Errorf("args-prompt: %s", prompt.Definition)
	}
	raw, ue, err := h.GetPrompt(ctxT(t), adaptertest.Call{Config: prompt.Config, Timeout: 20 * time.Second}, "ev_args-prompt",
		map[string]string{"city": "Chicago", "state": "IL"})
	if err != nil || ue != nil || !strings.Contains(string(raw), "What's weather in Chicago, IL?") {
		t.Errorf("args-prompt: %s %+v %v", raw, ue, err)
	}
}
