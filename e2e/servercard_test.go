package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A client learns the endpoint before it connects: the built gateway
// serves its server card at /mcp/server-card and the domain's AI catalog
// at /.well-known/ai-catalog.json, each with its media type, a strong
// ETag (304 on If-None-Match) and CORS for a browser on another origin,
// naming no tool or upstream; another Host gets neither; and
// crank server-json prints the endpoint's registry server.json from the
// same Caddyfile.
func TestServerCardAndCatalog(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "5s", ""),
		Site:    `@mcp path /mcp /mcp/server-card /.well-known/ai-catalog.json`,
		Matcher: "@mcp",
		Handler: `server_card {
			name        com.example/users
			title       Users
			description "Look up the users of the example service."
			url         {{mcp_url}}
		}`})
	base := strings.TrimSuffix(g.MCPURL, "/mcp")

	get := func(path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if m, ok := hdr[":method"]; ok {
			req.Method = m
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else if k[0] != ':' {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	resp, card := get("/mcp/server-card", map[string]string{"Accept": "application/mcp-server-card+json", "Origin": "https://app.example"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/mcp-server-card+json" ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("ETag") == "" {
		t.Fatalf("server card: %s %v %s", resp.Status, resp.Header, card)
	}
	var c struct {
		Schema  string `json:"$schema"`
		Name    string
		Version string
		Remotes []struct {
			Type, URL                 string
			SupportedProtocolVersions []string
		}
	}
	if err := json.Unmarshal([]byte(card), &c); err != nil {
		t.Fatal(err)
	}
	if c.Schema != "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json" || c.Name != "com.example/users" ||
		c.Version == "" || len(c.Remotes) != 1 || c.Remotes[0].URL != g.MCPURL || c.Remotes[0].Type != "streamable-http" ||
		len(c.Remotes[0].SupportedProtocolVersions) < 2 {
		t.Errorf("server card %s", card)
	}
	for _, leak := range []string{"get_user", "list_users", up.URL} {
		if strings.Contains(card, leak) {
			t.Errorf("the card names %q: %s", leak, card)
		}
	}
	if resp, body := get("/mcp/server-card", map[string]string{"If-None-Match": resp.Header.Get("ETag")}); resp.StatusCode != http.StatusNotModified || body != "" {
		t.Errorf("If-None-Match of the card's ETag: %s %q", resp.Status, body)
	}
	if resp, _ := get("/mcp/server-card", map[string]string{":method": http.MethodOptions, "Origin": "https://app.example",
		"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "if-none-match"}); resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "GET") ||
		!strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "if-none-match") {
		t.Errorf("CORS preflight: %s %v", resp.Status, resp.Header)
	}
	// Another Host (DNS rebinding) gets no card: the site's host matcher
	// answers it, or else the endpoint's Host check.
	if resp, body := get("/mcp/server-card", map[string]string{"Host": "evil.example.com"}); strings.Contains(body, "com.example/users") {
		t.Errorf("a non-loopback Host on the loopback listener: %s %s", resp.Status, body)
	}

	resp, cat := get("/.well-known/ai-catalog.json", map[string]string{"Origin": "https://app.example"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/ai-catalog+json" ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("AI catalog: %s %v %s", resp.Status, resp.Header, cat)
	}
	var ac struct {
		SpecVersion string
		Entries     []struct{ Identifier, DisplayName, Type, URL string }
	}
	if err := json.Unmarshal([]byte(cat), &ac); err != nil {
		t.Fatal(err)
	}
	if ac.SpecVersion != "1.0" || len(ac.Entries) != 1 || ac.Entries[0].URL != g.MCPURL+"/server-card" ||
		ac.Entries[0].Type != "application/mcp-server-card+json" || ac.Entries[0].Identifier != "urn:air:127.0.0.1:mcp:users" {
		t.Errorf("AI catalog %s", cat)
	}
	if resp, _ := get("/.well-known/ai-catalog.json", map[string]string{"If-None-Match": resp.Header.Get("ETag")}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match of the catalog's ETag: %s", resp.Status)
	}

	// The endpoint serves MCP as before.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Errorf("tools/list: %v %+v", err, tools)
	}
	_ = cs.Close()

	out, err := exec.Command(crankBin, "server-json", "--config", filepath.Join(g.dir, "Caddyfile"), "--adapter", "caddyfile").Output()
	if err != nil {
		t.Fatalf("crank server-json: %v", err)
	}
	var sj map[string]any
	if err := json.Unmarshal(out, &sj); err != nil {
		t.Fatalf("crank server-json printed %q: %v", out, err)
	}
	remote, _ := sj["remotes"].([]any)
	if sj["$schema"] != "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json" || sj["name"] != "com.example/users" ||
		len(remote) != 1 || fmt.Sprint(remote[0].(map[string]any)["url"]) != g.MCPURL {
		t.Errorf("server.json %s", out)
	}
}
