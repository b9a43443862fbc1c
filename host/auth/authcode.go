package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The authorization code grant of an upstream (grant authorization_code):
// what the gateway does as the OAuth client of a third-party provider on
// its users' behalf. This file speaks to the provider: the authorization
// URL a user's browser is sent to (PKCE S256 always, RFC 7636; the state
// the host seals), the code's exchange and the refresh at its token
// endpoint, the revocation (RFC 7009) where it offers one, and the
// provider's metadata (RFC 8414, or OpenID discovery's document) when the
// config names it instead of the endpoints. Where the tokens are kept,
// when they are refreshed and who may consent is the host's
// (host/upstream_grant.go).

// CallbackSuffix ends the path of the redirect URI the gateway serves.
const CallbackSuffix = "/oauth/callback"

// Browser-user checks of a consent's callback (UpstreamConfig.BrowserUser).
const (
	BrowserUserRequired  = "required"
	BrowserUserUnchecked = "unchecked"
)

// upstreamNameRE is what an upstream's name may be: it names its users'
// grants in etcd keys, the console and the revocation tool.
var upstreamNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// authorizationCodeOnly are the fields only authorization_code takes.
func (c *UpstreamConfig) authorizationCodeOnly() []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"name", c.Name != ""}, {"metadata_url", c.MetadataURL != ""},
		{"authorization_endpoint", c.AuthorizationEndpoint != ""}, {"revocation_endpoint", c.RevocationEndpoint != ""},
		{"redirect_uri", c.RedirectURI != ""}, {"token_key", c.TokenKey != ""},
		{"previous_token_keys", len(c.PreviousTokenKeys) > 0},
		{"browser_user", c.BrowserUser != "" && c.BrowserUser != BrowserUserRequired},
	}
}

// checkAuthorizationCode checks an authorization_code config.
func (c *UpstreamConfig) checkAuthorizationCode() error {
	if c.Name != "" && !upstreamNameRE.MatchString(c.Name) {
		return fmt.Errorf("name: %q must be 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit", c.Name)
	}
	if c.MetadataURL == "" && (c.AuthorizationEndpoint == "" || c.TokenEndpoint == "") {
		return errors.New("metadata_url: required, or both authorization_endpoint and token_endpoint")
	}
	for _, f := range []struct{ name, v string }{{"metadata_url", c.MetadataURL}, {"authorization_endpoint", c.AuthorizationEndpoint},
		{"token_endpoint", c.TokenEndpoint}, {"revocation_endpoint", c.RevocationEndpoint}} {
		if f.v == "" {
			continue
		}
		if err := checkURL(f.v); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if c.ClientID == "" {
		return errors.New("client_id: required")
	}
	if c.RedirectURI != "" {
		if err := checkURL(c.RedirectURI); err != nil {
			return fmt.Errorf("redirect_uri: %w", err)
		}
		if u, _ := url.Parse(c.RedirectURI); u.RawQuery != "" || !strings.HasSuffix(u.Path, CallbackSuffix) {
			return fmt.Errorf("redirect_uri: %q must end in %s, without a query: the crank handler serves it there", c.RedirectURI, CallbackSuffix)
		}
	}
	if c.Resource != "" {
		if u, err := url.Parse(c.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
			return fmt.Errorf("resource: %q must be an absolute URI without a fragment (RFC 8707)", c.Resource)
		}
	}
	switch c.BrowserUser {
	case "", BrowserUserRequired, BrowserUserUnchecked:
	default:
		return fmt.Errorf("browser_user: %q is not one of required, unchecked", c.BrowserUser)
	}
	if c.TokenKey == "" {
		return errors.New("token_key: required: the key the users' tokens are encrypted with in etcd (32 bytes in base64, from a placeholder such as {env.CRANK_TOKEN_KEY})")
	}
	if _, err := NewTokenKeys(c.TokenKey, c.PreviousTokenKeys); err != nil {
		return err
	}
	return c.checkScopes()
}

// UpstreamName is the name an authorization_code upstream's grants are
// kept under.
func (c *UpstreamConfig) UpstreamName() string { return c.Name }

// ChecksBrowserUser reports whether a consent's callback must carry the
// MCP caller as its authenticated user.
func (c *UpstreamConfig) ChecksBrowserUser() bool { return c.BrowserUser != BrowserUserUnchecked }

// Tokens are a user's tokens at an upstream's provider.
type Tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token,omitempty"`
	// Scope is what the provider granted ("" when it did not say: what
	// was asked).
	Scope string `json:"scope,omitempty"`
	// Expires is when the access token expires; Renew when the host
	// refreshes it (before it expires).
	Expires time.Time `json:"expires"`
	Renew   time.Time `json:"renew"`
}

// providerEndpoints are the provider's endpoints, as configured or as its
// metadata names them.
type providerEndpoints struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	Revocation    string `json:"revocation_endpoint"`
	Issuer        string `json:"issuer"`
}

// providerMeta caches a provider's metadata per Upstream.
type providerMeta struct {
	mu      sync.Mutex
	ends    *providerEndpoints
	fetched time.Time
}

// metadataRetry: a failed metadata read is tried again after this long.
const metadataRetry = 10 * time.Second

