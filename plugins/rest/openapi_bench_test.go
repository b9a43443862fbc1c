package rest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/crankmcp/crank/plugins/sdk"
)

// BenchmarkParamStyles measures param_styles against the plain rest
// serialization in the same run: native and form_explode build the same
// URL (a repeated query parameter), so their ratio is the cost of going
// through oapi-codegen/runtime; deep_object is a style only param_styles
// can write.
func BenchmarkParamStyles(b *testing.B) {
	for _, c := range []struct {
		name, styles, args string
	}{
		{"native", ``, `{"id":7,"tags":["a","b","c"]}`},
		{"form_explode", `,"param_styles":{"tags":{"style":"form","explode":true}}`, `{"id":7,"tags":["a","b","c"]}`},
		{"form_csv", `,"param_styles":{"tags":{"style":"form","explode":false}}`, `{"id":7,"tags":["a","b","c"]}`},
		{"deep_object", `,"param_styles":{"tags":{"style":"deepObject"}}`, `{"id":7,"tags":{"kind":"cat","age":3}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := parseConfig([]byte(`{"method":"GET","url":"http://h/pets/{id}","query":{"tags":"tags"}` + c.styles + `}`))
			if p.op == nil {
				b.Fatal(p.err)
			}
			args, ue := p.op.decodeArgs(json.RawMessage(c.args))
			if ue != nil {
				b.Fatal(ue)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ue := p.op.buildURL(&args); ue != nil {
					b.Fatal(ue)
				}
			}
		})
	}
}

// BenchmarkOpenAPIImport measures expanding the pet store entry (read,
// pre-scan, load, one tool per operation with checked schemas and configs)
// against kin-openapi merely loading the same file, in the same run.
func BenchmarkOpenAPIImport(b *testing.B) {
	doc, _ := filepath.Abs("testdata/openapi/petstore.yaml")
	// The baseline loads the document without its deliberately broken
	// operations, which kin-openapi alone cannot load.
	data, err := os.ReadFile(doc)
	if err != nil {
		b.Fatal(err)
	}
	tree, err := parseTree(data)
	if err != nil {
		b.Fatal(err)
	}
	paths := tree.(map[string]any)["paths"].(map[string]any)
	for _, p := range []string{"/broken/ref", "/broken/cookie", "/broken/upload"} {
		delete(paths, p)
	}
	usable, _ := json.Marshal(tree)
	b.Run("kin_load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openapi3.NewLoader().LoadFromData(usable); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("expand", func(b *testing.B) {
		a := New().(*adapter)
		dir, _ := os.Getwd()
		cfg, _ := json.Marshal(map[string]any{"openapi": map[string]any{"document": doc,
			"credentials": map[string]any{"api_key": "k", "bearerAuth": "t"}}})
		op := &sdk.Operation{Name: "pets", Config: cfg, BaseDir: dir}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			tools, _ := a.ExpandOperation(ctx, op)
			if len(tools) != 9 {
				b.Fatalf("%d tools", len(tools))
			}
		}
	})
}
