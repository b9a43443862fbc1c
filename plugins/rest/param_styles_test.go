package rest_test

import (
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestParamStylesConfig: the rest config's param_styles is checked at load
// like every other field.
func TestParamStylesConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	base := map[string]any{"method": "GET", "url": "http://h/x/{id}", "query": []string{"q"}, "header_args": map[string]string{"X-A": "a"}}
	for _, c := range []struct {
		styles any
		field  string
		want   string
	}{
		{map[string]any{"id": map[string]any{"style": "form"}}, "param_styles.id.style", "one of simple, label, matrix, json"},
		{map[string]any{"q": map[string]any{"style": "label"}}, "param_styles.q.style", "query parameter"},
		{map[string]any{"a": map[string]any{"style": "matrix"}}, "param_styles.a.style", "header parameter"},
		{map[string]any{"nope": map[string]any{"style": "form"}}, "param_styles.nope", "fills no path parameter"},
		{map[string]any{"q": map[string]any{"style": "deepObject", "explode": false}}, "param_styles.q.explode", "always exploded"},
		{map[string]any{"id": map[string]any{"style": "simple", "allow_reserved": true}}, "param_styles.id.allow_reserved", "only applies to query"},
		{map[string]any{"q": map[string]any{"style": "form", "color": 1}}, "param_styles.q.color", "unknown field"},
		{"x", "param_styles", "must be an object"},
	} {
		cfg := map[string]any{"param_styles": c.styles}
		for k, v := range base {
			cfg[k] = v
		}
		wantDiagnostic(t, h, cfg, c.field, c.want)
	}
	cfg := map[string]any{"param_styles": map[string]any{"q": map[string]any{"style": "pipeDelimited", "explode": false}}}
	for k, v := range base {
		cfg[k] = v
	}
	if diags, _ := h.Validate(ctxT(t), adaptertest.Call{Config: cfg}); len(diags) != 0 {
		t.Errorf("valid param_styles: %v", diags)
	}
}
