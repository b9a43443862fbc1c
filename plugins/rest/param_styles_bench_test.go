package rest

import (
	"encoding/json"
	"testing"
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
