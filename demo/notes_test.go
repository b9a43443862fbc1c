package demo

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/oauth2"
)

// newNotesServer serves a notes service on loopback.
func newNotesServer(t *testing.T, accessTTL time.Duration) (*NotesService, *httptest.Server) {
	t.Helper()
	s := &NotesService{AccessTTL: caddy.Duration(accessTTL)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = s.ServeHTTP(w, r, nil) }))
	t.Cleanup(srv.Close)
	s.Issuer = srv.URL
	if err := s.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return s, srv
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signIn answers the sign-in page of an authorization URL as a browser
// would (the form's fields, the user's name and password, action) and
// returns where the service sends the browser.
func signIn(t *testing.T, authURL, user, password, action string) *url.URL {
	t.Helper()
	page := getBody(t, authURL)
	if !strings.Contains(page, `id="username"`) || !strings.Contains(page, `id="login"`) {
		t.Fatalf("sign-in page: %s", page)
	}
	u, _ := url.Parse(authURL)
	form := u.Query()
	form.Set("username", user)
	form.Set("password", password)
	form.Set("action", action)
	resp, err := noRedirect.PostForm(u.Scheme+"://"+u.Host+"/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("sign-in as %s: %s %s", user, resp.Status, b)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func getBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// readNotes calls the notes API with a token: its status and answer.
func readNotes(t *testing.T, base, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/notes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func postForm(t *testing.T, u string, form url.Values, user, password string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(password))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The gateway's grant, driven by golang.org/x/oauth2 (an OAuth client
// that is not Crank's): sign-in and consent per user, the code exchanged
// with PKCE S256, the notes API answering each user their own notes,
// a refresh that rotates the refresh token, and revocation (RFC 7009)
// ending the grant for its access and refresh tokens.
func TestNotesServiceAuthorizationCode(t *testing.T) {
	t.Parallel()
	_, srv := newNotesServer(t, time.Hour)
	redirect := "http://127.0.0.1:8080/notes/oauth/callback"
	cfg := &oauth2.Config{ClientID: NotesClientID, ClientSecret: DemoSecret(), RedirectURL: redirect, Scopes: []string{NotesScope},
		Endpoint: oauth2.Endpoint{AuthURL: srv.URL + "/authorize", TokenURL: srv.URL + "/token", AuthStyle: oauth2.AuthStyleInHeader}}
	ctx := context.Background()

	grant := func(user, password string) *oauth2.Token {
		t.Helper()
		verifier := oauth2.GenerateVerifier()
		loc := signIn(t, cfg.AuthCodeURL("st-"+user, oauth2.S256ChallengeOption(verifier)), user, password, "allow")
		q := loc.Query()
		if got := loc.Scheme + "://" + loc.Host + loc.Path; got != redirect || q.Get("state") != "st-"+user || q.Get("iss") != srv.URL || q.Get("code") == "" {
			t.Fatalf("redirect after sign-in: %s", loc)
		}
		tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange for %s: %v", user, err)
		}
		if tok.RefreshToken == "" || tok.Extra("scope") != NotesScope || tok.Expiry.IsZero() {
			t.Fatalf("%s's tokens: %+v scope %v", user, tok, tok.Extra("scope"))
		}
		// The same code again is refused, and ends what it gave.
		if _, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier)); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Fatalf("a code used twice: %v", err)
		}
		if status, _ := readNotes(t, srv.URL, tok.AccessToken); status != http.StatusUnauthorized {
			t.Fatalf("a token of a replayed code still reads notes: %d", status)
		}
		verifier = oauth2.GenerateVerifier()
		loc = signIn(t, cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), user, password, "allow")
		tok, err = cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ada, grace := grant("ada", "lovelace"), grant("grace", "hopper")
	if status, out := readNotes(t, srv.URL, ada.AccessToken); status != 200 || out["user"] != "ada" || !strings.Contains(fmtJSON(out), "Bernoulli") {
		t.Errorf("ada's notes: %d %v", status, out)
	}
	if status, out := readNotes(t, srv.URL, grace.AccessToken); status != 200 || out["user"] != "grace" || strings.Contains(fmtJSON(out), "Bernoulli") {
		t.Errorf("grace's notes: %d %v", status, out)
	}

	// A refresh rotates the refresh token: the new pair reads ada's
	// notes, the old refresh token used again ends the grant.
	expired := &oauth2.Token{RefreshToken: ada.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	fresh, err := cfg.TokenSource(ctx, expired).Token()
	if err != nil || fresh.AccessToken == ada.AccessToken || fresh.RefreshToken == ada.RefreshToken {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	if status, out := readNotes(t, srv.URL, fresh.AccessToken); status != 200 || out["user"] != "ada" {
		t.Errorf("ada's notes after a refresh: %d %v", status, out)
	}
	if _, err := cfg.TokenSource(ctx, expired).Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("a rotated refresh token used again: %v", err)
	}
	if status, _ := readNotes(t, srv.URL, fresh.AccessToken); status != http.StatusUnauthorized {
		t.Errorf("the grant of a replayed refresh token still reads notes: %d", status)
	}

	// RFC 7009: revoking grace's refresh token ends her access token too;
	// an unknown token is answered 200; another client's token is not
	// this client's to revoke.
	if status, _ := postForm(t, srv.URL+"/revoke", url.Values{"token": {grace.RefreshToken}, "token_type_hint": {"refresh_token"}}, NotesClientID, DemoSecret()); status != 200 {
		t.Fatalf("revoke: %d", status)
	}
	if status, out := readNotes(t, srv.URL, grace.AccessToken); status != http.StatusUnauthorized || out["error"] != "invalid_token" {
		t.Errorf("a revoked grant's access token: %d %v", status, out)
	}
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: grace.RefreshToken}).Token(); err == nil {
		t.Error("a revoked refresh token still refreshes")
	}
	if status, _ := postForm(t, srv.URL+"/revoke", url.Values{"token": {"nonsense"}}, NotesClientID, DemoSecret()); status != 200 {
		t.Errorf("revoking an unknown token: %d", status)
	}
	if status, out := postForm(t, srv.URL+"/revoke", url.Values{"token": {"x"}}, NotesClientID, "wrong"); status != http.StatusUnauthorized || out["error"] != "invalid_client" {
		t.Errorf("revoking with a wrong secret: %d %v", status, out)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// What the authorization endpoint refuses: an unknown client or redirect
// URI on its own page, anything else at the redirect URI; a denial; a
// wrong password keeps the form.
func TestNotesServiceAuthorizeRefusals(t *testing.T) {
	t.Parallel()
	_, srv := newNotesServer(t, 0)
	cb := "http://127.0.0.1:9/mcp/oauth/callback"
	good := url.Values{"response_type": {"code"}, "client_id": {NotesClientID}, "redirect_uri": {cb}, "state": {"s"},
		"code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}, "scope": {NotesScope}}
	with := func(k, v string) string {
		q := url.Values{}
		for kk, vv := range good {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return srv.URL + "/authorize?" + q.Encode()
	}
	for _, c := range []struct{ k, v, page, redirect string }{
		{"client_id", "nobody", "unknown client_id", ""},
		{"redirect_uri", "http://evil.example/mcp/oauth/callback", "redirect_uri is not one registered", ""},
		{"redirect_uri", "http://127.0.0.1:9/elsewhere", "redirect_uri is not one registered", ""},
		{"response_type", "token", "", "unsupported_response_type"},
		{"code_challenge_method", "plain", "", "invalid_request"},
		{"code_challenge", "", "", "invalid_request"},
	} {
		resp, err := noRedirect.Get(with(c.k, c.v))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		switch {
		case c.page != "" && (resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.page)):
			t.Errorf("%s=%s: %s %s", c.k, c.v, resp.Status, b)
		case c.redirect != "" && (resp.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != c.redirect || loc.Query().Get("state") != "s"):
			t.Errorf("%s=%s: %s %s", c.k, c.v, resp.Status, loc)
		}
	}
	if loc := signIn(t, with("", ""), "ada", "lovelace", "deny"); loc.Query().Get("error") != "access_denied" {
		t.Errorf("deny: %s", loc)
	}
	form := good
	form.Set("username", "ada")
	form.Set("password", "hopper")
	resp, err := noRedirect.PostForm(srv.URL+"/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "Wrong user or password") || !strings.Contains(string(b), `id="username"`) {
		t.Errorf("a wrong password: %s %s", resp.Status, b)
	}
}

// An MCP client registers itself (RFC 7591) and signs in to the gateway
// with PKCE and a resource (RFC 8707): introspection (RFC 7662) tells
// the gateway the user and the audience; its token reads no notes (it
// has not the scope, which only the gateway's client is granted), and
// introspection is the gateway's alone.
func TestNotesServiceRegisteredClient(t *testing.T) {
	t.Parallel()
	_, srv := newNotesServer(t, 0)
	meta := map[string]any{}
	if err := json.Unmarshal([]byte(getBody(t, srv.URL+"/.well-known/oauth-authorization-server")), &meta); err != nil || meta["issuer"] != srv.URL ||
		meta["registration_endpoint"] != srv.URL+"/register" || fmtJSON(meta["code_challenge_methods_supported"]) != `["S256"]` {
		t.Fatalf("metadata: %v %v", meta, err)
	}
	register := func(body string) (int, map[string]any) {
		resp, err := http.Post(srv.URL+"/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, bad := range []string{`{}`, `{"redirect_uris":["http://evil.example/cb"]}`, `{"redirect_uris":["https://a.example/cb#x"]}`,
		`{"redirect_uris":["http://127.0.0.1:1/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, `nope`} {
		if status, out := register(bad); status != http.StatusBadRequest || out["error"] == nil {
			t.Errorf("register %s: %d %v", bad, status, out)
		}
	}
	cb := "http://127.0.0.1:33333/callback"
	status, reg := register(`{"redirect_uris":["` + cb + `"],"client_name":"inspector","token_endpoint_auth_method":"none"}`)
	id, _ := reg["client_id"].(string)
	if status != http.StatusCreated || id == "" {
		t.Fatalf("register: %d %v", status, reg)
	}
	cfg := &oauth2.Config{ClientID: id, RedirectURL: cb, Scopes: []string{NotesScope},
		Endpoint: oauth2.Endpoint{AuthURL: srv.URL + "/authorize", TokenURL: srv.URL + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resource := "http://127.0.0.1:8080/notes"
	loc := signIn(t, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)), "grace", "hopper", "allow")
	tok, err := cfg.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		t.Fatal(err)
	}
	if status, out := readNotes(t, srv.URL, tok.AccessToken); status != http.StatusForbidden || out["error"] != "insufficient_scope" {
		t.Errorf("a sign-in token at the notes API: %d %v", status, out)
	}
	status, in := postForm(t, srv.URL+"/introspect", url.Values{"token": {tok.AccessToken}}, NotesClientID, DemoSecret())
	if status != 200 || in["active"] != true || in["sub"] != "grace" || in["aud"] != resource || in["iss"] != srv.URL || in["scope"] != "" {
		t.Errorf("introspection: %d %v", status, in)
	}
	if _, in := postForm(t, srv.URL+"/introspect", url.Values{"token": {tok.RefreshToken}}, NotesClientID, DemoSecret()); in["active"] != false {
		t.Errorf("a refresh token introspected as active: %v", in)
	}
	if status, _ := postForm(t, srv.URL+"/introspect", url.Values{"token": {tok.AccessToken}, "client_id": {id}}, "", ""); status != http.StatusUnauthorized {
		t.Errorf("introspection by a public client: %d", status)
	}
	// The account page: grace revokes every app's access.
	resp, err := http.PostForm(srv.URL+"/", url.Values{"username": {"grace"}, "password": {"hopper"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "1 grants ended") {
		t.Errorf("the account page's revocation: %s", b)
	}
	if _, in := postForm(t, srv.URL+"/introspect", url.Values{"token": {tok.AccessToken}}, NotesClientID, DemoSecret()); in["active"] != false {
		t.Errorf("a token revoked on the account page is active: %v", in)
	}
}
