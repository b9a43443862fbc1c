package soap

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzNormalize feeds arbitrary answers to the response path: whatever the
// bytes, the result is a tool result with a JSON object or an error, never
// a panic. Seeds are in testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><r><order priority="1"><id>1</id><line><quantity>2</quantity></line></order></r></s:Body></s:Envelope>`))
	f.Add([]byte(`<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><s:Fault><s:Code><s:Value>s:Sender</s:Value><s:Subcode><s:Value>x</s:Value></s:Subcode></s:Code></s:Fault></s:Body></s:Envelope>`))
	f.Add([]byte(`not xml`))
	line := &xsdType{Kind: kindComplex, Fields: []*xsdField{
		{Name: "quantity", Type: &xsdType{Kind: kindSimple, Base: "int"}, Min: 1, Max: 1},
		{Name: "price", Type: &xsdType{Kind: kindComplex, Value: &xsdType{Kind: kindSimple, Base: "decimal"},
			Attrs: []*xsdAttr{{Name: "currency", Type: &xsdType{Kind: kindSimple, Base: "string"}}}}, Min: 0, Max: 1, Nillable: true},
	}}
	order := &xsdType{Kind: kindComplex, Attrs: []*xsdAttr{{Name: "priority", Type: &xsdType{Kind: kindSimple, Base: "boolean"}}},
		Fields: []*xsdField{
			{Name: "id", Type: &xsdType{Kind: kindSimple, Base: "long"}, Min: 1, Max: 1},
			{Name: "gift", Type: &xsdType{Kind: kindSimple, Base: "boolean"}, Min: 0, Max: 1},
			{Name: "line", Type: line, Min: 1, Max: -1},
			{Name: "any", Type: anyType, Min: 0, Max: 1},
		}}
	op := &operation{Name: "Op", Out: &xsdField{Name: "r", Type: &xsdType{Kind: kindComplex,
		Fields: []*xsdField{{Name: "order", Type: order, Min: 0, Max: -1}}}, Min: 1, Max: 1}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, status := range []int{200, 500} {
			res, err := result(context.Background(), op, "SOAP Op", status, "text/xml", body)
			if (res == nil) == (err == nil) {
				t.Fatalf("result %v, error %v", res, err)
			}
			if res != nil {
				var m map[string]any
				if err := json.Unmarshal(res.Structured, &m); err != nil {
					t.Fatalf("structured result is not a JSON object: %s", res.Structured)
				}
			}
			if err != nil && !json.Valid(append([]byte(nil), errDetail(err)...)) {
				t.Fatalf("detail is not JSON: %s", errDetail(err))
			}
		}
	})
}
