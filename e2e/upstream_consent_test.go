package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/browsertest"
	"github.com/crankmcp/crank/internal/oauthtest"
	"github.com/crankmcp/crank/store/storetest"
)

// Per-user consent to a third-party API, brokered by Crank (upstream_auth
// grant authorization_code), against real parts: Ory Hydra is the
// "third party" (its own login and consent app below, short-lived access
// tokens, rotating refresh tokens, RFC 7009 revocation), the notes API
// accepts only Hydra's tokens with the notes.read scope (Hydra's own
// introspection decides) and answers the token's user's notes, the MCP
// client is the official TypeScript SDK v2 (@modelcontextprotocol/client,
// e2e/ts) in both generations, and each user's browser is a headless
// Chromium tab. Two replicas share one etcd: MCP calls go to replica A,
// the provider's redirect reaches replica B (through a front door, as a
// load balancer would send it), so every consent begins on A and ends on
// B, and B serves calls with the grants made there.
func TestUpstreamConsent(t *testing.T) {
	t.Parallel()
	browsertest.Chromium(t)
	requireNode(t, "ts", "@modelcontextprotocol/client", "ts-deps")
	hydraBin, _ := oidcTools(t)

	login := newHydraLogin(t, map[string]hydraUser{"alice": {"pw", "alice@example.com"}, "bob": {"pw", "bob@example.com"}})
	hydra := startHydra(t, hydraBin, login.URL, "TTL_ACCESS_TOKEN=6s", "TTL_REFRESH_TOKEN=1h")
	login.admin = hydra.admin
	notes := newNotesAPI(t, hydra.admin)
	tokens := newTokenRecorder(t, hydra.issuer+"/oauth2/token")

	// The front door the provider sends browsers back to: replica B.
	var back atomic.Pointer[url.URL]
	front := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(back.Load())
		r.Out.Host = r.In.Host
	}})
	t.Cleanup(front.Close)
	redirect := front.URL + "/mcp/oauth/callback"
	clientID, secret := hydra.client(t, redirect, "offline_access notes.read")

	is := oauthtest.New(t) // the MCP endpoint's own authorization server
	hash, err := exec.Command(crankBin, "hash-password", "--plaintext", "pw").Output()
	if err != nil {
		t.Fatal(err)
	}
	tokenKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	etcd := storetest.NewServer(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{
			Operations: fmt.Sprintf(`version: 1
operations:
  - name: my_notes
    description: Your notes, from the notes service, read as you.
    adapter: rest
    upstream_auth:
      grant: authorization_code
      name: notes
      metadata_url: %s/.well-known/openid-configuration
      token_endpoint: %s
      client_id: %s
      client_secret: "{env.NOTES_CLIENT_SECRET}"
      scopes: [offline_access, notes.read]
      redirect_uri: %s
      token_key: "{env.CRANK_TOKEN_KEY}"
    config:
      method: GET
      url: %s/notes
      headers: {Authorization: "Bearer {crank.upstream_token}"}
`, hydra.issuer, tokens.URL, clientID, redirect, notes.URL),
			Env:     []string{"NOTES_CLIENT_SECRET=" + secret, "CRANK_TOKEN_KEY=" + tokenKey},
			Matcher: "@mcp",
			Site: "@mcp path /mcp /mcp/oauth/callback\n\t@callback path /mcp/oauth/callback\n\tbasic_auth @callback {\n\t\talice " +
				strings.TrimSpace(string(hash)) + "\n\t\tbob " + strings.TrimSpace(string(hash)) + "\n\t}\n\tcrank_console /console* {\n\t\tloopback_without_login\n\t}",
			Handler: fmt.Sprintf("auth {\n\t\t\tresource {{mcp_url}}\n\t\t\tissuer %s\n\t\t\taudience crank-e2e\n\t\t}", is.URL),
			Crank:   fmt.Sprintf("etcd {\n\t\t\t%s\n\t\t\treplica_name %s\n\t\t}", etcd.Caddyfile(), name),
		}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	bu, _ := url.Parse(b.MCPURL)
	back.Store(&url.URL{Scheme: "http", Host: bu.Host})
	token := func(user string) string {
		return is.Token("crank-e2e", oauthtest.Claims{"sub": user, "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice, bob := newConsentBrowser(t, "alice"), newConsentBrowser(t, "bob")

	// alice, on the 2026-07-28 generation: an input_required result
	// carries the link, the SDK's handler takes it, the browser consents,
	// the SDK's retry returns alice's notes.
	run := startConsentClient(t, a.MCPURL, token("alice"), "my_notes", "{}", "2026")
	el := run.elicitation(t)
	if el.Mode != "url" || !strings.HasPrefix(el.URL, hydra.issuer+"/oauth2/auth?") || !strings.Contains(el.URL, "code_challenge_method=S256") {
		t.Fatalf("alice's elicitation: %+v", el)
	}
	callback := alice.consent(t, el.URL, "alice", http.StatusOK)
	res := run.result(t)
	if !strings.Contains(res.text(), "alice's first note") || strings.Contains(res.text(), "bob") {
		t.Fatalf("alice's call: %s", res.raw)
	}
	if res.ProtocolVersion != "2026-07-28" {
		t.Errorf("alice's client spoke %q", res.ProtocolVersion)
	}

	// The same callback again (a replay) is refused, the grant stands.
	alice.open(t, callback)
	alice.expect(t, "Not connected", "completed already")

	// bob, on an MCP session of 2025-11-25: an elicitation/create request
	// during the call, which goes on once bob has consented; his link
	// opened by alice is refused as another user's and stays bob's.
	run = startConsentClient(t, a.MCPURL, token("bob"), "my_notes", "{}", "2025")
	el = run.elicitation(t)
	alice.consent(t, el.URL, "alice", http.StatusForbidden)
	alice.expect(t, "Not connected", "started by another user")
	bob.consent(t, el.URL, "bob", http.StatusOK)
	res = run.result(t)
	if !strings.Contains(res.text(), "bob's only note") || strings.Contains(res.text(), "alice") {
		t.Fatalf("bob's call: %s", res.raw)
	}
	if res.Complete != el.ElicitationID {
		t.Errorf("bob's client was told elicitation %q complete, want %q", res.Complete, el.ElicitationID)
	}

	// Replica B serves alice with the grant made there, after her access
	// token expired: refreshed, without a new consent.
	seen := notes.tokensOf("alice")
	time.Sleep(7 * time.Second) // Hydra's TTL_ACCESS_TOKEN, 6s
	run = startConsentClient(t, b.MCPURL, token("alice"), "my_notes", "{}", "2025")
	res = run.result(t)
	if !strings.Contains(res.text(), "alice's first note") || len(res.Elicited) > 0 {
		t.Fatalf("alice after her token expired: %s", res.raw)
	}
	if now := notes.tokensOf("alice"); len(now) != len(seen)+1 {
		t.Errorf("the notes API saw alice's tokens %d then %d: want a fresh one", len(seen), len(now))
	}
	if n, _ := b.scrape().value("crank_upstream_grant_refreshes_total", "upstream=notes", "result=ok"); n < 1 {
		t.Error("replica B counted no refresh")
	}

	// bob revokes his grant (the tool): gone here, revoked at Hydra, and
	// his next call asks again.
	run = startConsentClient(t, a.MCPURL, token("bob"), "upstream_grants", `{"revoke":"notes"}`, "2025")
	res = run.result(t)
	if !strings.Contains(res.text(), `"revoked":true`) || !strings.Contains(res.text(), `"provider":"revoked"`) {
		t.Fatalf("bob's revocation: %s", res.raw)
	}
	for _, tok := range notes.tokensOf("bob") {
		if notes.active(t, tok) {
			t.Error("Hydra still accepts a token of bob's revoked grant")
		}
	}
	run = startConsentClient(t, a.MCPURL, token("bob"), "my_notes", "{}", "2025")
	el = run.elicitation(t)
	bob.consent(t, el.URL, "bob", http.StatusOK)
	if res = run.result(t); !strings.Contains(res.text(), "bob's only note") {
		t.Fatalf("bob after consenting again: %s", res.raw)
	}

	// A caller the endpoint's auth does not name has no grant of its
	// own: the endpoint without a token refuses it before any tool.
	if n, ok := b.scrape().value("crank_upstream_consents_total", "upstream=notes", "stage=refused"); !ok || n < 2 {
		t.Errorf("refused callbacks counted: %v", n)
	}
	// The console shows operators how many users connected the upstream,
	// never a token.
	page := getText(t, strings.TrimSuffix(a.MCPURL, "/mcp")+"/console/api/upstream-grants")
	if !strings.Contains(page, `"upstream": "notes"`) || !strings.Contains(page, `"users": 2`) {
		t.Errorf("the console's connected upstreams: %s", page)
	}
	metrics := []string{scrapeText(t, a), scrapeText(t, b), page}
	for _, g := range []*gateway{a, b} {
		g.stop()
	}

	// No token, refresh token or code in any log, etcd value, result,
	// metric or page.
	secrets := tokens.all()
	if len(secrets) < 6 {
		t.Fatalf("recorded %d tokens and codes", len(secrets))
	}
	haystack := append([]string{a.log.String(), b.log.String(), alice.texts(), bob.texts()}, metrics...)
	haystack = append(haystack, outputs.all()...)
	haystack = append(haystack, etcdValues(t, etcd)...)
	for _, h := range haystack {
		for _, s := range secrets {
			if strings.Contains(h, s) {
				t.Fatalf("a token appears in: %.300s", h)
			}
		}
	}
}

// notesAPI is the third-party API: it accepts a bearer token only when
// Hydra's introspection says it is active with the notes.read scope, and
// answers the notes of the token's subject.
type notesAPI struct {
	*httptest.Server
	admin string
	mu    sync.Mutex
	seen  map[string][]string // tokens by user, in order, without repeats
}

func newNotesAPI(t *testing.T, admin string) *notesAPI {
	n := &notesAPI{admin: admin, seen: map[string][]string{}}
	notes := map[string][]string{"alice": {"alice's first note", "alice's second note"}, "bob": {"bob's only note"}}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		in := n.introspect(t, tok)
		if !ok || !in.Active || !strings.Contains(" "+in.Scope+" ", " notes.read ") {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		n.mu.Lock()
		if l := n.seen[in.Sub]; len(l) == 0 || l[len(l)-1] != tok {
			n.seen[in.Sub] = append(l, tok)
		}
		n.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"user": in.Sub, "notes": notes[in.Sub]})
	}))
	t.Cleanup(n.Close)
	return n
}