// endpoints are the provider's endpoints: those configured, the rest from
// its metadata (read once, again after a failure).
func (u *Upstream) endpoints(ctx context.Context) (*providerEndpoints, error) {
	c := &u.cfg
	e := &providerEndpoints{Authorization: c.AuthorizationEndpoint, Token: c.TokenEndpoint, Revocation: c.RevocationEndpoint}
	if c.MetadataURL == "" {
		return e, nil
	}
	m := &u.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ends == nil {
		if !m.fetched.IsZero() && time.Since(m.fetched) < metadataRetry {
			return nil, fmt.Errorf("metadata %s: unavailable (tried %s ago)", c.MetadataURL, time.Since(m.fetched).Round(time.Second))
		}
		m.fetched = time.Now()
		got, err := u.readMetadata(ctx)
		if err != nil {
			return nil, err
		}
		m.ends = got
	}
	if e.Authorization == "" {
		e.Authorization = m.ends.Authorization
	}
	if e.Token == "" {
		e.Token = m.ends.Token
	}
	if e.Revocation == "" {
		e.Revocation = m.ends.Revocation
	}
	if e.Authorization == "" || e.Token == "" {
		return nil, fmt.Errorf("metadata %s names no authorization_endpoint or token_endpoint", c.MetadataURL)
	}
	return e, nil
}

// readMetadata reads the metadata document; the endpoints it names follow
// the rule configured ones do (https, http on loopback only).
func (u *Upstream) readMetadata(ctx context.Context) (*providerEndpoints, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.cfg.MetadataURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := u.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metadata %s unreachable: %v", u.cfg.MetadataURL, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metadata %s: status %s", u.cfg.MetadataURL, resp.Status)
	}
	var e providerEndpoints
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxMetadataBytes)).Decode(&e); err != nil {
		return nil, fmt.Errorf("metadata %s: not metadata: %v", u.cfg.MetadataURL, err)
	}
	for _, f := range []struct{ name, v string }{{"authorization_endpoint", e.Authorization}, {"token_endpoint", e.Token},
		{"revocation_endpoint", e.Revocation}} {
		if f.v == "" {
			continue
		}
		if err := checkURL(f.v); err != nil {
			return nil, fmt.Errorf("metadata %s: %s %w", u.cfg.MetadataURL, f.name, err)
		}
	}
	return &e, nil
}

// NewPKCE returns a PKCE code verifier (256 random bits) and its S256
// challenge (RFC 7636 §4.1, §4.2).
func NewPKCE() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// AuthorizationURL is where a user's browser consents: the provider's
// authorization endpoint with the client, the redirect URI, the scopes,
// the state, the PKCE challenge and the resource or audience.
func (u *Upstream) AuthorizationURL(ctx context.Context, state, challenge, redirect string) (string, error) {
	e, err := u.endpoints(ctx)
	if err != nil {
		return "", err
	}
	a, err := url.Parse(e.Authorization)
	if err != nil {
		return "", fmt.Errorf("authorization_endpoint: %v", err)
	}
	q := a.Query()
	q.Set("response_type", "code")
	q.Set("client_id", u.cfg.ClientID)
	q.Set("redirect_uri", redirect)
	if len(u.cfg.Scopes) > 0 {
		q.Set("scope", strings.Join(u.cfg.Scopes, " "))
	}
	q.Set("state", state)
	q.Set("code_challenge", challenge)
	q.Set("code_challenge_method", "S256")
	u.target(q)
	a.RawQuery = q.Encode()
	return a.String(), nil
}

// Exchange trades an authorization code for the user's tokens.
func (u *Upstream) Exchange(ctx context.Context, code, verifier, redirect string) (*Tokens, error) {
	e, err := u.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	u.target(form)
	now := time.Now()
	a, err := u.postToken(ctx, e.Token, "authorization_code", form)
	if err != nil {
		return nil, err
	}
	return u.userTokens(a, "", now), nil
}

// Refresh obtains fresh tokens with a refresh token; a provider that
// rotates refresh tokens sends a new one, else the old one stays.
func (u *Upstream) Refresh(ctx context.Context, refresh string) (*Tokens, error) {
	e, err := u.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}
	u.target(form)
	now := time.Now()
	a, err := u.postToken(ctx, e.Token, "refresh_token", form)
	if err != nil {
		return nil, err
	}
	return u.userTokens(a, refresh, now), nil
}

// userTokens are the Tokens of an answer obtained at now; refresh is kept
// when the answer has none.
func (u *Upstream) userTokens(a *tokenAnswer, refresh string, now time.Time) *Tokens {
	t := &Tokens{Access: a.AccessToken, Refresh: a.RefreshToken, Scope: a.Scope}
	if t.Refresh == "" {
		t.Refresh = refresh
	}
	if t.Scope == "" {
		t.Scope = strings.Join(u.cfg.Scopes, " ")
	}
	ttl := a.ttl()
	t.Expires, t.Renew = now.Add(ttl), renewAt(now, ttl)
	return t
}

// ErrNoRevocation: the provider offers no revocation endpoint.
var ErrNoRevocation = errors.New("the provider offers no token revocation (RFC 7009)")

// Revoke revokes a token at the provider (RFC 7009; hint is
// "refresh_token" or "access_token"), or returns ErrNoRevocation.
func (u *Upstream) Revoke(ctx context.Context, token, hint string) error {
	e, err := u.endpoints(ctx)
	if err != nil {
		return err
	}
	if e.Revocation == "" {
		return ErrNoRevocation
	}
	body, status, err := u.post(ctx, e.Revocation, url.Values{"token": {token}, "token_type_hint": {hint}})
	if err != nil {
		return fmt.Errorf("revocation endpoint %s unreachable: %v", e.Revocation, err)
	}
	if status != http.StatusOK {
		var a tokenAnswer
		_ = json.Unmarshal(body, &a)
		msg := fmt.Sprintf("revocation endpoint %s refused: %d %s", e.Revocation, status, http.StatusText(status))
		if a.Error != "" {
			msg += ": " + Printable(a.Error)
		}
		return errors.New(msg)
	}
	return nil
}
