package demo

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The demo notes service of `make run` (handler module
// http.handlers.crank_demo_notes): a third-party API that acts as its
// user, as GitHub or Google Drive do, with its own OAuth 2.1
// authorization server, so that the demo shows Crank's per-user consent
// (upstream_auth grant authorization_code) with no network.
//
// Its two users sign in on its own page: ada (password lovelace) and
// grace (password hopper). It knows one confidential client, crank-demo
// (secret: the demo's secret, DemoSecret), the gateway, which may be
// granted notes.read and introspect tokens; MCP clients register
// themselves (RFC 7591, public clients with PKCE) to sign in to the
// gateway's /notes endpoint, whose auth introspects their tokens here.
// Everything is kept in memory: a restart forgets every client and token.
//
//	GET  /.well-known/oauth-authorization-server  metadata (RFC 8414)
//	GET  /authorize     the sign-in and consent page; POST: its answer
//	POST /token         authorization_code (PKCE S256 required) and
//	                    refresh_token (rotated; a rotated one used again
//	                    revokes its grant)
//	POST /revoke        RFC 7009: revokes the token's whole grant
//	POST /introspect    RFC 7662, for crank-demo
//	POST /register      RFC 7591, public clients on loopback or https
//	GET  /notes         the API: the token's user's notes, for a token of
//	                    this service with the notes.read scope
//	GET  /              the account page: a user revokes every app's
//	                    access to their notes (as at GitHub's settings)

func init() {
	caddy.RegisterModule(NotesService{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_notes", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		s := new(NotesService)
		return s, s.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_notes", httpcaddyfile.Before, "respond")
}

// The notes service's scope, client and limits.
const (
	// NotesScope is the scope the notes API requires.
	NotesScope = "notes.read"
	// NotesClientID is the gateway's client at the notes service.
	NotesClientID = "crank-demo"

	notesCodeTTL     = time.Minute
	notesRefreshTTL  = 30 * 24 * time.Hour
	notesDefaultTTL  = 15 * time.Minute
	notesMaxClients  = 1000
	notesMaxTokens   = 100000
	notesMaxForm     = 16 << 10
	notesMaxRedirect = 5
)

// notesUser is a user of the notes service.
type notesUser struct {
	password, name string
	notes          []string
}

var notesUsers = map[string]notesUser{
	"ada": {"lovelace", "Ada Lovelace", []string{
		"Note G: the engine's program for the Bernoulli numbers.",
		"The engine might compose elaborate pieces of music.",
	}},
	"grace": {"hopper", "Grace Hopper", []string{
		"A ship in port is safe, but that is not what ships are built for.",
	}},
}

// NotesService is the demo notes service.
type NotesService struct {
	// Issuer is the service's URL and issuer identifier, e.g.
	// http://127.0.0.1:8085.
	Issuer string `json:"issuer"`
	// AccessTTL is how long an access token lives; default 15m.
	AccessTTL caddy.Duration `json:"access_ttl,omitempty"`

	mux *http.ServeMux
	st  *notesState
}

// notesState is everything the service remembers.
type notesState struct {
	mu      sync.Mutex
	clients map[string]*notesClient
	codes   map[string]*notesCode  // by the code's digest
	tokens  map[string]*notesToken // by the token's digest
	swept   time.Time
}

// notesClient is a client of the service.
type notesClient struct {
	id, secret, name string
	redirects        []string // exact redirect URIs; none: the gateway's rule (notesGatewayRedirect)
	scopes           []string // the scopes it may be granted
}

// notesCode is an authorization code, used once.
type notesCode struct {
	client, user, redirect, challenge, scope, resource string
	expires                                            time.Time
	used                                               bool
	grant                                              string // the grant its tokens belong to, once exchanged
}

// notesToken is an access or refresh token; every token of one consent
// (its refreshes included) belongs to one grant.
type notesToken struct {
	refresh                              bool
	grant, client, user, scope, resource string
	issued, expires                      time.Time
	rotated                              bool // a refresh token already used
}

// CaddyModule returns the Caddy module information.
func (NotesService) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_notes", New: func() caddy.Module { return new(NotesService) }}
}

// UnmarshalCaddyfile reads `crank_demo_notes <issuer URL>`.
func (s *NotesService) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if !d.NextArg() {
		return d.Err("crank_demo_notes: the service's issuer URL is required, e.g. http://127.0.0.1:8085")
	}
	s.Issuer = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Provision checks the issuer and sets up the routes and the gateway's
// client.
func (s *NotesService) Provision(caddy.Context) error {
	u, err := url.Parse(s.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("crank_demo_notes: issuer %q must be an http(s) URL without a query", s.Issuer)
	}
	s.Issuer = strings.TrimSuffix(s.Issuer, "/")
	s.st = &notesState{clients: map[string]*notesClient{}, codes: map[string]*notesCode{}, tokens: map[string]*notesToken{}}
	s.st.clients[NotesClientID] = &notesClient{id: NotesClientID, secret: DemoSecret(), name: "Crank demo gateway",
		scopes: []string{NotesScope}}
	m := http.NewServeMux()
	m.Handle("/.well-known/oauth-authorization-server", notesCORS(http.HandlerFunc(s.metadata)))
	m.HandleFunc("GET /authorize", s.authorizePage)
	m.HandleFunc("POST /authorize", s.authorize)
	m.Handle("/token", notesCORS(http.HandlerFunc(s.token)))
	m.Handle("/revoke", notesCORS(http.HandlerFunc(s.revoke)))
	m.HandleFunc("POST /introspect", s.introspect)
	m.Handle("/register", notesCORS(http.HandlerFunc(s.register)))
	m.HandleFunc("GET /notes", s.notes)
	m.HandleFunc("GET /{$}", s.account)
	m.HandleFunc("POST /{$}", s.revokeAccount)
	s.mux = m
	return nil
}

// ServeHTTP serves the service.
func (s *NotesService) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	s.mux.ServeHTTP(w, r)
	return nil
}

func (s *NotesService) accessTTL() time.Duration {
	if s.AccessTTL > 0 {
		return time.Duration(s.AccessTTL)
	}
	return notesDefaultTTL
}

// notesCORS lets browser-based MCP clients (the MCP Inspector) read the
// metadata and use the token, revocation and registration endpoints:
// none of them takes cookies.
func notesCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *NotesService) metadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		notesError(w, http.StatusMethodNotAllowed, "invalid_request", "GET only")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         s.Issuer,
		"authorization_endpoint":                         s.Issuer + "/authorize",
		"token_endpoint":                                 s.Issuer + "/token",
		"revocation_endpoint":                            s.Issuer + "/revoke",
		"introspection_endpoint":                         s.Issuer + "/introspect",
		"registration_endpoint":                          s.Issuer + "/register",
		"scopes_supported":                               []string{NotesScope},
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
		"revocation_endpoint_auth_methods_supported":     []string{"client_secret_basic", "client_secret_post", "none"},
		"introspection_endpoint_auth_methods_supported":  []string{"client_secret_basic", "client_secret_post"},
		"authorization_response_iss_parameter_supported": true,
		"service_documentation":                          s.Issuer + "/",
	})
}

