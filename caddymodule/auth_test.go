package caddymodule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/auth"
)

// The auth and policy blocks as the Caddyfile writes them.
func TestAuthCaddyfile(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("crank ops.yaml {\n" +
		"\tauth {\n" +
		"\t\tresource https://mcp.example.com/mcp\n" +
		"\t\tissuer https://login.example.com\n" +
		"\t\tissuer https://other.example.com {\n" +
		"\t\t\tjwks_uri https://other.example.com/keys\n" +
		"\t\t\tuser_claim email\n" +
		"\t\t\tuser_prefix other/\n" +
		"\t\t\tintrospection {\n\t\t\t\tclient_id gw\n\t\t\t\tclient_secret {env.SECRET}\n\t\t\t}\n" +
		"\t\t}\n" +
		"\t\taudience api://crank\n" +
		"\t\tscopes mcp tools\n" +
		"\t\tleeway 10s\n" +
		"\t}\n" +
		"\tpolicy {\n" +
		"\t\trule admins `\"admin\" in caller.claims.groups || !tool.annotations.destructive`\n" +
		"\t}\n}"))
	if err != nil {
		t.Fatal(err)
	}
	want := &AuthConfig{Resource: "https://mcp.example.com/mcp", Audiences: []string{"api://crank"}, Scopes: []string{"mcp", "tools"},
		Leeway: caddy.Duration(10 * time.Second), Issuers: []AuthIssuer{{Issuer: "https://login.example.com"},
			{Issuer: "https://other.example.com", JWKSURI: "https://other.example.com/keys", UserClaim: "email", UserPrefix: "other/",
				Introspection: &AuthIntrospection{ClientID: "gw", ClientSecret: "{env.SECRET}"}}}}
	if !reflect.DeepEqual(h.Auth, want) {
		t.Errorf("auth = %+v\nwant %+v", h.Auth, want)
	}
	if wantP := (&PolicyConfig{Rules: []auth.Rule{{Name: "admins", Expression: `"admin" in caller.claims.groups || !tool.annotations.destructive`}}}); !reflect.DeepEqual(h.Policy, wantP) {
		t.Errorf("policy = %+v", h.Policy)
	}
}

// Bad auth and policy blocks fail adapting with the line, or Provision
// naming the field or the rule; Provision reaches no authorization server.
func TestAuthConfigErrors(t *testing.T) {
	site := func(body string) string { return ":8080 {\n\tcrank /mcp ops.yaml {\n" + body + "\n\t}\n}\n" }
	for _, c := range []struct{ caddyfile, want string }{
		{site("\t\tauth {\n\t\t\tissuer https://login.example.com\n\t\t}"), "auth: resource is required"},
		{site("\t\tauth {\n\t\t\tresource https://a.example/mcp\n\t\t}"), "at least one issuer"},
		{site("\t\tauth {\n\t\t\tresource https://a.example/mcp\n\t\t\tissuers x\n\t\t}"), `unrecognized auth option "issuers"`},
		{site("\t\tpolicy {\n\t\t\trule only_name\n\t\t}"), "rule <name> <expression>"},
		{site("\t\tpolicy {\n\t\t}"), "at least one rule"},
	} {
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(c.caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: %v, want %q and the line", c.caddyfile, err, c.want)
		}
	}

	issuer := []AuthIssuer{{Issuer: "https://login.example.com"}}
	for _, c := range []struct {
		name string
		h    Handler
		want string
	}{
		{"http resource", Handler{Auth: &AuthConfig{Resource: "http://mcp.example.com/mcp", Issuers: issuer}}, "crank: auth: resource:"},
		{"bad issuer", Handler{Auth: &AuthConfig{Resource: "https://a.example/mcp", Issuers: []AuthIssuer{{Issuer: "login.example.com"}}}},
			`crank: auth: issuer "login.example.com"`},
		{"two issuers one prefix", Handler{Auth: &AuthConfig{Resource: "https://a.example/mcp",
			Issuers: []AuthIssuer{{Issuer: "https://a.example"}, {Issuer: "https://b.example"}}}}, "user_prefix"},
		{"bad scope", Handler{Auth: &AuthConfig{Resource: "https://a.example/mcp", Issuers: issuer, Scopes: []string{`a"b`}}}, "scopes:"},
		{"malformed rule", Handler{Policy: &PolicyConfig{Rules: []auth.Rule{{Name: "ok", Expression: "true"},
			{Name: "broken", Expression: "caller.claims.groups.exists(g,"}}}}, `crank: policy rule "broken"`},
		{"rule of the wrong type", Handler{Policy: &PolicyConfig{Rules: []auth.Rule{{Name: "name", Expression: "tool.name"}}}},
			`policy rule "name": must be a boolean expression`},
		{"unknown variable", Handler{Policy: &PolicyConfig{Rules: []auth.Rule{{Name: "who", Expression: `user == "x"`}}}},
			`policy rule "who"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			h := c.h
			h.Operations = []string{"ops.yaml"}
			if err := h.Provision(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Provision: %v, want %q", err, c.want)
			}
		})
	}
}

// The Caddyfiles of docs/security.md adapt, and their crank handlers
// provision (no authorization server is reached).
func TestSecurityDocCaddyfiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 3 {
		t.Fatalf("docs/security.md has %d Caddyfiles, want the three setups", len(blocks))
	}
	withAuth, withPolicy := 0, 0
	for i, b := range blocks {
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(b[1]), nil)
		if err != nil {
			t.Errorf("Caddyfile %d: %v", i+1, err)
			continue
		}
		var cfg any
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, raw := range crankHandlers(cfg) {
			h := Handler{logger: zap.NewNop()}
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatalf("Caddyfile %d: %v in %s", i+1, err, raw)
			}
			if err := h.provisionAuthz(); err != nil {
				t.Errorf("Caddyfile %d: %v", i+1, err)
			}
			if h.Auth != nil {
				withAuth++
			}
			if h.Policy != nil {
				withPolicy++
			}
		}
	}
	if withAuth != 1 || withPolicy != 2 {
		t.Errorf("the Caddyfiles have %d auth and %d policy blocks, want the OIDC one and two policies", withAuth, withPolicy)
	}
}

// crankHandlers finds the crank handlers of an adapted config.
func crankHandlers(v any) []json.RawMessage {
	var out []json.RawMessage
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == "crank" {
			raw, _ := json.Marshal(v)
			return []json.RawMessage{raw}
		}
		for _, e := range v {
			out = append(out, crankHandlers(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, crankHandlers(e)...)
		}
	}
	return out
}
