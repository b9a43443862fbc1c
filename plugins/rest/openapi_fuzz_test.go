package rest

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// FuzzOpenAPIImport feeds mangled documents to the importer: whatever the
// document, it answers tools or diagnostics, never a panic or a hang.
func FuzzOpenAPIImport(f *testing.F) {
	files, _ := filepath.Glob("testdata/openapi/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"openapi":"3.0.0","paths":{"/a/{b}":{"get":{"parameters":[{"name":"b","in":"path","schema":{"$ref":"#"}}]}}}}`))
	f.Add([]byte("swagger: '2.0'\npaths: {/a: {$ref: '#/paths/~1a'}}\n"))
	dir, _ := filepath.Abs("testdata/openapi")
	a := New().(*adapter)
	f.Fuzz(func(t *testing.T, data []byte) {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic("the import of a fuzzed document hangs")
			}
		}()
		var d diags
		cfg := &openAPIConfig{document: "fuzz.yaml", baseURL: "http://h.invalid", outputSchemas: true,
			credentials: map[string]*credential{"api_key": {value: "k"}, "bearerAuth": {value: "t"}}}
		im := &importer{a: a, cfg: cfg, op: &sdk.Operation{Name: "fuzz", BaseDir: dir}, d: &d}
		tools := im.runSource(context.Background(), &docSource{data: data, location: &url.URL{Scheme: "file", Path: dir + "/fuzz.yaml"}})
		for _, tool := range tools {
			if p := parseConfig(tool.Config); p.op == nil {
				t.Fatalf("tool %s has an invalid config: %v", tool.Name, p.err)
			}
			if _, err := checkSchema(mustObject(t, tool.InputSchema)); err != nil {
				t.Fatalf("tool %s: %v", tool.Name, err)
			}
		}
	})
}

func mustObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
