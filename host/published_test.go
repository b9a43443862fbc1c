package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/plugins/sdk"
)

// Publish: behavior "publish" publishes the resources, templates and
// prompts of its config's publish object (or of the file it names, for
// re-expansion), each with its config plus the entry's secret.
func (testAdapter) Publish(_ context.Context, op *sdk.Operation) (*sdk.Published, []sdk.Diagnostic) {
	var c struct {
		Behavior string `json:"behavior"`
		Secret   string `json:"secret"`
		File     string `json:"file"`
		Publish  struct {
			Resources, Templates, Prompts []json.RawMessage
		} `json:"publish"`
	}
	_ = json.Unmarshal(op.Config, &c)
	if c.Behavior != "publish" {
		return nil, nil
	}
	if c.File != "" {
		b, err := os.ReadFile(c.File)
		if err == nil {
			err = json.Unmarshal(b, &c.Publish)
		}
		if err != nil {
			return nil, []sdk.Diagnostic{sdk.Errorf("file", "%v", err)}
		}
	}
	cfg, _ := json.Marshal(map[string]string{"behavior": "publish", "secret": c.Secret})
	list := func(defs []json.RawMessage) []sdk.Publication {
		var out []sdk.Publication
		for _, d := range defs {
			out = append(out, sdk.Publication{Definition: d, Config: cfg})
		}
		return out
	}
	return &sdk.Published{Resources: list(c.Publish.Resources), ResourceTemplates: list(c.Publish.Templates),
		Prompts: list(c.Publish.Prompts)}, nil
}

// ReadResource answers a URI with "missing" in it with the upstream's
// not-found error, any other with a text naming it and the secret.
func (testAdapter) ReadResource(_ context.Context, req *sdk.ResourceRequest) (json.RawMessage, error) {
	var c testConfig
	_ = json.Unmarshal(req.Operation.Config, &c)
	if strings.Contains(req.URI, "missing") {
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Upstream: "mcp up", Status: "-32002", Message: "no such resource",
			Protocol: &sdk.ProtocolError{Code: -32002, Message: "no such resource, key " + c.Secret,
				Data: json.RawMessage(fmt.Sprintf(`{"uri":%q,"key":%q}`, req.URI, c.Secret))}}
	}
	return json.Marshal([]map[string]string{{"uri": req.URI, "mimeType": "text/plain", "text": "contents of " + req.URI + ", key " + c.Secret}})
}

// GetPrompt greets the name argument.
func (testAdapter) GetPrompt(_ context.Context, req *sdk.PromptRequest) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"description": req.Name, "messages": []any{
		map[string]any{"role": "user", "content": map[string]string{"type": "text", "text": "Hello " + req.Arguments["name"]}}}})
}

const publishYAML = `
adapters:
  test:
    command: %s
    env: {CRANK_HOST_TEST_ADAPTER: "1"}
operations:
  - name: echo
    description: Echo.
    adapter: test
    config: {behavior: echo}
  - name: docs
    adapter: test
    config:
      behavior: publish
      secret: "{env.CRANK_TEST_SECRET}"
      publish:
        resources: [{uri: "file:///readme", name: readme, title: Read me, mimeType: text/plain}, {uri: "file:///missing", name: gone}]
        templates: [{uriTemplate: "file:///logs/{day}", name: logs}]
        prompts: [{name: greet, arguments: [{name: name, required: true}]}]
`

