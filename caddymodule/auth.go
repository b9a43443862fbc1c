package caddymodule

import (
	"errors"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host/auth"
)

// AuthConfig makes the endpoint an OAuth 2.1 resource server (MCP
// authorization): every MCP request needs a bearer token one of the
// issuers issued for the resource. The handler also serves the protected
// resource metadata at /.well-known/oauth-protected-resource<resource
// path> (and /.well-known/oauth-protected-resource) when Caddy routes
// those paths to it.
type AuthConfig struct {
	// Resource is the URL clients reach the endpoint at, e.g.
	// https://mcp.example.com/mcp (http only on loopback).
	Resource string `json:"resource"`
	// Issuers are the authorization servers whose tokens are accepted.
	Issuers []AuthIssuer `json:"issuers"`
	// Audiences are the aud values accepted (any one); default the
	// resource.
	Audiences []string `json:"audiences,omitempty"`
	// Scopes must all be granted to every token.
	Scopes []string `json:"scopes,omitempty"`
	// ScopesSupported are advertised in the metadata; default scopes.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// Leeway is the clock skew allowed on exp and nbf. Default 30s.
	Leeway caddy.Duration `json:"leeway,omitempty"`
}

// AuthIssuer is one authorization server.
type AuthIssuer struct {
	// Issuer is its issuer identifier; its metadata (and JWKS) is
	// discovered from it when first needed.
	Issuer string `json:"issuer"`
	// JWKSURI, optional, is its key set, skipping discovery.
	JWKSURI string `json:"jwks_uri,omitempty"`
	// UserClaim names the claim that identifies users. Default sub.
	UserClaim string `json:"user_claim,omitempty"`
	// UserPrefix goes before the user claim's value; several issuers need
	// distinct ones.
	UserPrefix string `json:"user_prefix,omitempty"`
	// Introspection checks opaque tokens at this issuer (RFC 7662).
	Introspection *AuthIntrospection `json:"introspection,omitempty"`
}

// AuthIntrospection is how opaque tokens are introspected.
type AuthIntrospection struct {
	// Endpoint, default the issuer metadata's introspection_endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	ClientID string `json:"client_id"`
	// ClientSecret: take it from a placeholder ({env.NAME}).
	ClientSecret string `json:"client_secret,omitempty"`
}

// PolicyConfig is the per-tool policy: CEL rules that must all be true
// for a caller to see a tool and call it with its arguments.
type PolicyConfig struct {
	Rules []auth.Rule `json:"rules"`
}

// resourceServer checks the auth block and returns its resource server,
// placeholders expanded; nil without a block. It does no I/O.
func (a *AuthConfig) resourceServer(h *Handler) (*auth.ResourceServer, error) {
	if a == nil {
		return nil, nil
	}
	repl := caddy.NewReplacer()
	expand := func(s string) string { return repl.ReplaceKnown(s, "") }
	cfg := auth.ResourceConfig{Resource: expand(a.Resource), Leeway: time.Duration(a.Leeway),
		Scopes: a.Scopes, ScopesSupported: a.ScopesSupported}
	for _, aud := range a.Audiences {
		cfg.Audiences = append(cfg.Audiences, expand(aud))
	}
	for _, is := range a.Issuers {
		ic := auth.IssuerConfig{Issuer: expand(is.Issuer), JWKSURI: expand(is.JWKSURI), UserClaim: is.UserClaim, UserPrefix: is.UserPrefix}
		if in := is.Introspection; in != nil {
			ic.Introspection = &auth.IntrospectionConfig{Endpoint: expand(in.Endpoint), ClientID: expand(in.ClientID),
				ClientSecret: expand(in.ClientSecret)}
		}
		cfg.Issuers = append(cfg.Issuers, ic)
	}
	if h != nil {
		cfg.Logger = h.logger.Named("auth")
	}
	rs, err := auth.NewResourceServer(cfg)
	if err != nil {
		return nil, fmt.Errorf("crank: auth: %w", err)
	}
	return rs, nil
}

// compile compiles and type-checks the rules; nil without any.
func (p *PolicyConfig) compile() (*auth.Policy, error) {
	if p == nil {
		return nil, nil
	}
	if len(p.Rules) == 0 {
		return nil, errors.New("crank: policy: at least one rule is required (rule <name> <expression>)")
	}
	pol, err := auth.CompilePolicy(p.Rules)
	if err != nil {
		return nil, fmt.Errorf("crank: %w", err)
	}
	return pol, nil
}

