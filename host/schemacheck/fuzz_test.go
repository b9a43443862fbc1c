package schemacheck

import (
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/pointer"
)

// FuzzCheck compiles any schema for both uses and checks any value with
// it: no panic and no hang (patterns are bounded), the same failure
// twice, and a failure that names a value the checked one has, with a
// reason. Seeds: testdata/fuzz/FuzzCheck and the cases below.
func FuzzCheck(f *testing.F) {
	f.Add(`{"type":"object","properties":{"id":{"type":"integer","minimum":1}},"required":["id"],"additionalProperties":false}`, `{"id":0,"x":1}`)
	f.Add(`{"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`, `{"c":[{"c":[{"c":1}]}]}`)
	f.Add(`{"type":"string","pattern":"^(a+)+$"}`, `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"`)
	f.Add(`{"type":"string","format":"date-time"}`, `"2024-02-30T10:00:00Z"`)
	f.Add(`{"patternProperties":{"^a":{"type":"string"},"a$":{"type":"integer"}}}`, `{"aa":true}`)
	f.Add(`{"$ref":"https://example.com/schema.json"}`, `1`)
	f.Fuzz(func(t *testing.T, schema, value string) {
		v, err := Decode([]byte(value))
		if err != nil {
			return
		}
		for _, use := range []Use{Arguments, Results} {
			s, err := Compile([]byte(schema), use)
			if err != nil {
				continue
			}
			first := s.Check(v)
			again := s.Check(v)
			if (first == nil) != (again == nil) || first != nil && *first != *again {
				t.Fatalf("two checks of %s against %s: %v, then %v", value, schema, first, again)
			}
			if first == nil {
				continue
			}
			if first.Reason == "" {
				t.Fatalf("%s against %s: a failure without a reason: %+v", value, schema, first)
			}
			if first.Pointer != "" && valueAt(v, pointer.Split(first.Pointer)) == nil && !hasNull(v, pointer.Split(first.Pointer)) {
				t.Fatalf("%s against %s: the failure names %s, which the value lacks", value, schema, first.Pointer)
			}
		}
	})
}

// hasNull tells whether loc names a null in v (valueAt's nil).
func hasNull(v any, loc []string) bool {
	if len(loc) == 0 {
		return v == nil
	}
	parent := valueAt(v, loc[:len(loc)-1])
	switch p := parent.(type) {
	case map[string]any:
		x, ok := p[loc[len(loc)-1]]
		return ok && x == nil
	case []any:
		return valueAt(v, loc) == nil && len(p) > 0
	}
	return false
}
