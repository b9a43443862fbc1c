package rest

import (
	"encoding/json"
	"net/url"
	"testing"
)

// FuzzFormBody checks the form encoder on arbitrary JSON values: it never
// panics, and what it writes is a query string that parses, whose every
// name starts with the field's name (a value cannot inject a field).
func FuzzFormBody(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":{"c":"v"}}}`,
		`{"expand":["x","y"]}`,
		`{"items":[{"price":"p","qty":2},{"price":"q"}]}`,
		`{"a&b=c":"d&e=f","x":"[]"}`,
		`{"n":null,"t":true,"f":1.5e3}`,
		`{"deep":[[[["x"]]]]}`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "deepObject")
		f.Add([]byte(s), "pipeDelimited")
	}
	f.Fuzz(func(t *testing.T, in []byte, style string) {
		var obj map[string]any
		if json.Unmarshal(in, &obj) != nil {
			return
		}
		op := &operation{format: &bodyFormat{kind: kindForm, mediaType: mediaForm, encoding: map[string]bodyEncoding{}}}
		for k := range obj {
			op.format.encoding[k] = bodyEncoding{style: style, explode: true}
		}
		body, _, ue := op.encodeBody(in)
		if ue != nil {
			return
		}
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("%s: unparseable body %q: %v", in, body, err)
		}
		for name := range vals {
			ok := false
			for k := range obj {
				ok = ok || len(name) >= len(k) && name[:len(k)] == k
			}
			if !ok && style != "form" {
				t.Fatalf("%s: field %q belongs to no property", in, name)
			}
		}
	})
}
