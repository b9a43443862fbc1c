package ratelimit

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeLimit: any JSON a config or a catalog may hold decodes into a
// limit or into problems naming fields, never a panic; a limit without
// problems has a rate that parses, an ID, and a budget that admits or
// refuses with a positive wait.
func FuzzDecodeLimit(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","rate":"10/m"}`,
		`{"name":"b","rate":"0.5/30s","burst":3,"per":"user","tool":"refund_*","fleet":true}`,
		`{"name":"c","rate":"1/1ms","upstream":"*.example.com"}`,
		`{"name":"","rate":"x/y","per":"team","tool":"[","family":"f"}`,
		`{"name":"d","rate":"1000000/24h","burst":1000000}`,
		`[]`, `null`, `{"rate":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		l, probs := Decode(json.RawMessage(raw))
		for _, p := range probs {
			if p.Field == "" && p.Message == "" {
				t.Fatalf("an empty problem for %q", raw)
			}
		}
		if len(probs) > 0 {
			return
		}
		if _, err := ParseRate(l.Rate); err != nil {
			t.Fatalf("%q: no problem, yet the rate does not parse: %v", raw, err)
		}
		if l.ID() == "" || l.Describe() == "" {
			t.Fatalf("%q: no ID or description", raw)
		}
		b := NewBudget(l)
		for range 3 {
			if r := b.Admit(&Caller{User: "u"}); r != nil && r.RetryAfter <= 0 {
				t.Fatalf("%q: a refusal without a wait: %+v", raw, r)
			}
		}
	})
}
