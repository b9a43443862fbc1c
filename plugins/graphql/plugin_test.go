package graphql_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestExecutable builds cmd/crank-adapter-graphql and drives it the way
// the host does: launched by go-plugin, over gRPC.
func TestExecutable(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, "./cmd/crank-adapter-graphql").Start(t)
	u := newUpstream(t)
	d, err := h.Describe(ctxT(t))
	if err != nil || d.Name != "graphql" {
		t.Fatalf("describe: %v %v", d, err)
	}
	cfg := map[string]any{"endpoint": u.URL, "query": "query B($id: ID!) { book(id: $id) { title } }"}
	tools, _, err := h.Expand(ctxT(t), adaptertest.Call{Operation: "b", Config: cfg})
	if err != nil || len(tools) != 1 {
		t.Fatalf("expand: %v %v", tools, err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Operation: "b", Config: tools[0].Config, Args: `{"id":"1"}`})
	if err != nil || ue != nil || string(res.Structured) != `{"data":{"book":{"title":"Dune"}}}` {
		t.Fatalf("invoke: %v %v %v", res, ue, err)
	}
}

// TestSchemasResolve checks the derived schemas with the JSON Schema
// library the host validates arguments with: every schema resolves, good
// arguments pass and bad ones fail there too.
func TestSchemasResolve(t *testing.T) {
	t.Parallel()
	u := newUpstream(t)
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, entry(t, u, map[string]any{"generate": map[string]any{"query_fields": true}, "tool_prefix": "t_"}))
	resolved := map[string]*jsonschema.Resolved{}
	for name, tool := range tools {
		for kind, raw := range map[string][]byte{"input": tool.InputSchema, "output": tool.OutputSchema} {
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