// authzRequest is a checked authorization request.
type authzRequest struct {
	client                                          *notesClient
	redirect, state, challenge, scope, resource, rt string
}

// errNotRedirectable: the request names no known client or redirect URI
// of it, so its error is shown, not sent to the redirect URI (RFC 6749
// §4.1.2.1).
type errNotRedirectable struct{ msg string }

func (e errNotRedirectable) Error() string { return e.msg }

// authzRequestOf checks an authorization request's parameters: a
// client and its redirect URI first (errNotRedirectable), then what the
// redirect URI is told (code, errorCode).
func (s *NotesService) authzRequestOf(q url.Values) (*authzRequest, string, error) {
	s.st.mu.Lock()
	c := s.st.clients[q.Get("client_id")]
	s.st.mu.Unlock()
	if c == nil {
		return nil, "", errNotRedirectable{"unknown client_id: register the client first (POST /register)"}
	}
	ar := &authzRequest{client: c, redirect: q.Get("redirect_uri"), state: q.Get("state"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), rt: q.Get("response_type")}
	if !c.allowsRedirect(ar.redirect) {
		return nil, "", errNotRedirectable{"redirect_uri is not one registered for this client"}
	}
	switch {
	case ar.rt != "code":
		return ar, "unsupported_response_type", errors.New("response_type must be code")
	case q.Get("code_challenge_method") != "S256" || len(ar.challenge) != 43:
		return ar, "invalid_request", errors.New("PKCE is required: code_challenge with code_challenge_method S256")
	case ar.resource != "" && !absoluteURL(ar.resource):
		return ar, "invalid_target", errors.New("resource must be an absolute URI")
	}
	// The scopes granted: those asked that the client may have.
	var granted []string
	for _, sc := range strings.Fields(q.Get("scope")) {
		if slices.Contains(c.scopes, sc) && !slices.Contains(granted, sc) {
			granted = append(granted, sc)
		}
	}
	ar.scope = strings.Join(granted, " ")
	return ar, "", nil
}

