package graphql

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

func TestParseTypeRef(t *testing.T) {
	for _, s := range []string{"Int", "Int!", "[Int]", "[Int!]!", "[[ID!]]", " [ String ! ] ! "} {
		r, err := parseTypeRef(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if got, want := r.String(), strings.ReplaceAll(s, " ", ""); got != want {
			t.Errorf("%q: String() = %q", s, got)
		}
	}
	for _, s := range []string{"", "[Int", "Int]", "1Int", "[]", "Int!!", "Int x"} {
		if _, err := parseTypeRef(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

func compile(t testing.TB, spec toolSpec) *tool {
	t.Helper()
	raw, _ := json.Marshal(spec)
	tl, err := compileTool(raw)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestCoercionOneOfAndDefaults(t *testing.T) {
	tl := compile(t, toolSpec{
		Operation: "Find", Kind: "query", Document: "query Find($by: By!, $n: Int! = 3) { x }",
		Variables: []inSpec{{Name: "by", Type: "By!"}, {Name: "n", Type: "Int!", HasDefault: true}},
		Types: map[string]typeSpec{
			"By":   {Kind: "input", OneOf: true, Fields: []inSpec{{Name: "id", Type: "ID"}, {Name: "email", Type: "String"}, {Name: "when", Type: "Time"}}},
			"Time": {Kind: "scalar"},
		},
	})
	for _, c := range []struct{ args, want, err string }{
		{`{"by":{"id":7}}`, `{"by":{"id":"7"}}`, ""},
		{`{"by":{"when":{"anything":[1]}},"n":5}`, `{"by":{"when":{"anything":[1]}},"n":5}`, ""},
		{`{"by":{}}`, "", "$by: input By is a @oneOf input: set exactly one of its fields (id, email, when)"},
		{`{"by":{"id":"1","email":"a@b"}}`, "", "@oneOf"},
		{`{"by":{"id":null}}`, "", "@oneOf"},
		{`{"by":{"id":"1"},"n":null}`, "", "$n: must not be null (Int!)"},
		{`{"by":{"id":"1"},"n":1e2}`, `{"by":{"id":"1"},"n":100}`, ""},
		{`{"by":{"id":"1"},"n":-2147483649}`, "", "out of range"},
		{`{"by":{"id":9007199254740993}}`, `{"by":{"id":"9007199254740993"}}`, ""},
	} {
		got, err := tl.variables(json.RawMessage(c.args))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.args, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("%s: %s %v, want %s", c.args, got, err, c.want)
		}
	}
}

func TestCompileToolRefusesBadSpecs(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string
	}{
		{`{"kind":"event","document":"subscription { a }"}`, "kind must be query, mutation or subscription"},
		{`{"kind":"query","document":" "}`, "document is empty"},
		{`{"kind":"query","document":"q","variables":[{"name":"a","type":"Nope"}]}`, "$a: type Nope is not described"},
		{`{"kind":"query","document":"q","variables":[{"name":"a","type":"Int"},{"name":"a","type":"Int"}]}`, "declared twice"},
		{`{"kind":"query","document":"q","types":{"X":{"kind":"object"}}}`, `unknown kind "object"`},
		{`{"kind":"query","document":"q","extra":1}`, "not a tool derived by the graphql adapter"},
	} {
		if _, err := compileTool(json.RawMessage(c.raw)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.raw, err, c.want)
		}
	}
}

// TestIntrospectionSDL: descriptions with quotes, backslashes and line
// breaks, default values, deprecations and custom directives survive the
// conversion of an introspection result to SDL.
func TestIntrospectionSDL(t *testing.T) {
	str := func(s string) *string { return &s }
	name := func(s string) *string { return &s }
	named := func(kind, n string) *introRef { return &introRef{Kind: kind, Name: name(n)} }
	nonNull := func(r *introRef) *introRef { return &introRef{Kind: "NON_NULL", OfType: r} }
	s := &introSchema{
		QueryType: &introName{"Root"},
		Types: []introType{
			{Kind: "OBJECT", Name: "Root", Description: str("The \"root\" \\ type,\nover two lines"), Fields: []introField{
				{Name: "f", Type: named("SCALAR", "String"), Args: []introInput{
					{Name: "opts", Type: named("INPUT_OBJECT", "Opts"), DefaultValue: str(`{mode: FAST, tags: ["a"]}`), Description: str("Options.")},
				}},
				{Name: "old", Type: nonNull(named("SCALAR", "Int")), IsDeprecated: true, DeprecationReason: str(`use "f"`)},
			}},
			{Kind: "INPUT_OBJECT", Name: "Opts", InputFields: []introInput{
				{Name: "mode", Type: named("ENUM", "Mode"), DefaultValue: str("SLOW")},
				{Name: "tags", Type: &introRef{Kind: "LIST", OfType: nonNull(named("SCALAR", "String"))}},
			}},
			{Kind: "ENUM", Name: "Mode", EnumValues: []introEnum{{Name: "FAST"}, {Name: "SLOW", IsDeprecated: true}}},
			{Kind: "SCALAR", Name: "String"},
			{Kind: "OBJECT", Name: "__Schema"},
		},
		Directives: []introDirective{
			{Name: "cached", Locations: []string{"FIELD", "QUERY"}, Args: []introInput{{Name: "ttl", Type: named("SCALAR", "Int"), DefaultValue: str("60")}}},
			{Name: "skip", Locations: []string{"FIELD"}},
		},
	}
	sdl, err := s.sdl()
	if err != nil {
		t.Fatal(err)
	}
	schema, _, err := loadSDL("introspection", sdl)
	if err != nil {
		t.Fatalf("%v\n%s", err, sdl)
	}
	root := schema.Query
	if root.Name != "Root" || root.Description != "The \"root\" \\ type,\nover two lines" {
		t.Errorf("root %q: %q", root.Name, root.Description)
	}
	f := root.Fields.ForName("f")
	if a := f.Arguments.ForName("opts"); a == nil || a.DefaultValue == nil || a.DefaultValue.String() != `{mode:FAST,tags:["a"]}` || a.Description != "Options." {
		t.Errorf("argument opts: %+v", a)
	}
	if d := root.Fields.ForName("old").Directives.ForName("deprecated"); d == nil || d.Arguments.ForName("reason").Value.Raw != `use "f"` {
		t.Errorf("deprecation lost:\n%s", sdl)
	}
	if schema.Directives["cached"] == nil {
		t.Errorf("directive @cached lost:\n%s", sdl)
	}
	// An operation using them validates.
	if _, errs := loadQuery(schema, `query Q($o: Opts = {mode: FAST}) { f(opts: $o) @cached(ttl: 5) }`); errs != nil {
		t.Errorf("query: %v", errs)
	}
}

func TestResultShapes(t *testing.T) {
	c := &config{upstream: "http://x/graphql", includeExtensions: true}
	tl := &tool{label: "query Q"}
	gr, _ := parseResponse([]byte(`{"data":{"a":1},"extensions":{"cost":3}}`))
	res, ue := c.result(tl, gr, 200)
	if ue != nil || string(res.Structured) != `{"data":{"a":1},"extensions":{"cost":3}}` {
		t.Errorf("extensions: %s %v", res.Structured, ue)
	}
	c.includeExtensions = false
	res, _ = c.result(tl, gr, 200)
	if string(res.Structured) != `{"data":{"a":1}}` {
		t.Errorf("without extensions: %s", res.Structured)
	}
	gr, _ = parseResponse([]byte(`{"data":null}`))
	res, ue = c.result(tl, gr, 200)
	if ue != nil || string(res.Structured) != `{"data":null}` {
		t.Errorf("null data: %s %v", res.Structured, ue)
	}
	var many []string
	for i := range 12 {
		many = append(many, `{"message":"m`+string(rune('a'+i))+`","path":["xs",`+string(rune('0'+i%10))+`,"y"],"extensions":{"code":"BAD"}}`)
	}
	gr, _ = parseResponse([]byte(`{"errors":[` + strings.Join(many, ",") + `]}`))
	_, ue = c.result(tl, gr, 400)
	if ue == nil || ue.Status != "BAD" || !strings.Contains(ue.Message, "12 errors: ma (at xs[0].y) [BAD]; mb (at xs[1].y) [BAD]") ||
		!strings.Contains(ue.Message, "… and 2 more") || !strings.Contains(string(ue.Detail), `"http_status":400`) {
		t.Errorf("errors: %+v", ue)
	}
	if _, ok := parseResponse([]byte(`{"message":"not graphql"}`)); ok {
		t.Error("a JSON object without data or errors is taken for a GraphQL response")
	}
	gr, ok := parseResponse([]byte(`{"errors":"oops"}`))
	if !ok || len(gr.errors) != 1 || !strings.Contains(gr.errors[0].Message, "malformed errors entry") {
		t.Errorf("malformed errors: %+v", gr)
	}
}

func loadQuery(s *ast.Schema, q string) (*ast.QueryDocument, error) {
	doc, errs := gqlparser.LoadQuery(s, q)
	if len(errs) > 0 {
		return nil, describeGQLError(errs)
	}
	return doc, nil
}