type introspection struct {
	Active bool   `json:"active"`
	Sub    string `json:"sub"`
	Scope  string `json:"scope"`
}

func (n *notesAPI) introspect(t *testing.T, tok string) introspection {
	var in introspection
	resp, err := http.PostForm(n.admin+"/admin/oauth2/introspect", url.Values{"token": {tok}})
	if err != nil {
		t.Errorf("introspect: %v", err)
		return in
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&in)
	return in
}

func (n *notesAPI) active(t *testing.T, tok string) bool { return n.introspect(t, tok).Active }

func (n *notesAPI) tokensOf(user string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.seen[user]...)
}

// tokenRecorder passes requests to Hydra's token endpoint on and keeps
// every code, access token and refresh token that crosses it, for the
// test that none leaks.
type tokenRecorder struct {
	*httptest.Server
	mu     sync.Mutex
	tokens map[string]bool
}

func newTokenRecorder(t *testing.T, target string) *tokenRecorder {
	tr := &tokenRecorder{tokens: map[string]bool{}}
	u, _ := url.Parse(target)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.URL.Path = u.Path },
		ModifyResponse: func(resp *http.Response) error {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			var a map[string]any
			if json.Unmarshal(body, &a) == nil {
				for _, k := range []string{"access_token", "refresh_token", "id_token"} {
					if s, ok := a[k].(string); ok && s != "" {
						tr.add(s)
					}
				}
			}
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
			return err
		},
	}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		for _, k := range []string{"code", "refresh_token", "code_verifier"} {
			if v := r.PostForm.Get(k); v != "" {
				tr.add(v)
			}
		}
		r.Body = io.NopCloser(strings.NewReader(r.PostForm.Encode()))
		r.ContentLength = int64(len(r.PostForm.Encode()))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(tr.Close)
	return tr
}

