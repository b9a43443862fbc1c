package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/crankmcp/crank/internal/mcptest"
)

// Through Caddy, the per-client session limit counts Caddy's client IP: a
// client past it gets 429 naming max_mcp_sessions_per_client, and an
// X-Forwarded-For it sends itself (no trusted_proxies) changes nothing.
func TestSessionLimitThroughCaddy(t *testing.T) {
	t.Parallel()
	up := mcptest.NewUsers(t)
	g := startGateway(t, gatewayOptions{Operations: fmt.Sprintf(mcptest.UsersOps, up.URL), Handler: "max_mcp_sessions_per_client 2"})
	for i := range 2 {
		c := &mcptest.Client{T: t, URL: g.MCPURL}
		c.Initialize("2025-06-18")
		if i == 0 {
			var res mcptest.CallResult
			defer c.OK("tools/call", map[string]any{"name": "get_user", "arguments": map[string]any{"id": 1}}, &res)
		}
	}
	for _, xff := range []string{"", "203.0.113.7"} {
		c := &mcptest.Client{T: t, URL: g.MCPURL, Header: http.Header{}}
		if xff != "" {
			c.Header.Set("X-Forwarded-For", xff)
		}
		r := c.Call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "third", "version": "1"}})
		if r.HTTPStatus != http.StatusTooManyRequests || r.Error == nil || !strings.Contains(r.Error.Message, "max_mcp_sessions_per_client") ||
			!strings.Contains(r.Error.Message, "127.0.0.1") {
			t.Errorf("a third session (X-Forwarded-For %q): %+v", xff, r)
		}
	}
}
