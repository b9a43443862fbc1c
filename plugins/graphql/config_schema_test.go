package graphql

import (
	"testing"

	"github.com/crankmcp/crank/internal/configtest"
)

// TestConfigDeclaration ties the config struct, the published schema, the
// documentation and the diagnostics together.
func TestConfigDeclaration(t *testing.T) {
	t.Parallel()
	entry := map[string]any{
		"endpoint": "https://api.example.com/graphql", "schema": "testdata/library.graphqls",
		"document": "testdata/library.graphql", "operations": []string{"GetBook"}, "tool_prefix": "lib_",
		"generate": map[string]any{"query_fields": []string{"books"}, "max_depth": 3},
		"headers":  map[string]any{"Authorization": "Bearer x", "X-N": 1}, "timeout": "10s",
		"max_response_bytes": 1024, "include_extensions": true,
		"subscriptions": map[string]any{"transport": "websocket", "protocol": "subscriptions-transport-ws", "url": "wss://api.example.com/graphql", "connection_init": map[string]any{"token": "x"},
			"ack_timeout": "5s", "ping_interval": "10s", "pong_timeout": "2s", "max_message_bytes": 4096,
			"reconnect": map[string]any{"max_attempts": 3, "initial_delay": "100ms", "max_delay": "1s"}},
	}
	configtest.Check(t, newConfigs, configtest.Case{
		Good: []any{entry},
		Valid: []any{map[string]any{"endpoint": "http://x/g", "query": "query A { a }", "generate": map[string]any{"query_fields": true}},
			map[string]any{"endpoint": "http://x/g", "tool": map[string]any{"kind": "query", "document": "{a}"}}},
	})
}
