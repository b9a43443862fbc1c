package websocket

import (
	"testing"

	"github.com/crankmcp/crank/internal/configtest"
)

// TestConfigDeclaration ties the config struct, the published schema, the
// documentation and the diagnostics together.
func TestConfigDeclaration(t *testing.T) {
	t.Parallel()
	feed := map[string]any{
		"url": "wss://feed.example/v1/{{region}}?depth={{depth}}", "subprotocols": []string{"feed.v1"},
		"headers": map[string]any{"Authorization": "Bearer x", "X-N": 1}, "tls": map[string]any{"server_name": "feed.internal"},
		"compression": "no_context_takeover", "max_message_bytes": 4096,
		"subscribe":   []any{map[string]any{"op": "sub", "ch": "{{ch}}"}, "ready"},
		"unsubscribe": map[string]any{"op": "unsub"},
		"ack":         map[string]any{"path": "$.type", "equals": "subscribed", "timeout_ms": 1000},
		"filter":      "@.type == 'alert'", "id_path": "$.seq", "binary": "base64",
		"heartbeat":        map[string]any{"ping_interval_ms": 1000, "pong_timeout_ms": 500, "message": map[string]any{"op": "ping"}},
		"reconnect":        map[string]any{"max_attempts": 3, "initial_delay_ms": 10, "max_delay_ms": 100},
		"close_timeout_ms": 500,
	}
	configtest.Check(t, newConfigs, configtest.Case{
		Good: []any{feed},
		Valid: []any{`{"url":"wss://feed.example/{{ch}}","subscribe":{"op":"sub","ch":"{{ch}}"},"ack":{"path":"$.ok"}}`,
			`{"url":"ws://h/x","heartbeat":{"ping_interval_ms":0}}`},
	})
}