// unmarshalAuth reads the auth block. Syntax:
//
//	auth {
//	    resource         <url>
//	    issuer           <url> [{
//	        jwks_uri    <url>
//	        user_claim  <claim>
//	        user_prefix <prefix>
//	        introspection {
//	            endpoint      <url>
//	            client_id     <id>
//	            client_secret <secret>
//	        }
//	    }]
//	    audience         <aud...>
//	    scopes           <scope...>
//	    scopes_supported <scope...>
//	    leeway           <duration>
//	}
func unmarshalAuth(d *caddyfile.Dispenser) (*AuthConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	a := &AuthConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "resource":
			err = oneArg(d, &a.Resource)
		case "issuer":
			var is AuthIssuer
			if err = oneArg(d, &is.Issuer); err != nil {
				return nil, err
			}
			if err = unmarshalIssuer(d, &is); err != nil {
				return nil, err
			}
			a.Issuers = append(a.Issuers, is)
		case "audience", "scopes", "scopes_supported":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return nil, d.ArgErr()
			}
			switch opt {
			case "audience":
				a.Audiences = append(a.Audiences, args...)
			case "scopes":
				a.Scopes = append(a.Scopes, args...)
			default:
				a.ScopesSupported = append(a.ScopesSupported, args...)
			}
		case "leeway":
			var s string
			if err = oneArg(d, &s); err == nil {
				a.Leeway, err = parseDuration(d, "leeway", s)
			}
		default:
			return nil, d.Errf("unrecognized auth option %q", opt)
		}
		if err != nil {
			return nil, err
		}
	}
	if a.Resource == "" {
		return nil, d.Err("auth: resource is required (the URL clients reach this endpoint at)")
	}
	if len(a.Issuers) == 0 {
		return nil, d.Err("auth: at least one issuer is required")
	}
	return a, nil
}

func unmarshalIssuer(d *caddyfile.Dispenser, is *AuthIssuer) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "jwks_uri":
			err = oneArg(d, &is.JWKSURI)
		case "user_claim":
			err = oneArg(d, &is.UserClaim)
		case "user_prefix":
			err = oneArg(d, &is.UserPrefix)
		case "introspection":
			if d.NextArg() {
				return d.ArgErr()
			}
			in := &AuthIntrospection{}
			for n := d.Nesting(); d.NextBlock(n); {
				switch d.Val() {
				case "endpoint":
					err = oneArg(d, &in.Endpoint)
				case "client_id":
					err = oneArg(d, &in.ClientID)
				case "client_secret":
					err = oneArg(d, &in.ClientSecret)
				default:
					return d.Errf("unrecognized introspection option %q", d.Val())
				}
				if err != nil {
					return err
				}
			}
			is.Introspection = in
		default:
			return d.Errf("unrecognized issuer option %q", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unmarshalPolicy reads the policy block. Syntax:
//
//	policy {
//	    rule <name> <cel_expression>
//	}
//
// Quote an expression with backticks: rule admins `"admin" in caller.claims.groups`.
func unmarshalPolicy(d *caddyfile.Dispenser) (*PolicyConfig, error) {
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	p := &PolicyConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "rule" {
			return nil, d.Errf("unrecognized policy option %q (rule <name> <expression>)", d.Val())
		}
		var r auth.Rule
		if !d.Args(&r.Name, &r.Expression) || d.NextArg() {
			return nil, d.Err("policy: rule <name> <expression>: quote the expression with backticks")
		}
		p.Rules = append(p.Rules, r)
	}
	if len(p.Rules) == 0 {
		return nil, d.Err("policy: at least one rule is required")
	}
	return p, nil
}

// authz is what Provision made of the auth and policy blocks.
type authz struct {
	rs     *auth.ResourceServer
	policy *auth.Policy
}

// provisionAuthz checks the auth and policy blocks and builds their
// resource server and policy. It does no I/O: the authorization servers
// are reached on the first request.
func (h *Handler) provisionAuthz() error {
	rs, err := h.Auth.resourceServer(h)
	if err != nil {
		return err
	}
	pol, err := h.Policy.compile()
	if err != nil {
		return err
	}
	h.authz = authz{rs: rs, policy: pol}
	return nil
}

// unmarshalAuthz reads the auth and policy subdirectives; ok is false for
// any other.
func (h *Handler) unmarshalAuthz(d *caddyfile.Dispenser) (ok bool, err error) {
	switch d.Val() {
	case "auth":
		if h.Auth != nil {
			return true, d.Err("auth: given twice")
		}
		h.Auth, err = unmarshalAuth(d)
		return true, err
	case "policy":
		if h.Policy != nil {
			return true, d.Err("policy: given twice")
		}
		h.Policy, err = unmarshalPolicy(d)
		return true, err
	}
	return false, nil
}
