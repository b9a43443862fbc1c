package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// The console's authenticated path in headless Chromium, behind a real
// OpenID provider and Caddy's own auth handler: Ory Hydra is the provider
// (its login page is the login app below, as Hydra delegates login),
// oauth2-proxy the identity-aware proxy that Caddy's forward_auth asks,
// both built from the Go module proxy (testdata/oidc) and run on free
// loopback ports. The browser opening the console is sent to log in,
// logs in with the provider's user, comes back to the console, saves an
// operation through the form, and the catalog records it as by
// console:<the user's email>, the header the console takes from
// forward_auth's answer (forward_auth_user_header). The console has no
// loopback_without_login here: without the login nothing is answered.
func TestConsoleBehindOpenIDProvider(t *testing.T) {
	t.Parallel()
	browsertest.Chromium(t) // skip before building anything without it
	start := time.Now()
	hydraBin, proxyBin := oidcTools(t)
	t.Logf("built hydra and oauth2-proxy in %s", time.Since(start).Round(time.Second))

	const email, password = "ann@example.com", "ann-secret-pw"
	login := newHydraLogin(t, map[string]hydraUser{"ann": {password, email}})
	hydra := startHydra(t, hydraBin, login.URL)
	login.admin = hydra.admin

	proxyPort := freePort(t)
	up := newAuthUpstream(t)
	g := startGateway(t, gatewayOptions{
		Operations: fmt.Sprintf(`version: 1
operations:
  - name: get_user
    description: Fetch one user.
    adapter: rest
    config: {method: GET, url: "%s/users/{id}"}
`, up.URL),
		Handler: fmt.Sprintf("catalog live {\n\t\t\tupstreams %s\n\t\t}", up.URL),
		// As docs/guide/catalogs-and-console.md, "Operator console", has it.
		Site: fmt.Sprintf(`handle /oauth2/* {
		reverse_proxy 127.0.0.1:%[1]d
	}
	handle {
		forward_auth 127.0.0.1:%[1]d {
			uri /oauth2/auth
			@login status 401
			handle_response @login {
				redir * /oauth2/start?rd={uri}
			}
		}
		crank_console /console* {
			forward_auth_user_header X-Auth-Request-Email
		}
	}`, proxyPort),
	})
	site := strings.TrimSuffix(g.MCPURL, "/mcp")
	clientID, secret := hydra.client(t, site+"/oauth2/callback", "openid email")
	startProcess(t, "oauth2-proxy", nil, proxyBin,
		"--http-address=127.0.0.1:"+fmt.Sprint(proxyPort),
		"--provider=oidc", "--oidc-issuer-url="+hydra.issuer,
		"--client-id="+clientID, "--client-secret="+secret, "--scope=openid email",
		"--redirect-url="+site+"/oauth2/callback",
		"--cookie-secret=0123456789abcdef0123456789abcdef", "--cookie-secure=false",
		"--email-domain=*", "--upstream=static://202", "--set-xauthrequest", "--reverse-proxy",
		"--skip-provider-button", "--code-challenge-method=S256")
	waitFor(t, "oauth2-proxy to answer", func() bool { return httpStatus(fmt.Sprintf("http://127.0.0.1:%d/ping", proxyPort)) == http.StatusOK })

	// Without a session the console answers nothing but the way to log in.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(site + "/console/api/catalogs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "/oauth2/start") {
		t.Errorf("the console's API without a session: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}

	br := browsertest.New(t, 1280, 800)
	br.Step("open the console", chromedp.Navigate(site+"/console/"))
	br.Until("the provider's login page shows", `!!document.querySelector('#username') && location.pathname === '/login'`)
	br.Step("log in with a wrong password", browsertest.Fill(`#username`, "ann"), browsertest.Fill(`#password`, "wrong"),
		chromedp.Click(chromedp.CSS(`#login`)))
	br.Until("the login page refuses it", `(document.querySelector('#error') || {}).textContent === 'Wrong user name or password.'`)
	br.Step("log in", browsertest.Fill(`#username`, "ann"), browsertest.Fill(`#password`, password),
		chromedp.Click(chromedp.CSS(`#login`)))
	br.Until("the console shows its tools", `location.pathname === '/console/' && !!document.querySelector('button[data-tool="get_user"]')`)

	br.NewOperation("live")
	br.Step("fill it in and save",
		browsertest.Fill(`#f-name`, "ann_user"),
		browsertest.Fill(`#f-description`, "saved by ann"),
		browsertest.Fill(`#f-config-url`, up.URL+"/users/{id}"),
		chromedp.SetValue(chromedp.CSS(`#message`), "through the provider"),
		chromedp.Click(chromedp.CSS(`#save`)))
	br.Until("it is saved", `(document.querySelector('#problems .ok') || {}).textContent === 'Saved as version 1.'`)
	br.Step("open the history", chromedp.Click(chromedp.CSS(`#show-history`)))
	br.Until("the history names the user", `(document.querySelector('#history tbody') || {}).textContent.includes('console:`+email+`')`)

	req, _ := http.NewRequest("GET", g.AdminURL+"/crank/catalogs/live/versions", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var vs struct {
		Versions []struct {
			Author  string `json:"author"`
			Message string `json:"message"`
		} `json:"versions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vs); err != nil || len(vs.Versions) != 1 {
		t.Fatalf("versions: %v %+v", err, vs)
	}
	if v := vs.Versions[0]; v.Author != "console:"+email || v.Message != "through the provider" {
		t.Errorf("version 1 by %q with %q, want console:%s with the page's message", v.Author, v.Message, email)
	}
}

// oidcTools builds Hydra (with SQLite, for its in-memory store) and
// oauth2-proxy from their modules in testdata/oidc, pinned there and
// fetched through the Go module proxy; Go's build cache keeps what was
// compiled, so a later run only links them. With a cold build cache that
// is about 3.5 CPU-minutes (Hydra 2.5 with SQLite's C, oauth2-proxy 1),
// some 5 minutes on two busy cores; warm, 10–20 seconds.
func oidcTools(t *testing.T) (hydra, proxy string) {
	t.Helper()
	bins, err := buildOIDCTools()
	if err != nil {
		t.Fatal(err)
	}
	return bins[0], bins[1]
}

var buildOIDCTools = sync.OnceValues(func() ([2]string, error) {
	dir, err := os.MkdirTemp("", "crank-e2e-oidc-")
	if err != nil {
		return [2]string{}, err
	}
	var out [2]string
	for i, b := range []struct{ module, pkg, name string }{
		{"hydra", "github.com/ory/hydra/v2", "hydra"},
		{"oauth2-proxy", "github.com/oauth2-proxy/oauth2-proxy/v7", "oauth2-proxy"},
	} {
		out[i] = filepath.Join(dir, b.name)
		args := []string{"build", "-o", out[i]}
		if b.name == "hydra" {
			args = append(args, "-tags", "sqlite,sqlite_omit_load_extension")
		}
		build := exec.Command("go", append(args, b.pkg)...)
		build.Dir = filepath.Join(repoRoot, "e2e", "testdata", "oidc", b.module)
		if msg, err := build.CombinedOutput(); err != nil {
			return out, fmt.Errorf("building %s: %v\n%s", b.name, err, msg)
		}
	}
	return out, nil
})

// startProcess runs bin with args (and env added) until the test ends,
// showing its output when the test failed.
func startProcess(t *testing.T, name string, env []string, bin string, args ...string) {
	t.Helper()
	log := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tail(log.String(), 4000))
		}
	})
}

func httpStatus(u string) int {
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hydraProvider is a running Hydra: its issuer (public URL) and admin URL.
type hydraProvider struct {
	issuer, admin string
}

// startHydra runs Hydra in memory on free loopback ports, sending the
// browser to loginURL's /login and /consent, with env added to its
// environment (such as TTL_ACCESS_TOKEN=5s), and waits until it is ready.
func startHydra(t *testing.T, bin, loginURL string, env ...string) *hydraProvider {
	t.Helper()
	pub, adm := freePort(t), freePort(t)
	h := &hydraProvider{issuer: fmt.Sprintf("http://127.0.0.1:%d", pub), admin: fmt.Sprintf("http://127.0.0.1:%d", adm)}
	startProcess(t, "hydra", append([]string{
		"DSN=memory", "SECRETS_SYSTEM=crank-e2e-hydra-system-secret-0123456789",
		"URLS_SELF_ISSUER=" + h.issuer, "URLS_LOGIN=" + loginURL + "/login", "URLS_CONSENT=" + loginURL + "/consent",
		"SERVE_PUBLIC_HOST=127.0.0.1", fmt.Sprintf("SERVE_PUBLIC_PORT=%d", pub),
		"SERVE_ADMIN_HOST=127.0.0.1", fmt.Sprintf("SERVE_ADMIN_PORT=%d", adm),
		"LOG_LEVEL=warn", "SQA_OPT_OUT=true",
	}, env...), bin, "serve", "all", "--dev", "--sqa-opt-out")
	deadline := time.Now().Add(2 * time.Minute) // the first start makes its keys
	for httpStatus(h.admin+"/health/ready") != http.StatusOK || httpStatus(h.issuer+"/.well-known/openid-configuration") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("hydra did not become ready within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return h
}

// client registers an OAuth client for the authorization code flow (and
// refresh tokens) redirecting to redirect, with scope, and answers its id
// and secret.
func (h *hydraProvider) client(t *testing.T, redirect, scope string) (id, secret string) {
	t.Helper()
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	hydraAdmin(t, "POST", h.admin+"/admin/clients", map[string]any{
		"client_name": "crank", "client_secret": "crank-client-secret",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"scope": scope, "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "client_secret_basic",
	}, &c)
	if c.ID == "" || c.Secret == "" {
		t.Fatalf("hydra registered the client as %+v", c)
	}
	return c.ID, c.Secret
}

// hydraAdmin calls Hydra's admin API with body as JSON, decoding its answer
// into out.
func hydraAdmin(t *testing.T, method, u string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, u, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("hydra %s %s: %v", method, u, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, out) != nil {
		t.Errorf("hydra %s %s: %s %s", method, u, resp.Status, b)
	}
}

// hydraLogin is the login and consent app of Hydra, which has no login
// page of its own: a form that checks a user's password and accepts the
// login through Hydra's admin API (remembering nothing, so every
// authorization asks), and a consent granted at once for the scopes
// asked, with the user's email in the ID token.
type hydraLogin struct {
	*httptest.Server
	admin string
	users map[string]hydraUser
}

// hydraUser is a user of the login app.
type hydraUser struct{ password, email string }

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<title>Log in</title>
<form method="post" action="/login">
<input type="hidden" name="challenge" value="{{.Challenge}}">
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<label>User <input id="username" name="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="login" type="submit">Log in</button>
</form>`))

func newHydraLogin(t *testing.T, users map[string]hydraUser) *hydraLogin {
	l := &hydraLogin{users: users}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var redirect struct {
			To string `json:"redirect_to"`
		}
		switch {
		case r.URL.Path == "/login" && r.Method == http.MethodGet:
			_ = loginPage.Execute(w, map[string]string{"Challenge": r.URL.Query().Get("login_challenge")})
			return
		case r.URL.Path == "/login" && r.Method == http.MethodPost:
			ch := r.PostFormValue("challenge")
			u, ok := l.users[r.PostFormValue("username")]
			if !ok || r.PostFormValue("password") != u.password {
				_ = loginPage.Execute(w, map[string]string{"Challenge": ch, "Error": "Wrong user name or password."})
				return
			}
			hydraAdmin(t, "PUT", l.admin+"/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(ch),
				map[string]any{"subject": r.PostFormValue("username")}, &redirect)
		case r.URL.Path == "/consent":
			ch := r.URL.Query().Get("consent_challenge")
			var consent struct {
				Subject  string   `json:"subject"`
				Scope    []string `json:"requested_scope"`
				Audience []string `json:"requested_access_token_audience"`
			}
			hydraAdmin(t, "GET", l.admin+"/admin/oauth2/auth/requests/consent?consent_challenge="+url.QueryEscape(ch), nil, &consent)
			hydraAdmin(t, "PUT", l.admin+"/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(ch),
				map[string]any{"grant_scope": consent.Scope, "grant_access_token_audience": consent.Audience,
					"session": map[string]any{"id_token": map[string]any{"email": l.users[consent.Subject].email, "email_verified": true}}}, &redirect)
		default:
			http.NotFound(w, r)
			return
		}
		if redirect.To == "" {
			http.Error(w, "hydra gave no redirect", http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, redirect.To, http.StatusFound)
	}))
	t.Cleanup(l.Close)
	return l
}
