package openapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// graphDocument writes an OpenAPI document whose n objects each link to
// the next two (as Stripe's expandable fields do) and back to the first,
// with one GET operation per object answering it.
func graphDocument(t *testing.T, n int) string {
	t.Helper()
	schemas := map[string]any{}
	paths := map[string]any{}
	for i := range n {
		props := map[string]any{
			"id":   map[string]any{"type": "string", "description": strings.Repeat("An identifier. ", 8)},
			"back": map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"$ref": "#/components/schemas/obj0"}}},
		}
		for _, j := range []int{i + 1, i + 2} {
			if j < n {
				props[fmt.Sprintf("next%d", j)] = map[string]any{"anyOf": []any{map[string]any{"type": "string"},
					map[string]any{"$ref": fmt.Sprintf("#/components/schemas/obj%d", j)}}}
			}
		}
		schemas[fmt.Sprintf("obj%d", i)] = map[string]any{"type": "object", "properties": props, "required": []string{"id"}}
		paths[fmt.Sprintf("/obj%d", i)] = map[string]any{"get": map[string]any{"operationId": fmt.Sprintf("getObj%d", i),
			"responses": map[string]any{"200": map[string]any{"description": "ok", "content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"$ref": fmt.Sprintf("#/components/schemas/obj%d", i)}}}}}}}
	}
	doc := map[string]any{"openapi": "3.0.3", "info": map[string]any{"title": "graph", "version": "1"},
		"servers": []any{map[string]any{"url": "http://127.0.0.1:1"}}, "paths": paths,
		"components": map[string]any{"schemas": schemas}}
	b, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "graph.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenAPIOutputSchemaBudgets: an output schema refers to definitions
// (each converted once for the document) instead of copying the graph,
// stays within its budget with its farthest definitions open, and still
// accepts a deep answer; past the entry's budget the tools share it; a
// tool whose root cannot fit publishes none; one warning says so.
func TestOpenAPIOutputSchemaBudgets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	doc := graphDocument(t, 60)
	deep := map[string]any{"id": "a"}
	for i := 7; i >= 1; i-- {
		deep = map[string]any{"id": fmt.Sprint(i), fmt.Sprintf("next%d", i+1): deep, "back": map[string]any{"id": "0"}}
	}
	deep["next1"] = map[string]any{"id": "x", "next2": "ref"}

	// Unbounded: every definition reached, each once.
	all := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": doc,
		"output_schema_limits": map[string]any{"tool_bytes": 16 << 20, "document_bytes": 32 << 20}}})
	full := all.tools["getObj0"].OutputSchema
	var s map[string]any
	_ = json.Unmarshal(full, &s)
	if defs, _ := s["$defs"].(map[string]any); len(defs) != 60 {
		t.Fatalf("getObj0 has %d definitions, want 60 (each object once)", len(defs))
	}
	if w := all.warnings(); strings.Contains(w, "output_schema_limits") {
		t.Errorf("unexpected budget warning:\n%s", w)
	}

	// A tool budget: within it, definitions open past it, answers accepted.
	const tool = 4096
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": doc,
		"output_schema_limits": map[string]any{"tool_bytes": tool}}})
	out := im.tools["getObj0"].OutputSchema
	if len(out) > tool || len(out) >= len(full) {
		t.Errorf("getObj0's output schema is %d bytes: want at most %d (and less than the %d unbounded)", len(out), tool, len(full))
	}
	_ = json.Unmarshal(out, &s)
	defs := s["$defs"].(map[string]any)
	open := 0
	for _, d := range defs {
		if len(d.(map[string]any)) == 0 {
			open++
		}
	}
	if open == 0 || len(defs)-open == 0 {
		t.Errorf("getObj0: %d definitions, %d open: want some written and some open", len(defs), open)
	}
	for _, raw := range [][]byte{out, full} {
		if err := resolveSchema(t, raw).Validate(deep); err != nil {
			t.Errorf("a deep answer does not match: %v", err)
		}
		if err := resolveSchema(t, raw).Validate(map[string]any{"next1": "x"}); err == nil {
			t.Error("an answer without its required id matches")
		}
	}
	if w := im.warnings(); strings.Count(w, "openapi.output_schema_limits:") != 1 || !strings.Contains(w, "0 are left out") {
		t.Errorf("want one budget warning, none left out:\n%s", w)
	}

	// The entry's budget shared out: every tool under an even share.
	im = expandOK(t, h, map[string]any{"openapi": map[string]any{"document": doc,
		"output_schema_limits": map[string]any{"document_bytes": 60 * 2048}}})
	total := 0
	for _, tl := range im.tools {
		if len(tl.OutputSchema) > 2048 || len(tl.OutputSchema) == 0 {
			t.Errorf("%s: output schema of %d bytes, want 1-2048", tl.Name, len(tl.OutputSchema))
		}
		total += len(tl.OutputSchema)
	}
	if total > 60*2048 {
		t.Errorf("the output schemas total %d bytes, over the entry's %d", total, 60*2048)
	}

	// A root that cannot fit: no output schema, said once.
	im = expandOK(t, h, map[string]any{"openapi": map[string]any{"document": doc,
		"output_schema_limits": map[string]any{"tool_bytes": 256}}})
	if len(im.tools["getObj0"].OutputSchema) != 0 {
		t.Errorf("getObj0 has an output schema over its budget: %s", im.tools["getObj0"].OutputSchema)
	}
	if w := im.warnings(); !strings.Contains(w, "60 are left out") {
		t.Errorf("want the tools left out counted:\n%s", w)
	}
}
