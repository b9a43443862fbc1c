// Package oauthtest is a test authorization server: an OpenID provider
// on loopback that serves discovery (OpenID Connect and RFC 8414
// metadata), a JWKS with rotatable keys, signed JWT access tokens, token
// introspection (RFC 7662), and a token endpoint for client credentials
// and token exchange (RFC 8693). It is for tests only.
package oauthtest

import (
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// Client is the confidential client the token endpoint and the
// introspection endpoint accept.
const (
	ClientID     = "crank-gateway"
	ClientSecret = "s3cret-client-password"
)

// Issuer is a running test authorization server.
type Issuer struct {
	*httptest.Server
	t testing.TB

	mu        sync.Mutex
	keys      []jwk.Key // published, signing with the last
	unpub     jwk.Key   // signs, not published (until Publish)
	down      bool
	opaque    map[string]map[string]any
	exchanges []record
	fetches   int
	// defaultAud is the audience of a token request that names none.
	defaultAud string
	// tokenLife is the life of the tokens the token endpoint issues.
	tokenLife time.Duration
}

type record = map[string]string

// New starts an issuer on loopback, closed when the test ends.
func New(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{t: t, opaque: map[string]map[string]any{}}
	is.keys = []jwk.Key{is.newKey("k1")}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", is.serveMetadata)
	mux.HandleFunc("/.well-known/oauth-authorization-server", is.serveMetadata)
	mux.HandleFunc("/jwks", is.serveJWKS)
	mux.HandleFunc("/token", is.serveToken)
	mux.HandleFunc("/introspect", is.serveIntrospect)
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "interactive login is not part of the test issuer", http.StatusNotImplemented)
	})
	is.Server = httptest.NewServer(is.guard(mux))
	t.Cleanup(is.Close)
	return is
}

// SetDefaultAudience sets the audience of the tokens issued for requests
// that name none (as an authorization server's per-client default).
func (is *Issuer) SetDefaultAudience(aud string) {
	is.mu.Lock()
	is.defaultAud = aud
	is.mu.Unlock()
}

// SetTokenLife sets the life of the tokens the token endpoint issues
// (default 2 minutes).
func (is *Issuer) SetTokenLife(d time.Duration) {
	is.mu.Lock()
	is.tokenLife = d
	is.mu.Unlock()
}

// Issuer is the issuer identifier (its URL).
func (is *Issuer) Issuer() string { return is.URL }

func (is *Issuer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		down := is.down
		if r.URL.Path == "/jwks" {
			is.fetches++
		}
		is.mu.Unlock()
		if down {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetDown makes every endpoint answer 503 (true) or serve again.
func (is *Issuer) SetDown(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

// KeyFetches counts the JWKS requests so far.
func (is *Issuer) KeyFetches() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.fetches
}

func (is *Issuer) newKey(kid string) jwk.Key {
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		is.t.Fatal(err)
	}
	k, err := jwk.Import(raw)
	if err != nil {
		is.t.Fatal(err)
	}
	_ = k.Set(jwk.KeyIDKey, kid)
	_ = k.Set(jwk.AlgorithmKey, jwa.RS256())
	return k
}

// RotateUnpublished makes a new signing key with kid that the JWKS does
// not list yet: tokens signed after it name an unknown kid.
func (is *Issuer) RotateUnpublished(kid string) {
	k := is.newKey(kid)
	is.mu.Lock()
	is.unpub = k
	is.mu.Unlock()
}

// Publish adds the unpublished key to the JWKS (and signs with it).
func (is *Issuer) Publish() {
	is.mu.Lock()
	if is.unpub != nil {
		is.keys = append(is.keys, is.unpub)
		is.unpub = nil
	}
	is.mu.Unlock()
}

func (is *Issuer) signingKey() jwk.Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.unpub != nil {
		return is.unpub
	}
	return is.keys[len(is.keys)-1]
}

func (is *Issuer) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                is.URL,
		"authorization_endpoint":                is.URL + "/authorize",
		"token_endpoint":                        is.URL + "/token",
		"jwks_uri":                              is.URL + "/jwks",
		"introspection_endpoint":                is.URL + "/introspect",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"},
		"code_challenge_methods_supported":      []string{"S256"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
	})
}

func (is *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	set := jwk.NewSet()
	is.mu.Lock()
	for _, k := range is.keys {
		pub, err := k.PublicKey()
		if err != nil {
			is.mu.Unlock()
			http.Error(w, err.Error(), 500)
			return
		}
		_ = set.AddKey(pub)
	}
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, set)
}

// Claims are a token's claims; Token fills in what it lacks.
type Claims map[string]any

// Token signs an access token for audience with claims: iss, sub
// ("alice" unless given), aud, iat and exp (in 5 minutes) are added
// unless claims set them (a nil value removes one).
func (is *Issuer) Token(audience string, claims Claims) string {
	return is.sign(is.signingKey(), audience, claims)
}

// TokenSignedByStranger signs like Token with a key of the same kid that
// the issuer never published: its signature does not verify.
func (is *Issuer) TokenSignedByStranger(audience string, claims Claims) string {
	kid, _ := is.signingKey().KeyID()
	return is.sign(is.newKey(kid), audience, claims)
}

