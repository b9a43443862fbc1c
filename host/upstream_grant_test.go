package host_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store/storetest"
)

// grantProvider is a provider and its API for users' grants: it signs in
// whoever the test says (signedIn), issues rotating tokens for codes
// with PKCE, and its API answers the user of an active access token,
// 401 otherwise. The test revokes tokens behind the gateway's back, as a
// user does at the provider.
type grantProvider struct {
	*httptest.Server
	mu        sync.Mutex
	signedIn  string
	noRefresh bool // issue no refresh tokens
	refuseAll bool // the API refuses every token
	codes     map[string][2]string
	access    map[string]string // token → user
	refresh   map[string]string
	refreshes int
	tokens    []string // every token issued, for the test that none leaks
}

func newGrantProvider(t *testing.T) *grantProvider {
	p := &grantProvider{codes: map[string][2]string{}, access: map[string]string{}, refresh: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := p.issue("")
		p.mu.Lock()
		p.codes[code] = [2]string{p.signedIn, q.Get("code_challenge")}
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		p.mu.Lock()
		defer p.mu.Unlock()
		var user string
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			c, ok := p.codes[r.PostForm.Get("code")]
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c[1] {
				writeOAuthError(w, "invalid_grant")
				return
			}
			delete(p.codes, r.PostForm.Get("code"))
			user = c[0]
		case "refresh_token":
			var ok bool
			if user, ok = p.refresh[r.PostForm.Get("refresh_token")]; !ok {
				writeOAuthError(w, "invalid_grant")
				return
			}
			delete(p.refresh, r.PostForm.Get("refresh_token"))
			p.refreshes++
		}
		out := map[string]any{"access_token": p.issueLocked(user, p.access), "token_type": "Bearer", "expires_in": 3600, "scope": "read"}
		if !p.noRefresh {
			out["refresh_token"] = p.issueLocked(user, p.refresh)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.mu.Lock()
		user, ok := p.access[tok]
		ok = ok && !p.refuseAll
		p.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"user": user})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func writeOAuthError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (p *grantProvider) issue(user string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issueLocked(user, nil)
}

func (p *grantProvider) issueLocked(user string, into map[string]string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	if into != nil {
		into[tok] = user
		p.tokens = append(p.tokens, tok)
	}
	return tok
}

// revoke drops a user's access tokens, and with all their refresh
// tokens too.
func (p *grantProvider) revoke(user string, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range []map[string]string{p.access, p.refresh} {
		for k, u := range m {
			if u == user {
				delete(m, k)
			}
		}
		if !all {
			break
		}
	}
}

func (p *grantProvider) set(f func(p *grantProvider)) {
	p.mu.Lock()
	f(p)
	p.mu.Unlock()
}

func (p *grantProvider) refreshCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshes
}

const grantOps = `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: whoami
    description: The user as the API sees them.
    adapter: rest
    upstream_auth: &api
      grant: authorization_code
      name: api
      authorization_endpoint: PROVIDER/authorize
      token_endpoint: PROVIDER/token
      client_id: crank
      client_secret: client-secret-of-crank
      scopes: [read]
      token_key: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
    config: {method: GET, url: "PROVIDER/api", headers: {Authorization: "Bearer {crank.upstream_token}"}}
  - name: whoami_later
    description: The same, as a job.
    adapter: rest
    mode: async_job
    upstream_auth: *api
    config: {method: GET, url: "PROVIDER/api", headers: {Authorization: "Bearer {crank.upstream_token}"}}
`

