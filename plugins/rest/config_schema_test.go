package rest

import (
	"testing"

	"github.com/crankmcp/crank/internal/configtest"
	"github.com/crankmcp/crank/plugins/sdk"
)

// parseResult is a config prepared outside any adapter's cache.
type parseResult struct {
	op  *operation
	err error
}

func parseConfig(raw []byte) parseResult {
	p := newConfigs().Get(&sdk.Operation{Config: raw})
	r := parseResult{err: p.Err()}
	if p.Value != nil {
		r.op = p.Value.op
	}
	return r
}

// TestConfigDeclaration ties the config struct, the published schema, the
// documentation and the diagnostics together.
func TestConfigDeclaration(t *testing.T) {
	t.Parallel()
	plain := map[string]any{
		"method": "post", "url": "https://api.example.com/v1/users/{id}/x-{part}?fixed=1",
		"query": []string{"q"}, "headers": map[string]any{"Authorization": "Bearer x", "X-N": 1},
		"header_args": map[string]string{"X-Tag": "tag"}, "body": "payload", "timeout": "2s",
		"max_response_bytes": 1024, "body_fields": map[string]any{"stream": true}, "cursor_param": "since",
		"stream":       map[string]any{"reconnect": true, "max_event_bytes": 4096, "events": []string{"log"}, "end_data": "", "max_reconnects": 2},
		"param_styles": map[string]any{"tag": map[string]any{"style": "simple", "explode": true}},
	}
	importEntry := map[string]any{"openapi": map[string]any{
		"document": "petstore.yaml", "base_url": "https://api.example.com/v1", "allow_external_refs": false,
		"tool_prefix": "pets_", "include": map[string]any{"tags": []string{"pets"}, "operation_ids": []string{"list*"}},
		"exclude": map[string]any{"methods": []string{"DELETE"}, "paths": []string{"/admin"}},
		"overrides": map[string]any{
			"getPet": map[string]any{"name": "get_pet", "title": "T", "description": "D", "mode": "unary",
				"annotations": map[string]any{"read_only": true, "destructive": false, "idempotent": true, "open_world": false}},
			"watchEvents": map[string]any{"mode": "window", "transport_behavior": "server_stream",
				"limits": map[string]any{"max_items": 5}, "aggregation": map[string]any{}, "safety": map[string]any{}},
		},
		"credentials":    map[string]any{"api_key": "k", "basic": map[string]any{"username": "u", "password": "p"}},
		"headers":        map[string]any{"X-Tenant": "acme"},
		"timeout":        "10s",
		"output_schemas": true, "max_response_bytes": 1048576,
	}}
	configtest.Check(t, newConfigs, configtest.Case{
		Headings: []string{"# Config", "# OpenAPI import"},
		Good:     []any{plain, importEntry},
		Valid: []any{`{"method": "GET", "url": "http://h/x", "query": {"since": "from"}}`,
			`{"method": "GET", "url": "http://h/x/{id}", "query": ["q"], "param_styles": {"q": {"style": "pipeDelimited", "explode": false}}}`},
	})
}
