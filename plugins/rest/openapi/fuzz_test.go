package openapi_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
)

// FuzzOpenAPIImport feeds mangled documents to the importer: whatever the
// document, it answers tools or diagnostics, never a panic or a hang, and
// every tool it answers has a config the adapter takes and an input
// schema that resolves.
func FuzzOpenAPIImport(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"openapi":"3.0.0","paths":{"/a/{b}":{"get":{"parameters":[{"name":"b","in":"path","schema":{"$ref":"#"}}]}}}}`))
	f.Add([]byte("swagger: '2.0'\npaths: {/a: {$ref: '#/paths/~1a'}}\n"))
	a := rest.New()
	cfg, _ := json.Marshal(map[string]any{"openapi": map[string]any{"document": "fuzz.yaml", "base_url": "http://h.invalid",
		"credentials": map[string]any{"api_key": "k", "bearerAuth": "t"}}})
	dir := f.TempDir() // external $refs are off: the document stands alone
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, "fuzz.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic("the import of a fuzzed document hangs")
			}
		}()
		tools, _ := a.(sdk.OperationExpander).ExpandOperation(context.Background(), &sdk.Operation{Name: "fuzz", Config: cfg, BaseDir: dir})
		for _, tool := range tools {
			if diags := a.(sdk.OperationValidator).ValidateOperation(context.Background(), &sdk.Operation{Name: tool.Name, Config: tool.Config}); len(diags) > 0 {
				t.Fatalf("tool %s has an invalid config: %v", tool.Name, diags)
			}
			resolveSchema(t, tool.InputSchema)
		}
	})
}
