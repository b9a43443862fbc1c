package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/crankmcp/crank/host"
)

// BenchmarkCall measures a host call to an adapter process (echo, no
// upstream): argument validation, the go-plugin gRPC hop and the result.
func BenchmarkCall(b *testing.B) {
	f, err := newFixture(b, catalogYAML)
	if err != nil {
		b.Fatal(err)
	}
	req := host.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"id": 7, "tags": ["a"]}`)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := f.h.Call(context.Background(), req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