// allowsRedirect: a registered client's redirect URIs are exact; the
// gateway's is its endpoint's consent callback on a loopback address,
// any port.
func (c *notesClient) allowsRedirect(uri string) bool {
	if c.redirects != nil {
		return slices.Contains(c.redirects, uri)
	}
	u, err := url.Parse(uri)
	return err == nil && u.Scheme == "http" && loopbackHost(u.Hostname()) && strings.HasSuffix(u.Path, "/oauth/callback") &&
		u.RawQuery == "" && u.Fragment == "" && u.User == nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.IsAbs() && u.Host != "" && u.Fragment == ""
}

var notesPage = template.Must(template.New("notes").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>Demo Notes</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem}
label{display:block;margin:.5rem 0}input[type=text],input[type=password]{width:100%;padding:.3rem}
button{margin:.8rem .5rem 0 0;padding:.4rem 1rem}.error{color:#b00020}.hint{color:#555;font-size:.9rem}</style></head>
<body><h1>Demo Notes</h1>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{end}}
{{if .Asks}}<p id="asks"><b>{{.Client}}</b> asks to {{.Asks}}.</p>{{end}}
{{if .Intro}}<p id="intro">{{.Intro}}</p>{{end}}
{{if .Revoked}}<p id="revoked">{{.Revoked}}</p>{{end}}
{{if .Form}}<form method="post" action="{{.Action}}">
{{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}
<label>User <input type="text" id="username" name="username" autocomplete="username" autofocus></label>
<label>Password <input type="password" id="password" name="password" autocomplete="current-password"></label>
<button type="submit" id="login" name="action" value="allow">{{.Submit}}</button>
{{if .Deny}}<button type="submit" id="deny" name="action" value="deny">Deny</button>{{end}}
</form>
<p class="hint">Demo users: ada (password lovelace) and grace (password hopper).</p>{{end}}
</body></html>
`))

type notesPageData struct {
	Error, Client, Asks, Intro, Revoked, Action, Submit string
	Form, Deny                                          bool
	Hidden                                              []struct{ Name, Value string }
}

func renderNotesPage(w http.ResponseWriter, status int, d notesPageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// No form-action: browsers apply it to the redirect that follows the
	// form, to the client's redirect URI.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	_ = notesPage.Execute(w, d)
}

// authorizePage shows the sign-in and consent form of an authorization
// request.
func (s *NotesService) authorizePage(w http.ResponseWriter, r *http.Request) {
	s.serveAuthorization(w, r, r.URL.Query(), "")
}

// serveAuthorization answers an authorization request q: its error, or
// its form (with problem, after a failed sign-in).
func (s *NotesService) serveAuthorization(w http.ResponseWriter, r *http.Request, q url.Values, problem string) {
	ar, code, err := s.authzRequestOf(q)
	var nr errNotRedirectable
	switch {
	case errors.As(err, &nr):
		renderNotesPage(w, http.StatusBadRequest, notesPageData{Error: "This sign-in link is not valid: " + nr.msg + "."})
		return
	case err != nil:
		s.redirectError(w, r, ar, code, err.Error())
		return
	}
	asks := "sign you in"
	if ar.scope != "" {
		asks = "read your notes (" + ar.scope + ")"
	}
	d := notesPageData{Client: ar.client.name, Asks: asks, Error: problem, Form: true, Deny: true, Action: "/authorize", Submit: "Allow"}
	for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method", "scope", "resource"} {
		if v := q.Get(k); v != "" {
			d.Hidden = append(d.Hidden, struct{ Name, Value string }{k, v})
		}
	}
	status := http.StatusOK
	if problem != "" {
		status = http.StatusUnauthorized
	}
	renderNotesPage(w, status, d)
}

// authorize takes the form's answer: a code for the signed-in user, sent
// to the redirect URI, or access_denied.
func (s *NotesService) authorize(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, notesMaxForm)
	if err := r.ParseForm(); err != nil {
		renderNotesPage(w, http.StatusBadRequest, notesPageData{Error: "The form could not be read."})
		return
	}
	q := r.PostForm
	ar, _, err := s.authzRequestOf(q)
	if err != nil {
		s.serveAuthorization(w, r, q, "")
		return
	}
	if q.Get("action") == "deny" {
		s.redirectError(w, r, ar, "access_denied", "the user denied access")
		return
	}
	user, ok := checkNotesUser(q.Get("username"), q.Get("password"))
	if !ok {
		s.serveAuthorization(w, r, q, "Wrong user or password.")
		return
	}
	c := &notesCode{client: ar.client.id, user: user, redirect: ar.redirect, challenge: ar.challenge, scope: ar.scope,
		resource: ar.resource, expires: time.Now().Add(notesCodeTTL)}
	value := randomToken()
	s.st.mu.Lock()
	s.st.sweep(time.Now())
	s.st.codes[digest(value)] = c
	s.st.mu.Unlock()
	s.redirect(w, r, ar, url.Values{"code": {value}})
}

// checkNotesUser checks a user's password, in time independent of it.
func checkNotesUser(name, password string) (string, bool) {
	u, ok := notesUsers[name]
	want := u.password
	if !ok {
		want = "\x00never"
	}
	if subtle.ConstantTimeCompare([]byte(password), []byte(want)) != 1 || !ok {
		return "", false
	}
	return name, true
}

func (s *NotesService) redirectError(w http.ResponseWriter, r *http.Request, ar *authzRequest, code, desc string) {
	s.redirect(w, r, ar, url.Values{"error": {code}, "error_description": {desc}})
}

// redirect sends the browser to the request's redirect URI with q, the
// state and the issuer (RFC 9207).
func (s *NotesService) redirect(w http.ResponseWriter, r *http.Request, ar *authzRequest, q url.Values) {
	u, _ := url.Parse(ar.redirect)
	v := u.Query()
	for k, vs := range q {
		v[k] = vs
	}
	if ar.state != "" {
		v.Set("state", ar.state)
	}
	v.Set("iss", s.Issuer)
	u.RawQuery = v.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// notesError answers an OAuth error.
func notesError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="notes"`)
	}
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// clientOf authenticates a token, revocation or introspection request's
// client: HTTP Basic or client_secret_post for a confidential client,
// client_id alone for a public one.
func (s *NotesService) clientOf(r *http.Request) (*notesClient, bool) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.st.mu.Lock()
	c := s.st.clients[id]
	s.st.mu.Unlock()
	switch {
	case c == nil:
		return nil, false
	case c.secret == "":
		return c, secret == ""
	}
	return c, subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) == 1
}

