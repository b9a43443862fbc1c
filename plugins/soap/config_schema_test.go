package soap

import (
	"testing"

	"github.com/crankmcp/crank/internal/configtest"
)

// TestConfigDeclaration ties the config struct, the published schema, the
// documentation and the diagnostics together.
func TestConfigDeclaration(t *testing.T) {
	t.Parallel()
	entry := map[string]any{
		"wsdl": "service.wsdl", "port": "Soap11", "endpoint": "https://erp.example.com/ws",
		"operations": []string{"Add", "Divide"}, "tool_prefix": "calc_", "headers": map[string]any{"X-Tenant": "acme"},
		"security": map[string]any{"username": "svc", "password": "p", "password_type": "digest", "nonce": true, "timestamp": "5m",
			"sign": map[string]any{"cert_file": "sign-cert.pem", "key_file": "sign-key.pem"}}, "timeout": "10s", "max_response_bytes": 1024,
	}
	configtest.Check(t, newConfigs, configtest.Case{
		BaseDir: "testdata",
		Good:    []any{entry},
		Valid:   []any{`{"wsdl": "service.wsdl", "operation": "Add"}`},
	})
}
