package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/oauthtest"
)

const testResource = "http://127.0.0.1:9/mcp"

func newRS(t *testing.T, is *oauthtest.Issuer, mutate func(*ResourceConfig)) *ResourceServer {
	t.Helper()
	cfg := ResourceConfig{Resource: testResource, Issuers: []IssuerConfig{{Issuer: is.Issuer()}},
		Scopes: []string{"mcp"}, MinKeyRefresh: 20 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	rs, err := NewResourceServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func authenticate(rs *ResourceServer, token string) (*Identity, *Error) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return rs.Authenticate(context.Background(), r)
}

func TestResourceServerRefusals(t *testing.T) {
	is := oauthtest.New(t)
	other := oauthtest.New(t)
	rs := newRS(t, is, nil)
	hour := time.Now().Add(-time.Hour).Unix()
	for _, c := range []struct {
		name   string
		token  string
		status int
		code   string
		desc   string
	}{
		{"none", "", 401, "", "no bearer token"},
		{"expired", is.Token(testResource, oauthtest.Claims{"scope": "mcp", "exp": hour}), 401, "invalid_token", "expired"},
		{"not yet valid", is.Token(testResource, oauthtest.Claims{"scope": "mcp", "nbf": time.Now().Add(time.Hour).Unix()}), 401, "invalid_token", "not valid yet"},
		{"issued in the future", is.Token(testResource, oauthtest.Claims{"scope": "mcp", "iat": time.Now().Add(time.Hour).Unix()}), 401, "invalid_token", "issued in the future"},
		{"no exp", is.Token(testResource, oauthtest.Claims{"scope": "mcp", "exp": nil}), 401, "invalid_token", "no exp"},
		{"wrong audience", is.Token("https://other.example/api", oauthtest.Claims{"scope": "mcp"}), 401, "invalid_token", "audience"},
		{"wrong issuer", other.Token(testResource, oauthtest.Claims{"scope": "mcp"}), 401, "invalid_token", "issuer is not accepted"},
		{"forged issuer", other.Token(testResource, oauthtest.Claims{"scope": "mcp", "iss": is.Issuer()}), 401, "invalid_token", "signature"},
		{"bad signature", is.TokenSignedByStranger(testResource, oauthtest.Claims{"scope": "mcp"}), 401, "invalid_token", "signature"},
		{"missing scope", is.Token(testResource, oauthtest.Claims{"scope": "other"}), 403, "insufficient_scope", "mcp"},
		{"garbage", "a.b.c", 401, "invalid_token", "malformed"},
		{"opaque", "opaque-token", 401, "invalid_token", "introspection"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := authenticate(rs, c.token)
			if err == nil || err.Status != c.status || err.Code != c.code || !strings.Contains(err.Description, c.desc) {
				t.Fatalf("got %+v, want %d %q ~%q", err, c.status, c.code, c.desc)
			}
			ch := rs.Challenge(err)
			if !strings.HasPrefix(ch, `Bearer resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp", scope="mcp"`) ||
				c.code != "" && !strings.Contains(ch, `error="`+c.code+`"`) {
				t.Fatalf("challenge %s", ch)
			}
		})
	}
	id, err := authenticate(rs, is.Token(testResource, oauthtest.Claims{"scope": "mcp extra", "sub": "bob", "groups": []string{"g"}}))
	if err != nil || id.User != "bob" || id.Subject != "bob" || len(id.Scopes) != 2 || id.Claims["groups"] == nil {
		t.Fatalf("valid token: %+v %v", id, err)
	}
}