// postingClient reads a form POST's body, bounded, and authenticates
// its client; nil when it answered an error.
func (s *NotesService) postingClient(w http.ResponseWriter, r *http.Request) *notesClient {
	if r.Method != http.MethodPost {
		notesError(w, http.StatusMethodNotAllowed, "invalid_request", "POST only")
		return nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, notesMaxForm)
	if err := r.ParseForm(); err != nil {
		notesError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return nil
	}
	c, ok := s.clientOf(r)
	if !ok {
		notesError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return nil
	}
	return c
}

// token serves the token endpoint.
func (s *NotesService) token(w http.ResponseWriter, r *http.Request) {
	c := s.postingClient(w, r)
	if c == nil {
		return
	}
	f := r.PostForm
	now := time.Now()
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweep(now)
	var grant, user, scope, resource string
	switch f.Get("grant_type") {
	case "authorization_code":
		code := st.codes[digest(f.Get("code"))]
		switch {
		case code == nil || now.After(code.expires) || code.client != c.id:
			notesError(w, http.StatusBadRequest, "invalid_grant", "unknown or expired code")
			return
		case code.used:
			// A code used twice: revoke what it gave (RFC 6749 §4.1.2).
			st.revokeGrant(code.grant)
			notesError(w, http.StatusBadRequest, "invalid_grant", "the code was used already")
			return
		case f.Get("redirect_uri") != code.redirect:
			notesError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
			return
		case !pkceMatches(f.Get("code_verifier"), code.challenge):
			notesError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
			return
		case f.Get("resource") != "" && f.Get("resource") != code.resource:
			notesError(w, http.StatusBadRequest, "invalid_target", "resource differs from the authorization request's")
			return
		}
		code.used = true
		code.grant = randomToken()
		grant, user, scope, resource = code.grant, code.user, code.scope, code.resource
	case "refresh_token":
		rt := st.tokens[digest(f.Get("refresh_token"))]
		switch {
		case rt == nil || !rt.refresh || now.After(rt.expires) || rt.client != c.id:
			notesError(w, http.StatusBadRequest, "invalid_grant", "unknown, expired or revoked refresh token")
			return
		case rt.rotated:
			// A refresh token used again after its rotation was stolen
			// or replayed: end its grant (OAuth 2.1 §4.3.1).
			st.revokeGrant(rt.grant)
			notesError(w, http.StatusBadRequest, "invalid_grant", "the refresh token was used already")
			return
		}
		rt.rotated = true
		grant, user, scope, resource = rt.grant, rt.user, rt.scope, rt.resource
	default:
		notesError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
		return
	}
	if len(st.tokens) >= notesMaxTokens-1 {
		notesError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "too many tokens: restart the demo")
		return
	}
	access, refresh := randomToken(), randomToken()
	ttl := s.accessTTL()
	st.tokens[digest(access)] = &notesToken{grant: grant, client: c.id, user: user, scope: scope, resource: resource, issued: now, expires: now.Add(ttl)}
	st.tokens[digest(refresh)] = &notesToken{refresh: true, grant: grant, client: c.id, user: user, scope: scope, resource: resource, issued: now, expires: now.Add(notesRefreshTTL)}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(ttl / time.Second),
		"refresh_token": refresh, "scope": scope})
}

