package openapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
)

// BenchmarkOpenAPIImport measures expanding the pet store entry (read,
// pre-scan, load, one tool per operation with checked schemas and configs)
// against kin-openapi merely loading the same file, in the same run.
func BenchmarkOpenAPIImport(b *testing.B) {
	doc, _ := filepath.Abs("testdata/petstore.yaml")
	// The baseline loads the document without its deliberately broken
	// operations, which kin-openapi alone cannot load.
	data, err := os.ReadFile(doc)
	if err != nil {
		b.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		b.Fatal(err)
	}
	paths := tree["paths"].(map[string]any)
	for _, p := range []string{"/broken/ref", "/broken/cookie", "/broken/upload"} {
		delete(paths, p)
	}
	usable, err := json.Marshal(tree)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("kin_load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := openapi3.NewLoader().LoadFromData(usable); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("expand", func(b *testing.B) {
		a := rest.New().(sdk.OperationExpander)
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
