package graphql_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/sdktest"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// TestExecutable builds cmd/crank-adapter-graphql and drives it the way
// the host does: launched by go-plugin, over gRPC.
func TestExecutable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the adapter")
	}
	bin := filepath.Join(t.TempDir(), "crank-adapter-graphql")
	if out, err := exec.Command(goTool, "build", "-o", bin, "./cmd/crank-adapter-graphql").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	u := newUpstream(t)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.PluginSets(nil),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Output: io.Discard}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	c := raw.(adapterv1.AdapterClient)
	d, err := c.Describe(ctxT(t), &adapterv1.DescribeRequest{HostVersion: "test"})
	if err != nil || d.GetName() != "graphql" {
		t.Fatalf("describe: %v %v", d, err)
	}
	cfg, _ := json.Marshal(map[string]any{"endpoint": u.URL, "query": "query B($id: ID!) { book(id: $id) { title } }"})
	x, err := c.ExpandOperation(ctxT(t), &adapterv1.ExpandOperationRequest{Operation: &adapterv1.Operation{Name: "b", ConfigJson: cfg}})
	if err != nil || len(x.GetTools()) != 1 {
		t.Fatalf("expand: %v %v", x, err)
	}
	resp, err := c.Invoke(ctxT(t), &adapterv1.InvokeRequest{
		Operation:     &adapterv1.Operation{Name: "b", ConfigJson: x.GetTools()[0].GetConfigJson()},
		ArgumentsJson: []byte(`{"id":"1"}`),
	})
	if err != nil || string(resp.GetResult().GetStructuredJson()) != `{"data":{"book":{"title":"Dune"}}}` {
		t.Fatalf("invoke: %v %v", resp, err)
	}
}

// TestSchemasResolve checks the derived schemas with the JSON Schema
// library the host validates arguments with: every schema resolves, good
// arguments pass and bad ones fail there too.
func TestSchemasResolve(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := sdktest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, map[string]any{"generate": map[string]any{"query_fields": true}, "tool_prefix": "t_"}))
	resolved := map[string]*jsonschema.Resolved{}
	for name, tool := range tools {
		for kind, raw := range map[string][]byte{"input": tool.GetInputSchemaJson(), "output": tool.GetOutputSchemaJson()} {
			var s jsonschema.Schema
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%s %s: %v", name, kind, err)
			}
			r, err := s.Resolve(nil)
			if err != nil {
				t.Fatalf("%s %s schema does not resolve: %v\n%s", name, kind, err, raw)
			}
			if kind == "input" {
				resolved[name] = r
			}
		}
	}
	for _, c := range []struct {
		tool string
		args string
		ok   bool
	}{
		{"t_ListBooks", `{}`, true},
		{"t_ListBooks", `{"filter":null,"first":null}`, true},
		{"t_ListBooks", `{"filter":{"genre":"FICTION","and":[{"minPages":3,"and":[{"titleContains":"x"}]}]}}`, true},
		{"t_ListBooks", `{"filter":{"and":[{"pages":3}]}}`, false},
		{"t_ListBooks", `{"first":2147483648}`, false},
		{"t_ListBooks", `{"filter":{"genre":"ROMANCE"}}`, false},
		{"t_GetBook", `{"id":"1"}`, true},
		{"t_GetBook", `{"id":null}`, false},
		{"t_GetBook", `{}`, false},
		{"t_AddBook", `{"input":{"title":"t","genre":"FICTION","authorId":"a1","published":"2020-01-01","tags":["a"]}}`, true},
		{"t_AddBook", `{"input":{"title":"t","genre":"FICTION"}}`, false},
		{"t_Echo", `{"when":{"any":"thing"},"ids":["1"]}`, true},
		{"t_books", `{"filter":{"and":[]},"first":3}`, true},
	} {
		var v any
		json.Unmarshal([]byte(c.args), &v)
		r := resolved[c.tool]
		if r == nil {
			t.Fatalf("no tool %s", c.tool)
		}
		if err := r.Validate(v); (err == nil) != c.ok {
			t.Errorf("%s %s: valid=%v, want %v (%v)", c.tool, c.args, err == nil, c.ok, err)
		}
	}
}