// pkceMatches checks a code verifier against its S256 challenge (RFC
// 7636 §4.6).
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// revoke serves RFC 7009: a known token of the client ends its grant;
// an unknown one is answered 200 all the same.
func (s *NotesService) revoke(w http.ResponseWriter, r *http.Request) {
	c := s.postingClient(w, r)
	if c == nil {
		return
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.tokens[digest(r.PostForm.Get("token"))]; t != nil {
		if t.client != c.id {
			notesError(w, http.StatusBadRequest, "invalid_request", "the token was not issued to this client")
			return
		}
		st.revokeGrant(t.grant)
	}
	w.WriteHeader(http.StatusOK)
}

// introspect serves RFC 7662 to the gateway: an access token's user,
// scope and audience while it is active.
func (s *NotesService) introspect(w http.ResponseWriter, r *http.Request) {
	c := s.postingClient(w, r)
	if c == nil {
		return
	}
	if c.secret == "" {
		notesError(w, http.StatusUnauthorized, "invalid_client", "introspection is for the gateway's client")
		return
	}
	t := s.active(r.PostForm.Get("token"))
	w.Header().Set("Cache-Control", "no-store")
	if t == nil {
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	out := map[string]any{"active": true, "sub": t.user, "client_id": t.client, "scope": t.scope, "iss": s.Issuer,
		"token_type": "Bearer", "iat": t.issued.Unix(), "exp": t.expires.Unix()}
	if t.resource != "" {
		out["aud"] = t.resource
	}
	writeJSON(w, http.StatusOK, out)
}

// active is a copy of the access token's record while it is active.
func (s *NotesService) active(value string) *notesToken {
	if value == "" {
		return nil
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	t := s.st.tokens[digest(value)]
	if t == nil || t.refresh || time.Now().After(t.expires) {
		return nil
	}
	c := *t
	return &c
}

// register serves RFC 7591 for public clients: redirect URIs on loopback
// or https, no secret, PKCE at every authorization.
func (s *NotesService) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		notesError(w, http.StatusMethodNotAllowed, "invalid_request", "POST only")
		return
	}
	var m struct {
		RedirectURIs []string `json:"redirect_uris"`
		Name         string   `json:"client_name"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
		GrantTypes   []string `json:"grant_types"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, notesMaxForm)).Decode(&m); err != nil {
		notesError(w, http.StatusBadRequest, "invalid_client_metadata", "the body is not JSON client metadata")
		return
	}
	switch {
	case len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > notesMaxRedirect:
		notesError(w, http.StatusBadRequest, "invalid_redirect_uri", fmt.Sprintf("redirect_uris: 1 to %d are required", notesMaxRedirect))
		return
	case m.AuthMethod != "" && m.AuthMethod != "none":
		notesError(w, http.StatusBadRequest, "invalid_client_metadata", "token_endpoint_auth_method: this service registers public clients only (none)")
		return
	case len(m.Name) > 100:
		notesError(w, http.StatusBadRequest, "invalid_client_metadata", "client_name: at most 100 characters")
		return
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			notesError(w, http.StatusBadRequest, "invalid_client_metadata", "grant_types: authorization_code and refresh_token only")
			return
		}
	}
	for _, uri := range m.RedirectURIs {
		u, err := url.Parse(uri)
		if err != nil || !u.IsAbs() || u.Fragment != "" || u.User != nil || !(u.Scheme == "https" || u.Scheme == "http" && loopbackHost(u.Hostname())) {
			notesError(w, http.StatusBadRequest, "invalid_redirect_uri", "redirect_uris: each must be https, or http on loopback, without a fragment")
			return
		}
	}
	name := m.Name
	if name == "" {
		name = "An MCP client"
	}
	c := &notesClient{id: "client-" + randomToken()[:22], name: name, redirects: slices.Clone(m.RedirectURIs)}
	s.st.mu.Lock()
	n := len(s.st.clients)
	if n < notesMaxClients {
		s.st.clients[c.id] = c
	}
	s.st.mu.Unlock()
	if n >= notesMaxClients {
		notesError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "too many clients: restart the demo")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"client_id": c.id, "client_id_issued_at": time.Now().Unix(), "client_name": name,
		"redirect_uris": c.redirects, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none"})
}

