package host_test

import (
	"encoding/json"
	"testing"

	"github.com/crankmcp/crank/host"
)

// BenchmarkCheckOutput is the check of one unary result (a user) against
// its tool's output schema, alone: what it adds to a call's CPU
// (host/mcpserver BenchmarkOutputCheck measures it in a whole call).
func BenchmarkCheckOutput(b *testing.B) {
	check := host.CheckOutputBench(
		json.RawMessage(`{"type":"object","required":["id","name"],"properties":{"id":{"type":"integer"},"name":{"type":"string"},"email":{"type":"string"}}}`),
		json.RawMessage(`{"id":7,"name":"Ada Lovelace","email":"ada@example.com"}`))
	b.ReportAllocs()
	for b.Loop() {
		if !check() {
			b.Fatal("refused")
		}
	}
}