func TestResourceServerRefreshesKeysOnUnknownKid(t *testing.T) {
	is := oauthtest.New(t)
	rs := newRS(t, is, nil)
	if _, err := authenticate(rs, is.Token(testResource, oauthtest.Claims{"scope": "mcp"})); err != nil {
		t.Fatal(err)
	}
	is.RotateUnpublished("k2")
	tok := is.Token(testResource, oauthtest.Claims{"scope": "mcp"})
	time.Sleep(30 * time.Millisecond)
	if _, err := authenticate(rs, tok); err == nil || !strings.Contains(err.Description, `kid "k2"`) {
		t.Fatalf("unpublished kid: %v", err)
	}
	fetches := is.KeyFetches()
	// Refetches are throttled: a flood of unknown kids costs one fetch per
	// MinKeyRefresh (20ms) at most, however long a loaded machine takes
	// over the flood.
	began := time.Now()
	for range 20 {
		_, _ = authenticate(rs, tok)
	}
	allowed := 1 + int(time.Since(began)/(20*time.Millisecond))
	if n := is.KeyFetches() - fetches; n > allowed {
		t.Fatalf("%d key fetches for a flood of 20 unknown kids in %s", n, time.Since(began))
	}
	is.Publish()
	time.Sleep(30 * time.Millisecond)
	if _, err := authenticate(rs, tok); err != nil {
		t.Fatalf("after the key is published: %v", err)
	}
}