// notes serves the API: the notes of the token's user, for an active
// token of this service with the notes scope.
func (s *NotesService) notes(w http.ResponseWriter, r *http.Request) {
	value, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	t := s.active(value)
	h := w.Header()
	switch {
	case t == nil:
		h.Set("WWW-Authenticate", `Bearer realm="notes", error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token", "error_description": "no active token of this service"})
		return
	case !slices.Contains(strings.Fields(t.scope), NotesScope):
		h.Set("WWW-Authenticate", `Bearer realm="notes", error="insufficient_scope", scope="`+NotesScope+`"`)
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "insufficient_scope", "error_description": "the token lacks " + NotesScope})
		return
	}
	u := notesUsers[t.user]
	writeJSON(w, http.StatusOK, map[string]any{"user": t.user, "name": u.name, "notes": u.notes})
}

// account shows the account page: a user revokes every app's access.
func (s *NotesService) account(w http.ResponseWriter, r *http.Request) {
	renderNotesPage(w, http.StatusOK, notesPageData{Form: true, Action: "/", Submit: "Revoke every app's access",
		Intro: "Sign in to take back the access to your notes from every app you allowed."})
}

// revokeAccount ends every grant of the signed-in user.
func (s *NotesService) revokeAccount(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, notesMaxForm)
	if err := r.ParseForm(); err != nil {
		renderNotesPage(w, http.StatusBadRequest, notesPageData{Error: "The form could not be read."})
		return
	}
	user, ok := checkNotesUser(r.PostForm.Get("username"), r.PostForm.Get("password"))
	if !ok {
		renderNotesPage(w, http.StatusUnauthorized, notesPageData{Error: "Wrong user or password.", Form: true, Action: "/",
			Submit: "Revoke every app's access"})
		return
	}
	st := s.st
	st.mu.Lock()
	grants := map[string]bool{}
	for _, t := range st.tokens {
		if t.user == user {
			grants[t.grant] = true
		}
	}
	for g := range grants {
		st.revokeGrant(g)
	}
	st.mu.Unlock()
	renderNotesPage(w, http.StatusOK, notesPageData{Revoked: fmt.Sprintf("Revoked: no app can read %s's notes now (%d grants ended).", user, len(grants))})
}

// revokeGrant drops every token of a grant; the caller holds st.mu.
func (st *notesState) revokeGrant(grant string) {
	if grant == "" {
		return
	}
	for k, t := range st.tokens {
		if t.grant == grant {
			delete(st.tokens, k)
		}
	}
}

// sweep drops expired codes and tokens, once a minute at most; the
// caller holds st.mu.
func (st *notesState) sweep(now time.Time) {
	if now.Sub(st.swept) < time.Minute {
		return
	}
	st.swept = now
	for k, c := range st.codes {
		if now.After(c.expires.Add(notesCodeTTL)) { // kept a while used, to catch a replay
			delete(st.codes, k)
		}
	}
	for k, t := range st.tokens {
		if now.After(t.expires) {
			delete(st.tokens, k)
		}
	}
}

// randomToken is 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// digest keys the records of codes and tokens, so that the service
// keeps no token in clear.
func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return string(sum[:])
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*NotesService)(nil)
	_ caddyhttp.MiddlewareHandler = (*NotesService)(nil)
	_ caddyfile.Unmarshaler       = (*NotesService)(nil)
)
