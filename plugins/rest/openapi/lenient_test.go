package openapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestOpenAPILenient31: the quirks of published 3.1 documents cost no
// operation ($recursiveRef, a keyword of no dialect, 3.0's boolean
// exclusiveMinimum, a required name listed twice, a discriminator's own
// unknown field), each read as the
// vendor meant it, and one warning says so.
func TestOpenAPILenient31(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/quirks31.yaml"}})
	if got := im.names(); got != "discriminatorType,dupRequired,exclusive,maxItems,recursive" {
		t.Fatalf("tools %s, want all five\n%s", got, im.warnings())
	}
	w := im.warnings()
	for _, want := range []string{"max_items (1)", "discriminator.type (1)", "$recursiveRef read as any value (1)", "boolean exclusiveMinimum read as OpenAPI 3.0's (1)",
		"required names listed twice merged (1)"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Count(w, "read as the vendor meant") != 1 {
		t.Errorf("want one warning:\n%s", w)
	}
	ex := resolveSchema(t, im.tools["exclusive"].InputSchema)
	for n, ok := range map[float64]bool{0: false, 0.5: true, 10: true, 10.5: false} {
		if err := ex.Validate(map[string]any{"n": n}); (err == nil) != ok {
			t.Errorf("exclusive n=%v: valid %v, want %v", n, err == nil, ok)
		}
	}
	var dup map[string]any
	_ = json.Unmarshal(im.tools["dupRequired"].InputSchema, &dup)
	if req, _ := json.Marshal(dup["required"]); string(req) != `["input","model"]` {
		t.Errorf("dupRequired requires %s", req)
	}
	rec := resolveSchema(t, im.tools["recursive"].InputSchema)
	if err := rec.Validate(map[string]any{"filter": map[string]any{"any": []any{1, "x"}}}); err != nil {
		t.Errorf("recursive: an open filter is refused: %v", err)
	}
}

// TestOpenAPIDiscriminatorMapping: a schema a discriminator's mapping
// names (and nothing else) is kept, so the document loads.
func TestOpenAPIDiscriminatorMapping(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	im := expandOK(t, h, map[string]any{"openapi": map[string]any{"document": "testdata/discriminator.yaml"}})
	if im.tools["getPet"] == nil {
		t.Fatalf("getPet is not imported:\n%s", im.warnings())
	}
}
