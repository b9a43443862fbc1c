package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// Upstream credentials: the tokens the host obtains for an upstream on a
// caller's behalf, so that the caller's own token never leaves the
// gateway.
//
//   - token_exchange (RFC 8693): the caller's verified access token is
//     exchanged at the authorization server for a token for the
//     upstream's audience; the upstream sees the caller (sub) and the
//     gateway (act), never the caller's token. Cached per caller token
//     and upstream until it expires.
//   - client_credentials (RFC 6749 §4.4): the gateway's own token for the
//     upstream, the same whoever calls (the upstream sees the gateway);
//     cached per upstream until it expires.
//   - authorization_code (RFC 6749 §4.1 with PKCE, RFC 7636): each user
//     consents once at the upstream's own provider, in a browser, and
//     every call carries that user's token (authcode.go; the host keeps
//     the tokens, host/upstream_grant.go).

// Grants of upstream credentials.
const (
	GrantTokenExchange     = "token_exchange"
	GrantClientCredentials = "client_credentials"
	GrantAuthorizationCode = "authorization_code"
)

// UpstreamConfig is how the host obtains an upstream's token (an
// operation's upstream_auth; its tags describe its fields in the entry's
// schema).
type UpstreamConfig struct {
	Grant string `json:"grant" enum:"token_exchange,client_credentials,authorization_code" jsonschema:"token_exchange (RFC 8693: the caller's token exchanged for one of the upstream's), client_credentials (a token of the gateway's own) or authorization_code (each user consents once at the upstream's provider, and calls carry that user's token)."`
	// Name names an authorization_code upstream: each user's grant is
	// kept under it, and entries of the same name share it.
	Name                  string   `json:"name,omitempty" jsonschema:"authorization_code: the upstream's name, under which each user's consent and tokens are kept; entries with the same name share them and must configure upstream_auth alike. Default the entry's name."`
	MetadataURL           string   `json:"metadata_url,omitempty" jsonschema:"authorization_code: the provider's RFC 8414 (or OpenID) metadata document, which names the endpoints not written here: https, or http on loopback."`
	AuthorizationEndpoint string   `json:"authorization_endpoint,omitempty" jsonschema:"authorization_code: where the user's browser consents (with PKCE S256, always); default the metadata's."`
	TokenEndpoint         string   `json:"token_endpoint,omitempty" jsonschema:"The authorization server's token endpoint: https, or http on loopback. Required, except for authorization_code with metadata_url."`
	RevocationEndpoint    string   `json:"revocation_endpoint,omitempty" jsonschema:"authorization_code: where a revoked grant's tokens are revoked (RFC 7009); default the metadata's, else none."`
	ClientID              string   `json:"client_id" jsonschema:"The gateway's client there (HTTP Basic, RFC 6749 section 2.3.1), with client_secret."`
	ClientSecret          string   `json:"client_secret,omitempty" jsonschema:"The client's secret, from a placeholder."`
	Audience              string   `json:"audience,omitempty" jsonschema:"The upstream the token is for (RFC 8693 audience); this or resource is required, except for authorization_code."`
	Resource              string   `json:"resource,omitempty" jsonschema:"The upstream the token is for (RFC 8707 resource, an absolute URI)."`
	Scopes                []string `json:"scopes,omitempty" jsonschema:"Scopes requested for the token."`
	RedirectURI           string   `json:"redirect_uri,omitempty" jsonschema:"authorization_code: the redirect URI registered at the provider, served by the crank handler of the endpoint (a path ending in /oauth/callback); default the endpoint's auth resource followed by /oauth/callback."`
	TokenKey              string   `json:"token_key,omitempty" jsonschema:"authorization_code: the key the users' tokens are encrypted with in etcd, 32 bytes in base64, from a placeholder."`
	PreviousTokenKeys     []string `json:"previous_token_keys,omitempty" jsonschema:"authorization_code: keys tokens were encrypted with before token_key, still read (and encrypted again with token_key when next written) during a key rotation."`
	BrowserUser           string   `json:"browser_user,omitempty" enum:"required,unchecked" default:"required" jsonschema:"authorization_code: who may complete a consent in the browser: required (the callback's request must carry the same user as the MCP caller, from an authentication handler before crank on its route) or unchecked (anyone holding the link while it is valid: one-user setups only)."`
}

