package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oauth2-proxy/mockoidc"
)

// loginAt logs user in at a running OpenID provider with the
// authorization code flow (PKCE S256), the provider approving at once as
// mockoidc does, and returns the access token it issues.
func loginAt(t *testing.T, m *mockoidc.MockOIDC, user *mockoidc.MockUser) string {
	t.Helper()
	m.QueueUser(user)
	cfg := m.Config()
	verifier := "verifier-" + strings.Repeat("x", 40)
	challenge, err := mockoidc.GenerateCodeChallenge("S256", verifier)
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:1/callback"
	q := url.Values{"client_id": {cfg.ClientID}, "response_type": {"code"}, "scope": {"openid profile"},
		"redirect_uri": {redirect}, "state": {"s1"}, "nonce": {"n1"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(m.AuthorizationEndpoint() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	resp, err = http.PostForm(m.TokenEndpoint(), url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {redirect}, "client_id": {cfg.ClientID}, "client_secret": {cfg.ClientSecret}, "code_verifier": {verifier}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %s %v", resp.Status, err)
	}
	return tok.AccessToken
}

// A real OpenID provider (oauth2-proxy's mockoidc, a working OIDC server
// on loopback): the gateway discovers its keys from its issuer, and the
// access tokens two users got from it by the authorization code flow
// call tools, each seeing what the policy gives its subject.
func TestAuthWithOpenIDProvider(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	up := newAuthUpstream(t)
	// mockoidc's access tokens name its client as their audience and
	// carry no scope.
	g := startGateway(t, gatewayOptions{Operations: authOps(up.URL, m.Issuer()),
		Env: []string{"CRANK_E2E_CLIENT_SECRET=x"},
		Handler: fmt.Sprintf(`auth {
			resource {{mcp_url}}
			issuer %s
			audience %s
		}
		policy {
			rule ann-destroys `+"`"+`caller.subject == "ann" || !tool.annotations.destructive`+"`"+`
		}`, m.Issuer(), m.Config().ClientID)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ann := g.connectBearer(ctx, loginAt(t, m, &mockoidc.MockUser{Subject: "ann"}))
	bob := g.connectBearer(ctx, loginAt(t, m, &mockoidc.MockUser{Subject: "bob"}))
	if got := toolNames(t, ctx, ann); got != "drop_user,get_user,whoami" {
		t.Errorf("ann sees %s", got)
	}
	if got := toolNames(t, ctx, bob); got != "get_user,whoami" {
		t.Errorf("bob sees %s", got)
	}
	res, err := ann.CallTool(ctx, &mcp.CallToolParams{Name: "drop_user", Arguments: map[string]any{"id": 3}})
	if err != nil || res.IsError {
		t.Errorf("ann drop_user: %v %+v", err, res)
	}

	// A token the provider issues with its clock an hour ahead is not
	// valid yet here.
	m.FastForward(time.Hour)
	late := loginAt(t, m, &mockoidc.MockUser{Subject: "ann"})
	req, _ := http.NewRequest(http.MethodPost, g.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+late)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "the token is not valid yet") {
		t.Errorf("a token issued an hour ahead: %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
