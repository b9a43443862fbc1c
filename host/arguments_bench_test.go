package host

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDuplicateMember is the duplicate-member check of arguments
// against the decoding it follows, for the arguments of BenchmarkCall and
// for 200 objects of 5 members: dup/decode is what the check adds to it.
func BenchmarkDuplicateMember(b *testing.B) {
	var items []string
	for i := range 200 {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"user %d","email":"u%d@example.com","tags":["a","b"],"note":"x: \"y\""}`, i, i, i))
	}
	for _, c := range []struct{ name, args string }{
		{"small", `{"id": 7, "tags": ["a"]}`},
		{"large", `{"items":[` + strings.Join(items, ",") + `]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			args := []byte(c.args)
			var v any
			if err := json.Unmarshal(args, &v); err != nil {
				b.Fatal(err)
			}
			var decode, check float64
			b.Run("decode", func(b *testing.B) {
				for b.Loop() {
					var v any
					_ = json.Unmarshal(args, &v)
				}
				decode = float64(b.Elapsed()) / float64(b.N)
			})
			b.Run("check", func(b *testing.B) {
				for b.Loop() {
					if duplicateMember(args, v) != "" {
						b.Fatal("duplicate")
					}
				}
				check = float64(b.Elapsed()) / float64(b.N)
				if decode > 0 {
					b.ReportMetric(check/decode, "dup/decode")
				}
			})
		})
	}
}
