package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"go.uber.org/zap"
)

// maxMetadataBytes bounds what is read of an authorization server's
// metadata, key set or introspection answer.
const maxMetadataBytes = 1 << 20

// issuer is one authorization server: its metadata and keys, fetched on
// first use, refreshed when a token names a key it does not have (at most
// every MinKeyRefresh) and in the background once they are maxKeyAge old.
type issuer struct {
	cfg IssuerConfig
	rs  *ResourceServer

	mu sync.Mutex
	// fetching is closed when the fetch in flight ends.
	fetching chan struct{}
	keys     jwk.Set
	meta     *serverMetadata
	// fetched is when keys were last fetched (successfully or not);
	// failed the error of the last fetch, nil after a success.
	fetched time.Time
	failed  error
}

// serverMetadata is what is read of an authorization server's metadata
// (OpenID Connect discovery or RFC 8414).
type serverMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	IntrospectionEndpoint string `json:"introspection_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

// keySet returns the issuer's keys, fetching them when it has none or,
// with refresh, when they were fetched MinKeyRefresh ago or more.
func (is *issuer) keySet(ctx context.Context, refresh bool) (jwk.Set, *Error) {
	for {
		is.mu.Lock()
		now := time.Now()
		age := now.Sub(is.fetched)
		switch {
		case is.fetching != nil:
			ch := is.fetching
			is.mu.Unlock()
			select {
			case <-ch:
				refresh = false // take what that fetch got
				continue
			case <-ctx.Done():
				return nil, unavailable("authorization server %s: %v", is.cfg.Issuer, ctx.Err())
			}
		case is.keys != nil && (!refresh || age < is.rs.cfg.MinKeyRefresh):
			keys := is.keys
			if age > maxKeyAge {
				is.startFetch() // in the background; these keys serve meanwhile
			}
			is.mu.Unlock()
			return keys, nil
		case is.failed != nil && age < is.rs.cfg.MinKeyRefresh && is.keys == nil:
			err := is.failed
			is.mu.Unlock()
			return nil, unavailable("authorization server %s unavailable (retried within %s): %v", is.cfg.Issuer, is.rs.cfg.MinKeyRefresh, err)
		}
		ch := is.startFetch()
		is.mu.Unlock()
		select {
		case <-ch:
			refresh = false
		case <-ctx.Done():
			return nil, unavailable("authorization server %s: %v", is.cfg.Issuer, ctx.Err())
		}
		is.mu.Lock()
		keys, err := is.keys, is.failed
		is.mu.Unlock()
		if keys == nil {
			return nil, unavailable("authorization server %s unavailable: %v", is.cfg.Issuer, err)
		}
		return keys, nil
	}
}

// startFetch starts fetching the metadata and keys; is.mu is held.
func (is *issuer) startFetch() chan struct{} {
	if is.fetching != nil {
		return is.fetching
	}
	ch := make(chan struct{})
	is.fetching = ch
	go func() {
		// Not the request's context: other requests wait for this fetch.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		meta, keys, err := is.fetch(ctx)
		is.mu.Lock()
		is.fetched, is.failed = time.Now(), err
		if err == nil {
			is.keys = keys
			if meta != nil {
				is.meta = meta
			}
		}
		is.fetching = nil
		is.mu.Unlock()
		close(ch)
		if err != nil {
			is.rs.log.Warn("authorization server metadata or keys could not be fetched; tokens it issued are refused with 503 until a retry succeeds",
				zap.String("issuer", is.cfg.Issuer), zap.Duration("retry_after", is.rs.cfg.MinKeyRefresh), zap.Error(err))
		} else {
			is.rs.log.Debug("authorization server keys fetched", zap.String("issuer", is.cfg.Issuer), zap.Int("keys", keys.Len()))
		}
	}()
	return ch
}

// fetch reads the issuer's metadata (unless a JWKS URI is configured and
// no introspection endpoint is needed) and its key set.
func (is *issuer) fetch(ctx context.Context) (*serverMetadata, jwk.Set, error) {
	jwksURI := is.cfg.JWKSURI
	var meta *serverMetadata
	if jwksURI == "" || (is.cfg.Introspection != nil && is.cfg.Introspection.Endpoint == "") {
		var err error
		if meta, err = is.discover(ctx); err != nil {
			return nil, nil, err
		}
		if jwksURI == "" {
			jwksURI = meta.JWKSURI
		}
	}
	if jwksURI == "" {
		if is.cfg.Introspection != nil {
			return meta, jwk.NewSet(), nil // opaque tokens only
		}
		return nil, nil, errors.New("its metadata names no jwks_uri")
	}
	body, err := is.get(ctx, jwksURI)
	if err != nil {
		return nil, nil, fmt.Errorf("key set: %w", err)
	}
	keys, err := jwk.Parse(body)
	if err != nil {
		return nil, nil, fmt.Errorf("key set %s: %v", jwksURI, err)
	}
	return meta, keys, nil
}

// discover reads the issuer's metadata: OpenID Connect discovery first,
// then RFC 8414 (path-inserted for an issuer with a path).
func (is *issuer) discover(ctx context.Context) (*serverMetadata, error) {
	u, err := url.Parse(is.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/")
	oidc := *u
	oidc.Path = path + "/.well-known/openid-configuration"
	rfc := *u
	rfc.Path = "/.well-known/oauth-authorization-server" + path
	var errs []error
	for _, cand := range []string{oidc.String(), rfc.String()} {
		body, err := is.get(ctx, cand)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var m serverMetadata
		if err := json.Unmarshal(body, &m); err != nil {
			errs = append(errs, fmt.Errorf("%s: not metadata: %v", cand, err))
			continue
		}
		if m.Issuer != is.cfg.Issuer {
			// RFC 8414 §3.3, OIDC Discovery §4.3: the metadata must be
			// the issuer's own.
			return nil, fmt.Errorf("%s names issuer %q, not %q", cand, m.Issuer, is.cfg.Issuer)
		}
		// The endpoints it names follow the rule configured ones do
		// (https, http on loopback only): the key set decides which
		// tokens pass, and introspection is sent the tokens.
		for _, e := range []struct{ name, url string }{{"jwks_uri", m.JWKSURI}, {"introspection_endpoint", m.IntrospectionEndpoint}} {
			if e.url == "" {
				continue
			}
			if err := checkURL(e.url); err != nil {
				return nil, fmt.Errorf("%s: %s %w", cand, e.name, err)
			}
		}
		return &m, nil
	}
	return nil, fmt.Errorf("metadata: %w", errors.Join(errs...))
}

// get reads a JSON document from an authorization server.
func (is *issuer) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := is.rs.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %s", u, resp.Status)
	}
	if len(body) > maxMetadataBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", u, maxMetadataBytes)
	}
	return body, nil
}

// metadata returns the issuer's metadata, fetching it if needed.
func (is *issuer) metadata(ctx context.Context) (*serverMetadata, *Error) {
	is.mu.Lock()
	m := is.meta
	is.mu.Unlock()
	if m != nil {
		return m, nil
	}
	if _, err := is.keySet(ctx, false); err != nil {
		return nil, err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.meta == nil {
		return nil, unavailable("authorization server %s: metadata not available", is.cfg.Issuer)
	}
	return is.meta, nil
}

// verifyJWT checks a JWT access token: the issuer is one of ours, the
// signature is by a key of its key set (fetched again once for a key it
// does not know), and iss, aud, exp and nbf hold, exp being required.
func (rs *ResourceServer) verifyJWT(ctx context.Context, token string, now time.Time) (*Identity, *Error) {
	claims, err := unverifiedClaims(token)
	if err != nil {
		return nil, invalidToken("malformed token: %v", err)
	}
	iss, _ := claims["iss"].(string)
	is := rs.issuers[iss]
	if is == nil {
		return nil, invalidToken("the token's issuer is not accepted here")
	}
	msg, err := jws.Parse([]byte(token))
	if err != nil || len(msg.Signatures()) != 1 {
		return nil, invalidToken("malformed token signature")
	}
	kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID()
	keys, aerr := is.keySet(ctx, false)
	if aerr != nil {
		return nil, aerr
	}
	if _, known := keys.LookupKeyID(kid); !known || kid == "" && keys.Len() != 1 {
		if keys, aerr = is.keySet(ctx, true); aerr != nil {
			return nil, aerr
		}
		if _, known := keys.LookupKeyID(kid); !known && kid != "" {
			return nil, invalidToken("the token is signed with a key its issuer does not publish (kid %q)", kid)
		}
	}
	_, err = jwt.Parse([]byte(token),
		jwt.WithKeySet(keys, jws.WithInferAlgorithmFromKey(true), jws.WithUseDefault(true)),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
		jwt.WithAcceptableSkew(rs.cfg.Leeway),
		jwt.WithIssuer(iss),
		jwt.WithRequiredClaim("exp"),
		jwt.WithValidator(jwt.ValidatorFunc(func(_ context.Context, t jwt.Token) error {
			aud, _ := t.Audience()
			if !rs.accepts(aud) {
				return errWrongAudience
			}
			return nil
		})),
	)
	switch {
	case err == nil:
	case errors.Is(err, jwt.TokenExpiredError()):
		return nil, invalidToken("the token has expired")
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return nil, invalidToken("the token is not valid yet")
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return nil, invalidToken("the token is not valid yet: it was issued in the future (iat)")
	case errors.Is(err, errWrongAudience):
		return nil, invalidToken("the token's audience is not this resource (%s)", rs.cfg.Resource)
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return nil, invalidToken("the token has no exp")
	case errors.Is(err, jwt.ValidateError()):
		return nil, invalidToken("the token's claims do not hold: %v", err)
	default:
		return nil, invalidToken("the token's signature does not verify")
	}
	return is.identity(claims, now)
}

var errWrongAudience = errors.New("wrong audience")

// identity makes the identity of verified claims.
func (is *issuer) identity(claims map[string]any, now time.Time) (*Identity, *Error) {
	user, _ := claims[is.cfg.UserClaim].(string)
	if user == "" {
		return nil, invalidToken("the token has no %s claim to identify its user", is.cfg.UserClaim)
	}
	id := &Identity{User: is.cfg.UserPrefix + user, Issuer: is.cfg.Issuer, Scopes: scopesOf(claims), Claims: claims}
	id.Subject, _ = claims["sub"].(string)
	if exp, ok := claims["exp"].(float64); ok {
		id.Expiry = time.Unix(int64(exp), 0)
		id.validUntil = id.Expiry.Add(is.rs.cfg.Leeway)
	} else {
		id.validUntil = now.Add(introspectionTTL)
	}
	return id, nil
}

// unverifiedClaims decodes a JWT's claims without checking anything, to
// find its issuer; verifyJWT checks them all before they are used.
func unverifiedClaims(token string) (map[string]any, error) {
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("claims are not base64url")
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return nil, errors.New("claims are not a JSON object")
	}
	return claims, nil
}

// introspect checks an opaque token at the issuer's introspection
// endpoint (RFC 7662): it must be active, for this resource, of this
// issuer (when it says), and not expired.
func (rs *ResourceServer) introspect(ctx context.Context, is *issuer, token string, now time.Time) (*Identity, *Error) {
	in := is.cfg.Introspection
	endpoint := in.Endpoint
	if endpoint == "" {
		m, err := is.metadata(ctx)
		if err != nil {
			return nil, err
		}
		if endpoint = m.IntrospectionEndpoint; endpoint == "" {
			return nil, unavailable("authorization server %s publishes no introspection_endpoint", is.cfg.Issuer)
		}
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, unavailable("introspection: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(in.ClientID), url.QueryEscape(in.ClientSecret))
	resp, err := rs.cfg.HTTPClient.Do(req)
	if err != nil {
		rs.log.Warn("token introspection failed", zap.String("issuer", is.cfg.Issuer), zap.Error(err))
		return nil, unavailable("authorization server %s: introspection failed", is.cfg.Issuer)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	if resp.StatusCode != http.StatusOK {
		rs.log.Warn("token introspection refused", zap.String("issuer", is.cfg.Issuer), zap.String("status", resp.Status))
		return nil, unavailable("authorization server %s: introspection answered %s", is.cfg.Issuer, resp.Status)
	}
	var claims map[string]any
	if err := json.Unmarshal(body, &claims); err != nil || claims == nil {
		return nil, unavailable("authorization server %s: introspection answer is not a JSON object", is.cfg.Issuer)
	}
	if active, _ := claims["active"].(bool); !active {
		return nil, invalidToken("the token is not active")
	}
	if iss, ok := claims["iss"].(string); ok && iss != is.cfg.Issuer {
		return nil, invalidToken("the token's issuer is not accepted here")
	}
	if !rs.accepts(audiencesOf(claims["aud"])) {
		return nil, invalidToken("the token's audience is not this resource (%s)", rs.cfg.Resource)
	}
	if exp, ok := claims["exp"].(float64); ok && now.After(time.Unix(int64(exp), 0).Add(rs.cfg.Leeway)) {
		return nil, invalidToken("the token has expired")
	}
	id, ierr := is.identity(claims, now)
	if ierr != nil {
		return nil, ierr
	}
	if limit := now.Add(introspectionTTL); id.validUntil.After(limit) {
		id.validUntil = limit
	}
	return id, nil
}