// An entry may publish resources, templates and prompts and no tool; the
// host serves them through its adapter, redacted, with the upstream's
// error code; bad definitions and collisions fail the load naming them.
func TestPublications(t *testing.T) {
	t.Setenv("CRANK_TEST_SECRET", "s3cr3t-value")
	f, err := newFixture(t, publishYAML)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range f.h.Publications() {
		got = append(got, string(p.Kind)+" "+p.Key+" "+p.Name+" "+p.Entry)
	}
	want := "resource file:///readme readme docs|resource file:///missing gone docs|resource_template file:///logs/{day} logs docs|prompt greet greet docs"
	if strings.Join(got, "|") != want {
		t.Fatalf("publications:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if ops := f.h.Operations(); len(ops) != 1 || ops[0].Name != "echo" {
		t.Errorf("tools: %v", ops)
	}
	ctx := context.Background()
	pub := func(kind host.PublicationKind, key string) *host.Publication {
		p, _ := f.h.Publication(kind, key)
		return p
	}
	raw, err := f.h.ReadResource(ctx, host.PublicationRequest{Publication: pub(host.KindResourceTemplate, "file:///logs/{day}"), URI: "file:///logs/monday"})
	if err != nil || !strings.Contains(string(raw), "contents of file:///logs/monday") || strings.Contains(string(raw), "s3cr3t") {
		t.Errorf("read: %s, %v", raw, err)
	}
	_, err = f.h.ReadResource(ctx, host.PublicationRequest{Publication: pub(host.KindResource, "file:///missing"), URI: "file:///missing"})
	var pe *host.PublicationError
	// The upstream's own JSON-RPC error, as it came, redacted.
	if !errors.As(err, &pe) || pe.Code != -32002 || pe.Message != "no such resource, key [REDACTED]" ||
		string(pe.Data) != `{"uri":"file:///missing","key":"[REDACTED]"}` {
		t.Errorf("read of a missing resource: %+v", err)
	}
	if _, ok := f.h.Publication(host.KindResource, "file:///other"); ok {
		t.Error("an unpublished resource is a publication")
	}
	raw, err = f.h.GetPrompt(ctx, host.PublicationRequest{Publication: pub(host.KindPrompt, "greet"), Arguments: map[string]string{"name": "Ada"}})
	if err != nil || !strings.Contains(string(raw), "Hello Ada") {
		t.Errorf("prompt: %s, %v", raw, err)
	}
	if _, ok := f.h.Publication(host.KindPrompt, "nope"); ok {
		t.Error("an unknown prompt is a publication")
	}
	for _, req := range []host.PublicationRequest{{}, {Publication: pub(host.KindResource, "file:///readme")}} {
		if _, err = f.h.GetPrompt(ctx, req); !errors.As(err, &pe) || pe.Code != -32602 {
			t.Errorf("rendering of no prompt: %v", err)
		}
	}

	for _, tc := range []struct{ publish, want string }{
		{`{resources: [{uri: "readme", name: r}]}`, `uri "readme" is not an absolute URI`},
		{`{resources: [{uri: "file:///a"}]}`, `name is required`},
		{`{templates: [{uriTemplate: "file:///{a", name: t}]}`, `is not an absolute RFC 6570 URI template`},
		{`{prompts: [{name: "two words"}]}`, `prompt name "two words"`},
		{`{prompts: [{name: greet}]}`, `prompt "greet": entry "docs" publishes it too`},
	} {
		_, err := newFixture(t, publishYAML+`
  - name: more
    adapter: test
    config: {behavior: publish, publish: `+tc.publish+`}
`)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"more"`) {
			t.Errorf("%s: %v", tc.publish, err)
		}
	}
}

// A re-expansion replaces an entry's publications in one step and says
// whether they changed.
func TestReexpandPublications(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pub.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"prompts": [{"name": "a"}]}`)
	f, err := newFixture(t, `
adapters:
  test:
    command: %s
    env: {CRANK_HOST_TEST_ADAPTER: "1"}
operations:
  - name: docs
    adapter: test
    config: {behavior: publish, file: "`+file+`"}
`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := func() string {
		var out []string
		for _, p := range f.h.Publications() {
			out = append(out, p.Key)
		}
		return strings.Join(out, " ")
	}
	if changed, err := f.h.Reexpand(ctx, "docs"); err != nil || changed {
		t.Errorf("unchanged: %v %v", changed, err)
	}
	write(`{"prompts": [{"name": "a"}, {"name": "b"}], "resources": [{"uri": "file:///r", "name": "r"}]}`)
	if changed, err := f.h.Reexpand(ctx, "docs"); err != nil || !changed || keys() != "file:///r a b" {
		t.Errorf("added: %v %v %q", changed, err, keys())
	}
	write(`{"prompts": [{"name": "bad name"}]}`)
	if _, err := f.h.Reexpand(ctx, "docs"); err == nil || keys() != "file:///r a b" {
		t.Errorf("a bad expansion: %v, kept %q", err, keys())
	}
}