// A token the upstream refuses (401: the user revoked it at the
// provider) does not fail every call until the user acts: the first
// refusal refreshes the grant and the call goes on; refused again, or
// with no refresh token to try, the grant ends and the call asks the
// user to consent again; a call renews at most twice (a refresh, a
// consent), so an upstream that refuses every token ends in its error,
// not a loop.
func TestUpstreamGrantRefusedToken(t *testing.T) {
	t.Parallel()
	p := newGrantProvider(t)
	_, st := storetest.Embedded(t)
	f, err := newFixtureWith(t, strings.ReplaceAll(grantOps, "PROVIDER", p.URL), host.SupervisorOptions{HealthInterval: -1},
		func(o *host.Options) { o.Store = st })
	if err != nil {
		t.Fatal(err)
	}
	h := f.h
	ctx := context.Background()
	var results []string
	callAs := func(user string, ask func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)) *host.Result {
		t.Helper()
		req := host.CallRequest{Tool: h.Tool("whoami"), WorkspaceID: "ws", User: user, ConsentRedirect: "http://127.0.0.1:1/mcp/oauth/callback"}
		if ask != nil {
			req.Ask, req.ClientCapabilities = ask, json.RawMessage(`{"elicitation":{"url":{}}}`)
		}
		res, err := h.Call(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res.Text+string(res.Structured))
		return res
	}
	// consent opens a link as user's browser would: the provider signs
	// them in and sends them to the gateway's callback.
	tryConsent := func(link, user string) error {
		p.set(func(p *grantProvider) { p.signedIn = user })
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(link)
		if err != nil {
			return err
		}
		resp.Body.Close()
		back, _ := url.Parse(resp.Header.Get("Location"))
		if out := h.CompleteConsent(ctx, host.ConsentCallback{State: back.Query().Get("state"), Code: back.Query().Get("code"), BrowserUser: user}); !out.OK {
			return fmt.Errorf("consent of %s: %+v", user, out)
		}
		return nil
	}
	consent := func(link, user string) {
		t.Helper()
		if err := tryConsent(link, user); err != nil {
			t.Fatal(err)
		}
	}
	// asked is the consent link of a call's result.
	asked := func(res *host.Result) string {
		t.Helper()
		i := strings.Index(res.Text, p.URL+"/authorize?")
		if !res.IsError || i < 0 {
			t.Fatalf("want a consent link, got %s %s", res.Text, res.Structured)
		}
		return strings.TrimSpace(res.Text[i:])
	}
	answers := func(res *host.Result, user string) {
		t.Helper()
		if res.IsError || !strings.Contains(string(res.Structured), `"user":"`+user+`"`) {
			t.Fatalf("want %s's answer, got %s %s", user, res.Text, res.Structured)
		}
	}

	consent(asked(callAs("ann", nil)), "ann")
	answers(callAs("ann", nil), "ann")

	// The access token revoked, the refresh token good: refreshed after
	// the 401, the call answers, no consent asked.
	p.revoke("ann", false)
	answers(callAs("ann", nil), "ann")
	if n := p.refreshCount(); n != 1 {
		t.Errorf("refreshes after a refused access token: %d, want 1", n)
	}

	// Both revoked: the refresh is refused, the grant ends, the call asks
	// again; once consented, it answers.
	p.revoke("ann", true)
	link := asked(callAs("ann", nil))
	if gl, err := h.ListGrants(ctx, "ws", "ann"); err != nil || len(gl) != 0 {
		t.Errorf("ann's grants after the provider refused them: %v %v", gl, err)
	}
	consent(link, "ann")
	answers(callAs("ann", nil), "ann")

	// An upstream that refuses every token, with a client that takes URL
	// elicitations: a refresh, then one consent within the call, then
	// the upstream's error: never a loop.
	p.set(func(p *grantProvider) { p.refuseAll = true })
	before, asks := p.refreshCount(), 0
	consented := make(chan error, 1)
	res := callAs("ann", func(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		asks++
		var el struct{ URL string }
		_ = json.Unmarshal(params, &el)
		go func() { consented <- tryConsent(el.URL, "ann") }()
		return json.RawMessage(`{"action":"accept"}`), nil
	})
	if err := <-consented; err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text, "401") || asks != 1 || p.refreshCount() != before+1 {
		t.Errorf("every token refused: %s; %d consents asked, %d refreshes", res.Text, asks, p.refreshCount()-before)
	}
	p.set(func(p *grantProvider) { p.refuseAll = false })
	answers(callAs("ann", nil), "ann")

	// A grant without a refresh token: a refused token ends it at once.
	p.set(func(p *grantProvider) { p.noRefresh = true })
	consent(asked(callAs("bea", nil)), "bea")
	answers(callAs("bea", nil), "bea")
	before = p.refreshCount()
	p.revoke("bea", true)
	consent(asked(callAs("bea", nil)), "bea")
	answers(callAs("bea", nil), "bea")
	if p.refreshCount() != before {
		t.Error("a grant without a refresh token was refreshed")
	}

	// A job's call, after the request that started it: its refused token
	// is refreshed likewise, and, refused again, its result is the link.
	p.revoke("ann", false)
	if res := jobResultAs(t, h, "ann"); res.IsError || !strings.Contains(res.Text, `"user":"ann"`) {
		t.Errorf("a job after a refused access token: %s", res.Text)
	}
	p.revoke("ann", true)
	if res := jobResultAs(t, h, "ann"); !res.IsError || !strings.Contains(res.Text, p.URL+"/authorize?") {
		t.Errorf("a job after a refused grant: %s", res.Text)
	}

	// No token in any result.
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range results {
		for _, tok := range p.tokens {
			if strings.Contains(r, tok) {
				t.Fatalf("a token in a result: %s", r)
			}
		}
	}
}

// jobResultAs runs whoami_later for user and returns its job's result.
func jobResultAs(t *testing.T, h *host.Host, user string) *host.Result {
	t.Helper()
	var asked atomic.Bool
	t.Cleanup(func() {
		if asked.Load() {
			t.Error("a job's call asked the request that started it, which had ended")
		}
	})
	call := func(tool, args string) *host.Result {
		res, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool(tool), Arguments: json.RawMessage(args),
			WorkspaceID: "ws", AgentID: "user:" + user, User: user, ConsentRedirect: "http://127.0.0.1:1/mcp/oauth/callback",
			ClientCapabilities: json.RawMessage(`{"elicitation":{"url":{}}}`),
			Ask: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
				asked.Store(true)
				return json.RawMessage(`{"action":"accept"}`), nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var start struct {
		ID string `json:"job_id"`
	}
	if res := call("whoami_later_start", `{}`); res.IsError || json.Unmarshal(res.Structured, &start) != nil {
		t.Fatalf("whoami_later_start: %s", res.Text)
	}
	waitFor(t, func() bool {
		var st struct{ Status string }
		_ = json.Unmarshal(call("whoami_later_status", `{"job_id":"`+start.ID+`"}`).Structured, &st)
		return st.Status != "running"
	})
	return call("whoami_later_result", `{"job_id":"`+start.ID+`"}`)
}