func TestResourceServerUnavailableIssuerRecovers(t *testing.T) {
	is := oauthtest.New(t)
	rs := newRS(t, is, nil)
	tok := is.Token(testResource, oauthtest.Claims{"scope": "mcp"})
	is.SetDown(true)
	if _, err := authenticate(rs, tok); err == nil || err.Status != 503 {
		t.Fatalf("issuer down: %+v", err)
	}
	is.SetDown(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := authenticate(rs, tok)
		if err == nil {
			break
		}
		if err.Status != 503 || time.Now().After(deadline) {
			t.Fatalf("issuer back: %+v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestResourceServerIntrospects(t *testing.T) {
	is := oauthtest.New(t)
	rs := newRS(t, is, func(c *ResourceConfig) {
		c.Issuers[0].Introspection = &IntrospectionConfig{ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret}
	})
	id, err := authenticate(rs, is.OpaqueToken(testResource, oauthtest.Claims{"scope": "mcp", "sub": "carol"}))
	if err != nil || id.User != "carol" {
		t.Fatalf("active: %+v %v", id, err)
	}
	for name, tok := range map[string]string{
		"inactive":       "opaque-unknown",
		"wrong audience": is.OpaqueToken("https://elsewhere", oauthtest.Claims{"scope": "mcp"}),
		"expired":        is.OpaqueToken(testResource, oauthtest.Claims{"scope": "mcp", "exp": time.Now().Add(-time.Hour).Unix()}),
	} {
		if _, err := authenticate(rs, tok); err == nil || err.Status != 401 {
			t.Errorf("%s: %+v", name, err)
		}
	}
}

func TestResourceServerUserPrefixes(t *testing.T) {
	a, b := oauthtest.New(t), oauthtest.New(t)
	rs := newRS(t, a, func(c *ResourceConfig) {
		c.Issuers = append(c.Issuers, IssuerConfig{Issuer: b.Issuer(), UserPrefix: "partner/", UserClaim: "email"})
	})
	ida, _ := authenticate(rs, a.Token(testResource, oauthtest.Claims{"scope": "mcp"}))
	idb, err := authenticate(rs, b.Token(testResource, oauthtest.Claims{"scope": "mcp", "email": "alice@partner"}))
	if ida == nil || idb == nil || ida.User != "alice" || idb.User != "partner/alice@partner" {
		t.Fatalf("%v %v %v", ida, idb, err)
	}
	if _, err := authenticate(rs, b.Token(testResource, oauthtest.Claims{"scope": "mcp"})); err == nil || !strings.Contains(err.Description, "email") {
		t.Fatalf("no email claim: %v", err)
	}
}

func TestResourceConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  ResourceConfig
		want string
	}{
		{ResourceConfig{}, "resource: required"},
		{ResourceConfig{Resource: "http://mcp.example.com/mcp", Issuers: []IssuerConfig{{Issuer: "https://idp"}}}, "http is only allowed for loopback"},
		{ResourceConfig{Resource: "https://mcp.example.com/mcp"}, "issuer: at least one"},
		{ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://a"}, {Issuer: "https://b"}}}, "distinct user_prefix"},
		{ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://a"}, {Issuer: "https://a"}}}, "listed twice"},
		{ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://a", Introspection: &IntrospectionConfig{}}}}, "client_id: required"},
		{ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://a"}}, Scopes: []string{"a b"}}, "is not a scope"},
	} {
		if err := c.cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestMetadataServed(t *testing.T) {
	is := oauthtest.New(t)
	rs := newRS(t, is, nil)
	for _, p := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		w := httptest.NewRecorder()
		if !rs.ServeMetadata(w, httptest.NewRequest(http.MethodGet, p, nil)) || w.Code != 200 ||
			!strings.Contains(w.Body.String(), `"resource":"`+testResource+`"`) ||
			!strings.Contains(w.Body.String(), `"authorization_servers":["`+is.Issuer()+`"]`) {
			t.Fatalf("%s: %d %s", p, w.Code, w.Body)
		}
	}
	if rs.ServeMetadata(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/other", nil)) {
		t.Fatal("served another resource's metadata path")
	}
}

// TestPlainHTTPOnlyForLoopback: plain http is accepted for an issuer, a
// JWKS URI, an introspection endpoint, the resource and an upstream token
// endpoint only when the host is a loopback address or exactly localhost,
// never for a name that merely starts like one.
func TestPlainHTTPOnlyForLoopback(t *testing.T) {
	refused := []string{"127.attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example", "127.0.0.1.", "[::2]", "0.0.0.0"}
	accepted := []string{"127.0.0.1", "127.3.4.5", "[::1]", "localhost", "localhost:8080", "127.0.0.1:9000", "[::1]:9000"}
	configs := map[string]func(u string) error{
		"issuer": func(u string) error {
			c := ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: u}}}
			return c.Check()
		},
		"jwks_uri": func(u string) error {
			c := ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://idp", JWKSURI: u + "/keys"}}}
			return c.Check()
		},
		"introspection endpoint": func(u string) error {
			c := ResourceConfig{Resource: "https://m/mcp", Issuers: []IssuerConfig{{Issuer: "https://idp",
				Introspection: &IntrospectionConfig{Endpoint: u + "/introspect", ClientID: "c"}}}}
			return c.Check()
		},
		"resource": func(u string) error {
			c := ResourceConfig{Resource: u + "/mcp", Issuers: []IssuerConfig{{Issuer: "https://idp"}}}
			return c.Check()
		},
		"token_endpoint": func(u string) error {
			c := UpstreamConfig{Grant: GrantClientCredentials, TokenEndpoint: u + "/token", ClientID: "c", Audience: "a"}
			return c.Check()
		},
	}
	for field, check := range configs {
		for _, h := range refused {
			if err := check("http://" + h); err == nil || !strings.Contains(err.Error(), "http is only allowed for loopback") {
				t.Errorf("%s http://%s: %v, want refused as not loopback", field, h, err)
			}
		}
		for _, h := range accepted {
			if err := check("http://" + h); err != nil {
				t.Errorf("%s http://%s: %v, want accepted (loopback)", field, h, err)
			}
		}
	}
}

// Endpoints an issuer's metadata names follow the rule configured ones
// do: a key set or an introspection endpoint over plain http on another
// host is refused, not fetched.
func TestDiscoveredEndpointsHTTPSOrLoopback(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"jwks_uri", "introspection_endpoint"} {
		var srv *httptest.Server
		srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			meta := `{"issuer": "` + srv.URL + `", "jwks_uri": "` + srv.URL + `/jwks", "` + field + `": "http://keys.example.com/x"}`
			_, _ = w.Write([]byte(meta))
		}))
		rs, err := NewResourceServer(ResourceConfig{Resource: testResource, Issuers: []IssuerConfig{{Issuer: srv.URL}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.issuers[srv.URL].discover(context.Background())
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), field+` "http://keys.example.com/x": http is only allowed for loopback hosts`) {
			t.Errorf("%s over plain http elsewhere: %v", field, err)
		}
	}
}