func (tr *tokenRecorder) add(s string) {
	tr.mu.Lock()
	tr.tokens[s] = true
	tr.mu.Unlock()
}

func (tr *tokenRecorder) all() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for s := range tr.tokens {
		out = append(out, s)
	}
	return out
}

// consentBrowser is one user's browser: signed in to the gateway's
// callback route as the user (basic_auth, a header on every request),
// and to the provider through its login form.
type consentBrowser struct {
	*browsertest.Browser
	mu    sync.Mutex
	pages []string
}

func newConsentBrowser(t *testing.T, user string) *consentBrowser {
	b := &consentBrowser{Browser: browsertest.New(t, 1024, 768)}
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":pw"))
	b.Step("sign in to the gateway as "+user, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Basic " + basic}})
		return err
	}))
	return b
}

// consent opens a consent link, signs in at the provider as user, and
// waits for the gateway's callback page; it returns the callback's URL.
func (b *consentBrowser) consent(t *testing.T, link, user string, want int) string {
	t.Helper()
	b.open(t, link)
	b.Until("the provider's sign-in page shows", `!!document.querySelector('#username')`)
	b.Step("sign in as "+user, browsertest.Fill(`#username`, user), browsertest.Fill(`#password`, "pw"), chromedp.Click(chromedp.CSS(`#login`)))
	b.Until("the gateway's callback page shows", `location.pathname === '/mcp/oauth/callback' && !!document.querySelector('#outcome')`)
	outcome := "Not connected"
	if want == http.StatusOK {
		outcome = "Connected"
	}
	b.expect(t, outcome, "")
	href, err := chromedp.Run(b.Ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return href
}

func (b *consentBrowser) open(t *testing.T, link string) {
	t.Helper()
	b.Step("open "+link, chromedp.Navigate(link))
}

// expect checks the callback page's outcome and that its message holds
// part, keeping its text.
func (b *consentBrowser) expect(t *testing.T, outcome, part string) {
	t.Helper()
	b.Until("the callback page answers", `!!document.querySelector('#outcome')`)
	got, msg := b.Text(`#outcome`), b.Text(`#message`)
	b.mu.Lock()
	b.pages = append(b.pages, got+"\n"+msg)
	b.mu.Unlock()
	if got != outcome || !strings.Contains(msg, part) {
		t.Fatalf("callback page: %q %q, want %q with %q", got, msg, outcome, part)
	}
}

func (b *consentBrowser) texts() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.pages, "\n")
}

