package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/oauthtest"
)

// BenchmarkPolicyCheck evaluates a three-rule policy (claims, annotations,
// arguments) for one call, and tools/list visibility, against a policy of
// no rules in the same run.
func BenchmarkPolicyCheck(b *testing.B) {
	p, err := CompilePolicy([]Rule{
		{Name: "admins-destroy", Expression: `(has(caller.claims.groups) && "admin" in caller.claims.groups) || !tool.annotations.destructive`},
		{Name: "small-ids", Expression: `!has(args.id) || args.id < 1000`},
		{Name: "has-subject", Expression: `caller.subject != ""`},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := NewCaller("user:bob", "bob", "default", &Identity{Subject: "bob", Claims: map[string]any{"groups": []any{"staff"}}, Scopes: []string{"mcp"}})
	tool := &Tool{Name: "get_user", Mode: "unary", Adapter: "rest", Annotations: ToolAnnotations{ReadOnly: true}}
	args := json.RawMessage(`{"id":7}`)
	b.Run("none", func(b *testing.B) {
		var none *Policy
		for range b.N {
			if d, _ := none.Check(c, tool, args); d != Allowed {
				b.Fatal(d)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if d, _ := p.Check(c, tool, args); d != Allowed {
				b.Fatal(d)
			}
		}
	})
	b.Run("visible", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if !p.Visible(c, tool) {
				b.Fatal("hidden")
			}
		}
	})
}

// BenchmarkAuthenticate checks a bearer token already verified once (the
// verification is cached per token until it expires).
func BenchmarkAuthenticate(b *testing.B) {
	is := oauthtest.New(b)
	rs, err := NewResourceServer(ResourceConfig{Resource: testResource, Issuers: []IssuerConfig{{Issuer: is.Issuer()}}, Scopes: []string{"mcp"}})
	if err != nil {
		b.Fatal(err)
	}
	tok := is.Token(testResource, oauthtest.Claims{"scope": "mcp", "exp": time.Now().Add(time.Hour).Unix()})
	if _, aerr := authenticate(rs, tok); aerr != nil {
		b.Fatal(aerr)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, aerr := rs.Authenticate(ctx, r); aerr != nil {
			b.Fatal(aerr)
		}
	}
}