// Check reports the first problem of the config, naming its field.
func (c *UpstreamConfig) Check() error {
	switch c.Grant {
	case GrantTokenExchange, GrantClientCredentials:
	case GrantAuthorizationCode:
		return c.checkAuthorizationCode()
	case "":
		return errors.New("grant: required (token_exchange, client_credentials or authorization_code)")
	default:
		return fmt.Errorf("grant: %q is not one of token_exchange, client_credentials, authorization_code", c.Grant)
	}
	for _, f := range c.authorizationCodeOnly() {
		if f.set {
			return fmt.Errorf("%s: only for grant authorization_code", f.name)
		}
	}
	if c.TokenEndpoint == "" {
		return errors.New("token_endpoint: required")
	}
	if err := checkURL(c.TokenEndpoint); err != nil {
		return fmt.Errorf("token_endpoint: %w", err)
	}
	if c.ClientID == "" {
		return errors.New("client_id: required")
	}
	if c.Audience == "" && c.Resource == "" {
		return errors.New("audience: required (or resource): the upstream the token is for")
	}
	if c.Resource != "" {
		if u, err := url.Parse(c.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
			return fmt.Errorf("resource: %q must be an absolute URI without a fragment (RFC 8707)", c.Resource)
		}
	}
	return c.checkScopes()
}

func (c *UpstreamConfig) checkScopes() error {
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			return fmt.Errorf("scopes: %q is not a scope", s)
		}
	}
	return nil
}

// Upstream obtains and caches an upstream's tokens. It is safe for
// concurrent use; building it does no I/O.
type Upstream struct {
	cfg    UpstreamConfig
	client *http.Client

	// mu makes a token's lookup and its replacement by a request one
	// step; tokens are by the subject's digest, at most upstreamCacheSize
	// (the least recently used go first).
	mu     sync.Mutex
	tokens *lru.Cache[[32]byte, *upstreamToken]
	// meta is the provider's metadata (authorization_code, authcode.go).
	meta providerMeta
}

type upstreamToken struct {
	ready chan struct{} // closed once value/err are set
	value string
	err   error
	until time.Time
}

// Upstream token limits.
const (
	// upstreamMargin: a cached token is renewed this long before it
	// expires, so it does not expire on its way to the upstream.
	upstreamMargin = 30 * time.Second
	// upstreamDefaultTTL is the life of a token whose answer says none.
	upstreamDefaultTTL = 5 * time.Minute
	// upstreamCacheSize bounds the tokens kept.
	upstreamCacheSize = 4096
)

// NewUpstream checks the config and returns its token source; client nil
// is a client with a 10s timeout.
func NewUpstream(cfg UpstreamConfig, client *http.Client) (*Upstream, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if client == nil {
		client = NewClient(nil)
	}
	return &Upstream{cfg: cfg, client: client, tokens: lru.New[[32]byte, *upstreamToken](upstreamCacheSize, nil)}, nil
}

// NewClient is the HTTP client of authorization servers (metadata, key
// sets, introspection, token endpoints): a 10s timeout, redirects
// followed within the first request's origin only (a 307 or 308 of a
// token or introspection POST repeats its form, the client secret and
// the token in it: never to another host), and every connection held to
// rs where it is dialled (a catalog entry's token endpoint; nil: none).
func NewClient(rs *egress.Rules) *http.Client {
	c := httpadapter.NewClient(httpadapter.ClientOptions{Egress: rs})
	c.Timeout = 10 * time.Second
	return c
}

// Grant is the upstream's grant.
func (u *Upstream) Grant() string { return u.cfg.Grant }

// ErrNoSubjectToken: a token exchange needs the caller's access token,
// and the request carried none.
var ErrNoSubjectToken = errors.New("the caller presented no access token to exchange (token_exchange needs the endpoint's auth block)")

