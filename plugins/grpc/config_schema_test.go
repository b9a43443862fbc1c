package grpcadapter

import (
	"testing"

	"github.com/crankmcp/crank/internal/configtest"
)

// TestConfigDeclaration ties the config struct, the published schema, the
// documentation and the diagnostics together.
func TestConfigDeclaration(t *testing.T) {
	t.Parallel()
	method := map[string]any{
		"target": "127.0.0.1:50051", "method": "crank.test.Echo/Echo", "plaintext": false,
		"tls": map[string]any{"server_name": "users.internal"}, "proto_files": []string{"test.proto"},
		"import_paths": []string{"."}, "metadata": map[string]any{"authorization": "Bearer x", "n": 1},
		"timeout": "10s", "max_response_bytes": 1024, "field_names": "json", "emit_defaults": false, "cursor_field": "after",
		"requests": map[string]any{"max_items": 10, "max_bytes": 4096},
	}
	service := map[string]any{
		"target": "dns:///api.internal:443", "service": "crank.test.Echo", "methods": []string{"Echo"},
		"tool_prefix": "echo_", "proto_source": "syntax = \"proto3\";",
	}
	configtest.Check(t, newConfigs, configtest.Case{
		BaseDir: "testdata",
		Good:    []any{method, service},
		Valid:   []any{`{"target": "unix:///run/api.sock", "method": "a.B/C", "descriptor_set": "api.binpb"}`},
	})
}
