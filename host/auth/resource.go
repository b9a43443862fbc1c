package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/plugins/sdk/loopback"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// ResourceConfig configures a ResourceServer: the endpoint as an OAuth
// protected resource (RFC 9728) and the authorization servers whose
// tokens it accepts.
type ResourceConfig struct {
	// Resource is the endpoint's resource identifier: the absolute URL
	// clients reach it at (https, except on loopback), e.g.
	// https://mcp.example.com/mcp. Its protected resource metadata is
	// served at /.well-known/oauth-protected-resource followed by its
	// path, and tokens must name it as their audience unless Audiences
	// says otherwise.
	Resource string
	// Issuers are the authorization servers whose tokens are accepted.
	Issuers []IssuerConfig
	// Audiences are the aud values a token may carry (any one); default
	// Resource.
	Audiences []string
	// Scopes must all be granted to a token (403 insufficient_scope
	// otherwise).
	Scopes []string
	// ScopesSupported are the scopes the metadata advertises; default
	// Scopes.
	ScopesSupported []string
	// Leeway is the clock skew allowed on exp and nbf; default
	// DefaultLeeway.
	Leeway time.Duration
	// MinKeyRefresh is the least time between two fetches of an issuer's
	// metadata or keys (a token signed by an unknown key fetches them
	// again, at most this often; a failed fetch is retried after it);
	// default DefaultMinKeyRefresh.
	MinKeyRefresh time.Duration
	// HTTPClient reaches the authorization servers; default a client with
	// a 10s timeout.
	HTTPClient *http.Client
	Logger     *zap.Logger
}

// IssuerConfig is one authorization server.
type IssuerConfig struct {
	// Issuer is its issuer identifier (a token's iss), an https URL
	// (http on loopback). Its metadata is discovered from
	// <issuer>/.well-known/openid-configuration, else RFC 8414's
	// /.well-known/oauth-authorization-server.
	Issuer string
	// JWKSURI, when set, is its key set; metadata is then not fetched for
	// keys.
	JWKSURI string
	// UserClaim names the claim that identifies the user; default "sub".
	UserClaim string
	// UserPrefix is put before the user claim's value, so that users of
	// two issuers never share an identity; with several issuers each
	// needs a distinct one (one may have none).
	UserPrefix string
	// Introspection, when set, checks opaque (non-JWT) tokens at this
	// issuer's introspection endpoint (RFC 7662). At most one issuer has
	// it.
	Introspection *IntrospectionConfig
}

// IntrospectionConfig is how the resource server introspects tokens.
type IntrospectionConfig struct {
	// Endpoint is the introspection endpoint; default the issuer
	// metadata's introspection_endpoint.
	Endpoint string
	// ClientID and ClientSecret authenticate the resource server to it
	// (HTTP Basic).
	ClientID, ClientSecret string
}

// Defaults.
const (
	DefaultLeeway        = 30 * time.Second
	DefaultMinKeyRefresh = 10 * time.Second
	// maxKeyAge: keys older than this are fetched again in the background
	// on use.
	maxKeyAge = time.Hour
	// introspectionTTL bounds how long an introspection answer is reused,
	// so a revoked token stops working within it.
	introspectionTTL = 30 * time.Second
	// tokenCacheSize bounds the verified tokens kept.
	tokenCacheSize = 8192
	// maxTokenBytes bounds a bearer token.
	maxTokenBytes = 16 << 10
)

// Check reports the first problem of the config, naming its field.
func (c *ResourceConfig) Check() error {
	if c.Resource == "" {
		return errors.New("resource: required (the URL clients reach the endpoint at, e.g. https://mcp.example.com/mcp)")
	}
	if err := checkURL(c.Resource); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	if len(c.Issuers) == 0 {
		return errors.New("issuer: at least one authorization server is required")
	}
	prefixes := map[string]string{}
	introspecting := ""
	for _, is := range c.Issuers {
		if err := checkURL(is.Issuer); err != nil {
			return fmt.Errorf("issuer %q: %w", is.Issuer, err)
		}
		if other, dup := prefixes[is.UserPrefix]; dup {
			if other == is.Issuer {
				return fmt.Errorf("issuer %q: listed twice", is.Issuer)
			}
			return fmt.Errorf("issuer %q: user_prefix: issuers %q and %q would share user identities: give each a distinct user_prefix",
				is.Issuer, other, is.Issuer)
		}
		prefixes[is.UserPrefix] = is.Issuer
		if is.JWKSURI != "" {
			if err := checkURL(is.JWKSURI); err != nil {
				return fmt.Errorf("issuer %q: jwks_uri: %w", is.Issuer, err)
			}
		}
		if in := is.Introspection; in != nil {
			if introspecting != "" {
				return fmt.Errorf("issuer %q: introspection: only one issuer may introspect opaque tokens (%q does)", is.Issuer, introspecting)
			}
			introspecting = is.Issuer
			if in.Endpoint != "" {
				if err := checkURL(in.Endpoint); err != nil {
					return fmt.Errorf("issuer %q: introspection endpoint: %w", is.Issuer, err)
				}
			}
			if in.ClientID == "" {
				return fmt.Errorf("issuer %q: introspection client_id: required", is.Issuer)
			}
		}
	}
	for _, a := range c.Audiences {
		if a == "" {
			return errors.New("audience: must not be empty")
		}
	}
	for _, s := range append(slices.Clone(c.Scopes), c.ScopesSupported...) {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return fmt.Errorf("scopes: %q is not a scope (no spaces, quotes or backslashes)", s)
		}
	}
	if c.Leeway < 0 {
		return errors.New("leeway: must not be negative")
	}
	return nil
}

