package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startGrpcJS starts e2e/grpcjs/server.mjs, a gRPC server built the
// standard Node way (@grpc/grpc-js, @grpc/proto-loader, @grpc/reflection
// from its lockfile), on a free loopback port and returns its address. It
// skips the test when its node_modules are missing (fails it on CI):
// `make grpcjs-deps` installs them.
func startGrpcJS(t *testing.T) string {
	t.Helper()
	return startNodeServer(t, "grpcjs", "@grpc/reflection", "grpcjs-deps")
}

// A gRPC service of a grpc-js server, described by nothing but its server
// reflection (@grpc/reflection, which answers protobuf.js's descriptors:
// map entries named like their fields, relative type names, no imports):
// the gateway builds its tools — maps as objects, a Timestamp as an RFC
// 3339 string, a wrapper as its value, bytes as base64, int64 as a string
// — and calls them, both ways.
func TestGrpcJSReflection(t *testing.T) {
	t.Parallel()
	addr := startGrpcJS(t)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(`
operations:
  - name: inv
    adapter: grpc
    config: {target: "%s", service: crank.js.v1.Inventory}
`, addr)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := g.connect(ctx)
	schemas := map[string]map[string]any{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var s map[string]any
		_ = json.Unmarshal(b, &s)
		schemas[tool.Name] = s
	}
	put := schemas["inv_put_item"]
	if put == nil || schemas["inv_get_item"] == nil {
		t.Fatalf("tools: %v", schemas)
	}
	props, _ := put["properties"].(map[string]any)
	for field, want := range map[string]string{"stockBySite": "object", "dimensions": "object", "updatedAt": "string", "checksum": "string", "tags": "array"} {
		p, _ := props[field].(map[string]any)
		if p == nil || p["type"] != want {
			t.Errorf("PutItem's %s: %v, want type %s", field, props[field], want)
		}
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "inv_get_item", Arguments: map[string]any{"id": "i-1"}})
	if err != nil || res.IsError {
		t.Fatalf("GetItem: %v %s", err, textOf(res))
	}
	var got map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &got)
	for k, want := range map[string]any{
		"id": "i-1", "kind": "KIND_TOOL", "updatedAt": "2023-11-14T22:13:20Z", "note": "fragile", "checksum": "Y3Jhbms=", "cents": "1999",
		"stockBySite": map[string]any{"berlin": float64(3), "lyon": float64(0)},
	} {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(want) {
			t.Errorf("GetItem's %s: %s, want %s", k, g, mustJSON(want))
		}
	}

	item := map[string]any{"id": "i-2", "kind": "KIND_PART", "stockBySite": map[string]any{"oslo": 7},
		"dimensions": map[string]any{"depth": map[string]any{"value": 2.5, "unit": "mm"}},
		"updatedAt":  "2024-02-29T12:00:00Z", "checksum": "AAEC", "quote": "on request"}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "inv_put_item", Arguments: item})
	if err != nil || res.IsError {
		t.Fatalf("PutItem: %v %s", err, textOf(res))
	}
	b, _ = json.Marshal(res.StructuredContent)
	got = nil
	_ = json.Unmarshal(b, &got)
	for k, want := range item {
		if g, _ := json.Marshal(got[k]); string(g) != mustJSON(want) {
			t.Errorf("PutItem echoed %s: %s, want %s", k, g, mustJSON(want))
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