// Token returns the upstream token for a caller whose verified access
// token is subject ("" for none): a cached one while it is valid, else a
// new one from the token endpoint. Concurrent requests for the same token
// share one request.
func (u *Upstream) Token(ctx context.Context, subject string) (string, error) {
	if u.cfg.Grant == GrantAuthorizationCode {
		return "", errors.New("authorization_code tokens are the users' own: the host keeps them")
	}
	var key [32]byte
	if u.cfg.Grant == GrantTokenExchange {
		if subject == "" {
			return "", ErrNoSubjectToken
		}
		key = sha256.Sum256([]byte(subject))
	}
	now := time.Now()
	u.mu.Lock()
	t, _ := u.tokens.Get(key)
	if t != nil {
		select {
		case <-t.ready:
			if t.err != nil || !now.Before(t.until) {
				t = nil
			}
		default: // in flight: share it
		}
	}
	mine := t == nil
	if mine {
		t = &upstreamToken{ready: make(chan struct{})}
		u.tokens.Put(key, t)
	}
	u.mu.Unlock()
	if mine {
		t.value, t.until, t.err = u.request(ctx, subject, now)
		close(t.ready)
		return t.value, t.err
	}
	select {
	case <-t.ready:
		// A failed request is not cached: the next call asks again.
		return t.value, t.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// tokenAnswer is a token endpoint's answer (RFC 6749 §5.1, §5.2; RFC 8693
// §2.2).
type tokenAnswer struct {
	AccessToken      string      `json:"access_token"`
	TokenType        string      `json:"token_type"`
	IssuedTokenType  string      `json:"issued_token_type"`
	ExpiresIn        json.Number `json:"expires_in"`
	RefreshToken     string      `json:"refresh_token"`
	Scope            string      `json:"scope"`
	Error            string      `json:"error"`
	ErrorDescription string      `json:"error_description"`
}

// ttl is the life the answer gives its access token, else the default.
func (a *tokenAnswer) ttl() time.Duration {
	if n, err := a.ExpiresIn.Int64(); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return upstreamDefaultTTL
}

// renewAt is when a token of life ttl obtained at now is renewed: a
// margin before it expires, or half-way through a short life.
func renewAt(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 2*upstreamMargin {
		return now.Add(ttl / 2)
	}
	return now.Add(ttl - upstreamMargin)
}

// request asks the token endpoint for a token.
func (u *Upstream) request(ctx context.Context, subject string, now time.Time) (string, time.Time, error) {
	form := url.Values{}
	switch u.cfg.Grant {
	case GrantTokenExchange:
		form.Set("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
		form.Set("subject_token", subject)
		form.Set("subject_token_type", "urn:ietf:params:oauth:token-type:access_token")
		form.Set("requested_token_type", "urn:ietf:params:oauth:token-type:access_token")
	default:
		form.Set("grant_type", "client_credentials")
	}
	u.target(form)
	if len(u.cfg.Scopes) > 0 {
		form.Set("scope", strings.Join(u.cfg.Scopes, " "))
	}
	a, err := u.postToken(ctx, u.cfg.TokenEndpoint, u.cfg.Grant, form)
	if err != nil {
		return "", time.Time{}, err
	}
	return a.AccessToken, renewAt(now, a.ttl()), nil
}

// target sets the audience and resource the token is for.
func (u *Upstream) target(form url.Values) {
	if u.cfg.Audience != "" {
		form.Set("audience", u.cfg.Audience)
	}
	if u.cfg.Resource != "" {
		form.Set("resource", u.cfg.Resource)
	}
}

// postToken posts form to the token endpoint with the client's
// credentials and reads its answer: a bearer access token, or an error
// saying what refused what (grant names the request).
func (u *Upstream) postToken(ctx context.Context, endpoint, grant string, form url.Values) (*tokenAnswer, error) {
	body, status, err := u.post(ctx, endpoint, form)
	if err != nil {
		return nil, fmt.Errorf("token endpoint %s unreachable: %v", endpoint, err)
	}
	var a tokenAnswer
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	derr := dec.Decode(&a)
	if status != http.StatusOK || a.Error != "" {
		msg := fmt.Sprintf("token endpoint %s refused the %s request: %d %s", endpoint, grant, status, http.StatusText(status))
		if a.Error != "" {
			msg += ": " + Printable(a.Error)
			if a.ErrorDescription != "" {
				msg += " (" + Printable(a.ErrorDescription) + ")"
			}
		}
		return nil, &RefusedError{Code: a.Error, msg: msg}
	}
	if derr != nil || a.AccessToken == "" {
		return nil, fmt.Errorf("token endpoint %s: the answer has no access_token", endpoint)
	}
	if a.TokenType != "" && !strings.EqualFold(a.TokenType, "Bearer") && !strings.EqualFold(a.TokenType, "N_A") {
		return nil, fmt.Errorf("token endpoint %s: token_type %q is not Bearer", endpoint, Printable(a.TokenType))
	}
	return &a, nil
}

// post sends form to endpoint with the client's credentials (HTTP Basic,
// RFC 6749 §2.3.1; a client without a secret names itself in the form)
// and returns the answer's body, bounded, and status.
func (u *Upstream) post(ctx context.Context, endpoint string, form url.Values) ([]byte, int, error) {
	if u.cfg.ClientSecret == "" {
		form.Set("client_id", u.cfg.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if u.cfg.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(u.cfg.ClientID), url.QueryEscape(u.cfg.ClientSecret))
	}
	resp, err := u.client.Do(req)
	if err != nil {
		if uerr := errors.Unwrap(err); uerr != nil {
			err = uerr
		}
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	return body, resp.StatusCode, nil
}

// RefusedError is a token endpoint's refusal; Code is its OAuth error
// code ("invalid_grant": a refresh token revoked or expired), "" when it
// said none.
type RefusedError struct {
	Code string
	msg  string
}

func (e *RefusedError) Error() string { return e.msg }

// Printable keeps what an authorization server says short and printable.
func Printable(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