// checkURL checks an absolute http(s) URL without userinfo or fragment;
// plain http only for a loopback host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Host == "" || u.User != nil || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q must be an absolute https URL without credentials or fragment", s)
	}
	if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		return fmt.Errorf("%q: http is only allowed for loopback hosts; use https", s)
	}
	return nil
}

// ResourceServer checks the bearer tokens of requests to one endpoint.
// It is safe for concurrent use. Building it does no I/O: issuer metadata
// and keys are fetched on first use.
type ResourceServer struct {
	cfg       ResourceConfig
	audiences []string
	issuers   map[string]*issuer
	introspec *issuer
	log       *zap.Logger
	meta      []byte

	// tokens are the verified tokens by digest, at most tokenCacheSize
	// (the least recently used go first; an expired one is verified
	// again when it comes back).
	tokens *lru.Cache[[32]byte, *Identity]
}

// NewResourceServer checks the config and returns its resource server.
func NewResourceServer(cfg ResourceConfig) (*ResourceServer, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.MinKeyRefresh <= 0 {
		cfg.MinKeyRefresh = DefaultMinKeyRefresh
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewClient(nil) // upstream.go
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if len(cfg.ScopesSupported) == 0 {
		cfg.ScopesSupported = cfg.Scopes
	}
	rs := &ResourceServer{cfg: cfg, audiences: cfg.Audiences, issuers: map[string]*issuer{}, log: cfg.Logger,
		tokens: lru.New[[32]byte, *Identity](tokenCacheSize, nil)}
	if len(rs.audiences) == 0 {
		rs.audiences = []string{cfg.Resource}
	}
	for _, ic := range cfg.Issuers {
		is := &issuer{cfg: ic, rs: rs}
		if is.cfg.UserClaim == "" {
			is.cfg.UserClaim = "sub"
		}
		rs.issuers[ic.Issuer] = is
		if ic.Introspection != nil {
			rs.introspec = is
		}
	}
	rs.meta = rs.metadataJSON()
	return rs, nil
}

// Resource is the resource identifier.
func (rs *ResourceServer) Resource() string { return rs.cfg.Resource }

// Scopes are the scopes every token needs.
func (rs *ResourceServer) Scopes() []string { return rs.cfg.Scopes }

// Error is why a token was refused, as the WWW-Authenticate challenge
// states it (RFC 6750): Code is "invalid_token", "insufficient_scope" or
// "" (no token), Status the HTTP status (401, 403, or 503 when an
// authorization server could not be reached to check it).
type Error struct {
	Status      int
	Code        string
	Description string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return e.Description
	}
	return e.Code + ": " + e.Description
}

func invalidToken(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: fmt.Sprintf(format, args...)}
}

func unavailable(format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Description: fmt.Sprintf(format, args...)}
}

// Authenticate checks a request's bearer token: its identity, or an
// *Error saying why it is refused.
func (rs *ResourceServer) Authenticate(ctx context.Context, r *http.Request) (*Identity, *Error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return nil, &Error{Status: http.StatusUnauthorized, Description: "no bearer token"}
	}
	scheme, token, ok := strings.Cut(h[0], " ")
	token = strings.TrimSpace(token)
	if len(h) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "the Authorization header must be one Bearer token"}
	}
	if r.URL.Query().Has("access_token") {
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "tokens in the query are not accepted"}
	}
	id, err := rs.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if missing := id.missingScopes(rs.cfg.Scopes); len(missing) > 0 {
		return id, &Error{Status: http.StatusForbidden, Code: "insufficient_scope",
			Description: "the token lacks the scope " + strings.Join(missing, ", ")}
	}
	return id, nil
}

// Verify checks a bearer token: a JWT by its issuer's keys and claims,
// an opaque token by introspection.
func (rs *ResourceServer) Verify(ctx context.Context, token string) (*Identity, *Error) {
	if len(token) > maxTokenBytes {
		return nil, invalidToken("the token is longer than %d bytes", maxTokenBytes)
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	if id, ok := rs.tokens.Get(key); ok && now.Before(id.validUntil) {
		return id, nil
	}
	var id *Identity
	var err *Error
	if strings.Count(token, ".") == 2 {
		id, err = rs.verifyJWT(ctx, token, now)
	} else if rs.introspec != nil {
		id, err = rs.introspect(ctx, rs.introspec, token, now)
	} else {
		err = invalidToken("not a JWT access token (opaque tokens need introspection)")
	}
	if err != nil {
		return nil, err
	}
	id.token = token
	rs.tokens.Put(key, id)
	return id, nil
}

// accepts reports whether aud names the resource.
func (rs *ResourceServer) accepts(aud []string) bool {
	for _, a := range aud {
		if slices.Contains(rs.audiences, a) {
			return true
		}
	}
	return false
}
