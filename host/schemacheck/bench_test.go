package schemacheck

import (
	"encoding/json"
	"testing"
	"time"

	google "github.com/google/jsonschema-go/jsonschema"
)

// BenchmarkCheck measures a check of a small tool result (a user of
// five members against its output schema) and of arguments, against
// google/jsonschema-go's Validate of the same in the same run (the
// validator the host used before): ns per check of each and the ratio,
// schemacheck-vs-google-x.
func BenchmarkCheck(b *testing.B) {
	schema := []byte(`{"type":"object","properties":{"id":{"type":"integer","minimum":1},"name":{"type":"string","maxLength":200},` +
		`"email":{"type":"string","pattern":"^[^@]+@[^@]+$"},"tags":{"type":"array","items":{"type":"string"}},` +
		`"address":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},"required":["id","name"]}`)
	value, _ := Decode([]byte(`{"id":7,"name":"Ada Lovelace","email":"ada@example.com","tags":["a","b"],"address":{"city":"London"}}`))
	ours, err := Compile(schema, Results)
	if err != nil {
		b.Fatal(err)
	}
	var gs google.Schema
	_ = json.Unmarshal(schema, &gs)
	theirs, err := gs.Resolve(nil)
	if err != nil {
		b.Fatal(err)
	}
	var tOurs, tTheirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if ours.Check(value) != nil {
			b.Fatal("invalid")
		}
		mid := time.Now()
		if theirs.Validate(value) != nil {
			b.Fatal("invalid")
		}
		tOurs += mid.Sub(start)
		tTheirs += time.Since(mid)
	}
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "schemacheck-ns/check")
	b.ReportMetric(float64(tTheirs.Nanoseconds())/float64(b.N), "google-ns/check")
	b.ReportMetric(float64(tOurs)/float64(tTheirs), "schemacheck-vs-google-x")
}

// BenchmarkCompile measures compiling that schema, which a tool's
// input schema costs at load and its output schema at its first result.
func BenchmarkCompile(b *testing.B) {
	schema := []byte(`{"type":"object","properties":{"id":{"type":"integer","minimum":1},"name":{"type":"string"},"email":{"type":"string","pattern":"^[^@]+@[^@]+$"}},"required":["id"]}`)
	for i := 0; i < b.N; i++ {
		if _, err := Compile(schema, Arguments); err != nil {
			b.Fatal(err)
		}
	}
}