// consentRun is one run of e2e/ts/consent.mjs.
type consentRun struct {
	lines chan string
	done  chan struct{}
}

// consentElicitation is a URL elicitation the client was sent.
type consentElicitation struct {
	Mode, URL, ElicitationID, Message string
}

// consentResult is the end of a run: the call's result, what the client
// was asked on the way, and every line it printed.
type consentResult struct {
	Result          json.RawMessage `json:"result"`
	Error           json.RawMessage `json:"error"`
	ProtocolVersion string          `json:"protocolVersion"`
	Elicited        []consentElicitation
	Complete        string
	raw             string
}

func (r *consentResult) text() string { return string(r.Result) }

// outputs are every line the clients printed, for the test that no
// token leaks into a result.
var outputs consentOutputs

type consentOutputs struct {
	mu    sync.Mutex
	lines []string
}

func (o *consentOutputs) add(s string) {
	o.mu.Lock()
	o.lines = append(o.lines, s)
	o.mu.Unlock()
}

func (o *consentOutputs) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}

func startConsentClient(t *testing.T, mcpURL, token, tool, args, era string) *consentRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "consent.mjs"), mcpURL, token, tool, args, era)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &consentRun{lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() { _ = cmd.Wait(); cancel(); close(r.done) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// elicitation waits for the client's next URL elicitation.
func (r *consentRun) elicitation(t *testing.T) consentElicitation {
	t.Helper()
	for line := range r.lines {
		outputs.add(line)
		var v struct {
			Elicit *consentElicitation `json:"elicit"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Elicit != nil {
			return *v.Elicit
		}
		t.Fatalf("the client printed %s before any elicitation", line)
	}
	t.Fatal("the client ended without an elicitation")
	return consentElicitation{}
}

// result waits for the end of the run.
func (r *consentRun) result(t *testing.T) *consentResult {
	t.Helper()
	out := &consentResult{}
	for line := range r.lines {
		outputs.add(line)
		out.raw += line + "\n"
		var v struct {
			Elicit   *consentElicitation `json:"elicit"`
			Complete *string             `json:"complete"`
		}
		_ = json.Unmarshal([]byte(line), &v)
		switch {
		case v.Elicit != nil:
			out.Elicited = append(out.Elicited, *v.Elicit)
		case v.Complete != nil:
			out.Complete = *v.Complete
		default:
			if err := json.Unmarshal([]byte(line), out); err != nil {
				t.Fatalf("client output %q: %v", line, err)
			}
		}
	}
	<-r.done
	if len(out.Error) > 0 || out.Result == nil {
		t.Fatalf("the client's call failed: %s", out.raw)
	}
	return out
}

func scrapeText(t *testing.T, g *gateway) string { return getText(t, g.AdminURL+"/metrics") }

// getText is the body of a GET of u.
func getText(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// etcdValues are every key and value in the etcd server.
func etcdValues(t *testing.T, srv *storetest.Server) []string {
	t.Helper()
	c := srv.TLS()
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tlsc := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1"}
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), TLS: tlsc, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	grants := 0
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
		if strings.Contains(string(kv.Key), "upstream-grants/") {
			grants++
		}
	}
	if grants == 0 {
		t.Error("etcd holds no upstream grant")
	}
	return out
}