func (is *Issuer) sign(key jwk.Key, audience string, claims Claims) string {
	now := time.Now()
	all := Claims{"iss": is.URL, "sub": "alice", "aud": audience, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(all, k)
		} else {
			all[k] = v
		}
	}
	tok := jwt.New()
	for k, v := range all {
		if err := tok.Set(k, v); err != nil {
			is.t.Fatalf("claim %s: %v", k, err)
		}
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), key))
	if err != nil {
		is.t.Fatal(err)
	}
	return string(signed)
}

// OpaqueToken returns a random token that introspection describes with
// claims (active, iss, aud and exp added as Token adds them).
func (is *Issuer) OpaqueToken(audience string, claims Claims) string {
	tok := "opaque-" + rand.Text()
	all := map[string]any{"active": true, "iss": is.URL, "sub": "alice", "aud": audience, "exp": time.Now().Add(5 * time.Minute).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(all, k)
		} else {
			all[k] = v
		}
	}
	is.mu.Lock()
	is.opaque[tok] = all
	is.mu.Unlock()
	return tok
}

func (is *Issuer) clientOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return id == ClientID && secret == ClientSecret
}

func (is *Issuer) serveIntrospect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil || !is.clientOK(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	is.mu.Lock()
	claims, ok := is.opaque[r.PostForm.Get("token")]
	is.mu.Unlock()
	if !ok {
		claims = map[string]any{"active": false}
	}
	writeJSON(w, http.StatusOK, claims)
}

// Exchange is a token request the token endpoint served.
type Exchange struct {
	GrantType, SubjectToken, Audience, Resource, Scope string
	// Issued is the access token it answered.
	Issued string
}

// Exchanges returns the token requests served so far.
func (is *Issuer) Exchanges() []Exchange {
	is.mu.Lock()
	defer is.mu.Unlock()
	out := make([]Exchange, len(is.exchanges))
	for i, e := range is.exchanges {
		out[i] = Exchange{GrantType: e["grant_type"], SubjectToken: e["subject_token"], Audience: e["audience"],
			Resource: e["resource"], Scope: e["scope"], Issued: e["issued"]}
	}
	return out
}

// serveToken serves client_credentials and token exchange (RFC 8693) for
// the test client. An exchanged token keeps the subject token's sub and
// names the client as its actor (act); both are for the requested
// audience (or resource) and scope, and live 2 minutes (SetTokenLife).
func (is *Issuer) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
		return
	}
	if !is.clientOK(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client"})
		return
	}
	f := r.PostForm
	aud := cmp.Or(f.Get("audience"), f.Get("resource"))
	if aud == "" {
		is.mu.Lock()
		aud = is.defaultAud
		is.mu.Unlock()
	}
	is.mu.Lock()
	life := cmp.Or(is.tokenLife, 2*time.Minute)
	is.mu.Unlock()
	claims := Claims{"exp": time.Now().Add(life).Unix(), "client_id": ClientID}
	if sc := f.Get("scope"); sc != "" {
		claims["scope"] = sc
	}
	answer := map[string]any{"token_type": "Bearer", "expires_in": int(life.Seconds())}
	switch f.Get("grant_type") {
	case "client_credentials":
		claims["sub"] = ClientID
	case "urn:ietf:params:oauth:grant-type:token-exchange":
		if f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:access_token" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request", "error_description": "subject_token_type"})
			return
		}
		sub, err := is.subjectOf(f.Get("subject_token"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant", "error_description": err.Error()})
			return
		}
		claims["sub"] = sub
		claims["act"] = map[string]any{"sub": ClientID}
		answer["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	tok := is.Token(aud, claims)
	answer["access_token"] = tok
	is.mu.Lock()
	is.exchanges = append(is.exchanges, record{"grant_type": f.Get("grant_type"), "subject_token": f.Get("subject_token"),
		"audience": f.Get("audience"), "resource": f.Get("resource"), "scope": f.Get("scope"), "issued": tok})
	is.mu.Unlock()
	writeJSON(w, http.StatusOK, answer)
}

// subjectOf verifies a subject token the issuer signed and returns its
// sub.
func (is *Issuer) subjectOf(token string) (string, error) {
	set := jwk.NewSet()
	is.mu.Lock()
	for _, k := range is.keys {
		pub, _ := k.PublicKey()
		_ = set.AddKey(pub)
	}
	is.mu.Unlock()
	tok, err := jwt.Parse([]byte(token), jwt.WithKeySet(set), jwt.WithValidate(true))
	if err != nil {
		return "", fmt.Errorf("subject_token: %v", err)
	}
	sub, _ := tok.Subject()
	return sub, nil
}

// Scopes makes a scope claim value.
func Scopes(s ...string) string { return strings.Join(slices.Clone(s), " ") }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Decode returns a JWT's claims, unverified (the test issuer signed it).
func Decode(t testing.TB, token string) map[string]any {
	t.Helper()
	tok, err := jwt.ParseInsecure([]byte(token))
	if err != nil {
		t.Fatalf("not a JWT: %v", err)
	}
	out := map[string]any{}
	for _, k := range tok.Keys() {
		var v any
		if err := tok.Get(k, &v); err != nil {
			t.Fatalf("claim %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}
