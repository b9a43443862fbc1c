package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/crankmcp/crank/internal/oauthtest"
)

// authUpstream answers GET /users/{id}, DELETE /users/{id} and GET /me
// (the Authorization header it got), recording those headers.
type authUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newAuthUpstream(t testing.TB) *authUpstream {
	u := &authUpstream{}
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.mu.Unlock()
	}
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%s}`, r.PathValue("id"))
	})
	mux.HandleFunc("DELETE /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"deleted":%s}`, r.PathValue("id"))
	})
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"authorization": r.Header.Get("Authorization")})
	})
	u.Server = httptest.NewServer(mux)
	t.Cleanup(u.Close)
	return u
}

func (u *authUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

// authOps: get_user (read-only), drop_user (destructive), whoami (the
// upstream's token exchanged for the caller's at the issuer).
func authOps(up, issuer string) string {
	return fmt.Sprintf(`
operations:
  - name: get_user
    description: Fetch a user by id.
    adapter: rest
    annotations: {read_only: true}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%[1]s/users/{id}"}
  - name: drop_user
    description: Delete a user.
    adapter: rest
    annotations: {destructive: true}
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: DELETE, url: "%[1]s/users/{id}"}
  - name: whoami
    description: The caller as the upstream sees it.
    adapter: rest
    annotations: {read_only: true}
    upstream_auth:
      grant: token_exchange
      token_endpoint: %[2]s/token
      client_id: %[3]s
      client_secret: "{env.CRANK_E2E_CLIENT_SECRET}"
      audience: https://api.example.com
    config:
      method: GET
      url: "%[1]s/me"
      headers: {Authorization: "Bearer {crank.upstream_token}"}
`, up, issuer, oauthtest.ClientID)
}

// authHandler is the crank block of a gateway that accepts the issuer's
// tokens with scope mcp, and a policy: destructive tools for admins, ids
// under 1000.
func authHandler(issuer string) string {
	return `auth {
			resource {{mcp_url}}
			issuer ` + issuer + `
			scopes mcp
		}
		policy {
			rule admins-destroy ` + "`" + `(has(caller.claims.groups) && "admin" in caller.claims.groups) || !tool.annotations.destructive` + "`" + `
			rule small-ids ` + "`" + `!has(args.id) || args.id < 1000` + "`" + `
			rule has-subject ` + "`" + `caller.subject != ""` + "`" + `
		}`
}

// startAuthGateway starts a gateway whose endpoint is a resource server of
// is, with the well-known metadata paths routed to it.
func startAuthGateway(t *testing.T, is *oauthtest.Issuer, up *authUpstream) *gateway {
	return startGateway(t, gatewayOptions{Operations: authOps(up.URL, is.URL), Handler: authHandler(is.URL),
		Site: "@mcp path /mcp /.well-known/oauth-protected-resource /.well-known/oauth-protected-resource/*", Matcher: "@mcp",
		Env: []string{"CRANK_E2E_CLIENT_SECRET=" + oauthtest.ClientSecret}})
}

// connectBearer opens a go-sdk client session presenting token.
func (g *gateway) connectBearer(ctx context.Context, token string) *mcp.ClientSession {
	g.t.Helper()
	return g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
		HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token}}})
}

func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

// The gateway as an OAuth resource server: its metadata, and each bad
// token refused with the right status and challenge.
func TestAuthRefusesBadTokens(t *testing.T) {
	t.Parallel()
	is := oauthtest.New(t)
	up := newAuthUpstream(t)
	g := startAuthGateway(t, is, up)
	other := oauthtest.New(t)
	res := g.MCPURL
	meta := strings.Replace(g.MCPURL, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)

	for _, u := range []string{meta, strings.TrimSuffix(meta, "/mcp")} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || doc.Resource != res || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != is.URL ||
			strings.Join(doc.ScopesSupported, " ") != "mcp" {
			t.Errorf("metadata at %s: %+v %v", u, doc, err)
		}
	}

	challenge := `Bearer resource_metadata="` + meta + `", scope="mcp"`
	invalid := challenge + `, error="invalid_token", error_description=`
	good := oauthtest.Claims{"scope": "mcp"}
	with := func(c oauthtest.Claims) oauthtest.Claims {
		out := oauthtest.Claims{"scope": "mcp"}
		for k, v := range c {
			out[k] = v
		}
		return out
	}
	type refusal struct {
		name, token string
		status      int
		want        string
	}
	cases := []refusal{
		{"no token", "", 401, challenge},
		{"expired", is.Token(res, with(oauthtest.Claims{"exp": time.Now().Add(-10 * time.Minute).Unix()})), 401, invalid + `"the token has expired"`},
		{"not yet valid", is.Token(res, with(oauthtest.Claims{"nbf": time.Now().Add(10 * time.Minute).Unix()})), 401, invalid + `"the token is not valid yet"`},
		{"wrong audience", is.Token("https://elsewhere.example.com/mcp", good), 401, invalid + `"the token's audience is not this resource`},
		{"wrong issuer", other.Token(res, good), 401, invalid + `"the token's issuer is not accepted here"`},
		{"bad signature", is.TokenSignedByStranger(res, good), 401, invalid + `"the token's signature does not verify"`},
		{"missing scope", is.Token(res, oauthtest.Claims{"scope": "profile"}), 403,
			challenge + `, error="insufficient_scope", error_description="the token lacks the scope mcp"`},
		{"not a JWT", "garbage", 401, invalid + `"not a JWT access token`},
	}
	is.RotateUnpublished("k-new") // signs with a key it has not published yet
	cases = append(cases, refusal{"unknown kid", is.Token(res, good), 401,
		invalid + `"the token is signed with a key its issuer does not publish (kid 'k-new')"`})
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, g.MCPURL, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != c.status || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, resp.StatusCode, got, c.status, c.want)
		}
	}

	// Once the issuer publishes the new key, its tokens are accepted: the
	// unknown kid fetched the key set again.
	is.Publish()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var cs *mcp.ClientSession
	waitFor(t, "the new key accepted", func() bool {
		client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e", Version: "1"}, nil)
		s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
			HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + is.Token(res, good)}}}, nil)
		cs = s
		return err == nil
	})
	defer cs.Close()
	if got := toolNames(t, ctx, cs); got != "get_user,whoami" {
		t.Errorf("tools = %s", got)
	}
}

// Two callers with different claims see different tools and get the
// refusals the policy says; the upstream of whoami sees a token the
// issuer exchanged for the caller's, never the caller's own.
func TestAuthPolicyAndTokenExchange(t *testing.T) {
	t.Parallel()
	is := oauthtest.New(t)
	up := newAuthUpstream(t)
	g := startAuthGateway(t, is, up)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	annTok := is.Token(g.MCPURL, oauthtest.Claims{"scope": "mcp", "sub": "ann", "groups": []string{"admin"}})
	bobTok := is.Token(g.MCPURL, oauthtest.Claims{"scope": "mcp", "sub": "bob", "groups": []string{"staff"}})
	ann, bob := g.connectBearer(ctx, annTok), g.connectBearer(ctx, bobTok)

	if got := toolNames(t, ctx, ann); got != "drop_user,get_user,whoami" {
		t.Errorf("the admin sees %s", got)
	}
	if got := toolNames(t, ctx, bob); got != "get_user,whoami" {
		t.Errorf("staff sees %s", got)
	}
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "drop_user", Arguments: map[string]any{"id": 1}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "drop_user"`) {
		t.Errorf("staff calling drop_user: %v", err)
	}
	res, err := ann.CallTool(ctx, &mcp.CallToolParams{Name: "drop_user", Arguments: map[string]any{"id": 1}})
	if err != nil || res.IsError {
		t.Errorf("the admin calling drop_user: %v %+v", err, res)
	}
	res, err = bob.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 5000}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `denied by policy rule "small-ids"`) {
		t.Errorf("get_user 5000: %v %+v", err, res)
	}

	res, err = bob.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("whoami: %v %+v", err, res)
	}
	ex := is.Exchanges()
	if len(ex) != 1 || ex[0].SubjectToken != bobTok || ex[0].Audience != "https://api.example.com" {
		t.Fatalf("token requests = %+v", ex)
	}
	seen := up.seen()
	if last := seen[len(seen)-1]; last != "Bearer "+ex[0].Issued {
		t.Errorf("the upstream saw %q, want the exchanged token", last)
	}
	for _, a := range seen {
		if strings.Contains(a, annTok) || strings.Contains(a, bobTok) {
			t.Errorf("a client's token reached the upstream: %q", a)
		}
	}
	if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, ex[0].Issued) {
		t.Errorf("the upstream token is in the result: %s", text)
	}
	if claims := oauthtest.Decode(t, ex[0].Issued); claims["sub"] != "bob" {
		t.Errorf("exchanged token for %v", claims["sub"])
	}
	if strings.Contains(g.log.String(), bobTok) || strings.Contains(g.log.String(), ex[0].Issued) || strings.Contains(g.log.String(), oauthtest.ClientSecret) {
		t.Error("a token or the client secret is in the gateway's log")
	}
}

// The official clients discover the authorization server from the 401:
// the go-sdk's client-credentials handler and the TypeScript SDK's
// ClientCredentialsProvider read the protected resource metadata, get a
// token at the issuer and call tools with it.
func TestAuthClientsDiscover(t *testing.T) {
	t.Parallel()
	is := oauthtest.New(t)
	up := newAuthUpstream(t)
	g := startAuthGateway(t, is, up)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The go-sdk handler sends no resource parameter: the issuer gives
	// such requests the gateway as audience, as a per-client default.
	is.SetDefaultAudience(g.MCPURL)
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{Credentials: &oauthex.ClientCredentials{
		ClientID: oauthtest.ClientID, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: oauthtest.ClientSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	cs := g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: g.MCPURL, OAuthHandler: h})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil || res.IsError {
		t.Fatalf("go-sdk get_user: %v %+v", err, res)
	}
	if n := len(is.Exchanges()); n != 1 {
		t.Errorf("go-sdk: %d token requests", n)
	}

	requireTSClient(t)
	is.SetDefaultAudience("")
	out := runTSClient(t, g.MCPURL, `[
		{"op":"listTools"},
		{"op":"callTool","name":"get_user","arguments":{"id":2}}
	]`, "CRANK_E2E_CLIENT_ID="+oauthtest.ClientID, "CRANK_E2E_CLIENT_SECRET="+oauthtest.ClientSecret,
		"CRANK_E2E_SCOPE=mcp", "CRANK_E2E_ISSUER="+is.URL)
	var run struct {
		Steps []struct {
			OK     bool
			Result struct {
				Tools   []struct{ Name string }
				IsError bool
			}
			Error any
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 2 {
		t.Fatalf("TS client: %v %s", err, out)
	}
	if !run.Steps[0].OK || len(run.Steps[0].Result.Tools) != 2 || !run.Steps[1].OK || run.Steps[1].Result.IsError {
		t.Errorf("TS client: %s", out)
	}
	ex := is.Exchanges()
	if len(ex) != 2 || ex[1].GrantType != "client_credentials" || ex[1].Resource != g.MCPURL || ex[1].Scope != "mcp" {
		t.Errorf("the TS client's token request = %+v", ex[len(ex)-1])
	}
}

// Caddy's own authentication handler in front of crank: its user is the
// caller, for the policy and the ownership of what it starts.
func TestAuthCaddyBasicAuth(t *testing.T) {
	t.Parallel()
	up := newAuthUpstream(t)
	hash, err := exec.Command(crankBin, "hash-password", "--plaintext", "pw-of-ann").Output()
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{Operations: authOps(up.URL, "https://login.example.com"),
		Env:  []string{"CRANK_E2E_CLIENT_SECRET=x"},
		Site: "basic_auth {\n\t\tann " + strings.TrimSpace(string(hash)) + "\n\t\tbob " + strings.TrimSpace(string(hash)) + "\n\t}",
		Handler: `policy {
			rule ann-destroys ` + "`" + `caller.user == "ann" || !tool.annotations.destructive` + "`" + `
			rule users-only ` + "`" + `caller.id.startsWith("user:")` + "`" + `
		}`})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	basic := func(user string) *mcp.ClientSession {
		return g.connectTransport(ctx, nil, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
			HTTPClient: &http.Client{Transport: basicTransport{user, "pw-of-ann"}}})
	}
	if got := toolNames(t, ctx, basic("ann")); got != "drop_user,get_user,whoami" {
		t.Errorf("ann sees %s", got)
	}
	if got := toolNames(t, ctx, basic("bob")); got != "get_user,whoami" {
		t.Errorf("bob sees %s", got)
	}
	if resp, err := http.Post(g.MCPURL, "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without credentials: %v %v", err, resp)
	}
	// whoami exchanges a caller token, and a basic_auth caller has none.
	res, err := basic("bob").CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "needs the caller's access token") {
		t.Errorf("whoami behind basic_auth: %v %+v", err, res)
	}
}

type basicTransport struct{ user, password string }

func (b basicTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.SetBasicAuth(b.user, b.password)
	return http.DefaultTransport.RoundTrip(req)
}

// The policy governs an async_job's family as its operation: a caller
// who may not use the operation sees none of its tools and may call none
// of them, not even with another caller's job id.
func TestAuthPolicyGovernsFamilies(t *testing.T) {
	t.Parallel()
	is := oauthtest.New(t)
	up := newAuthUpstream(t)
	ops := authOps(up.URL, is.URL) + fmt.Sprintf(`
  - name: audit
    description: Audit a user in the background.
    adapter: rest
    mode: async_job
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%s/users/{id}"}
`, up.URL)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_E2E_CLIENT_SECRET=" + oauthtest.ClientSecret},
		Handler: `auth {
			resource {{mcp_url}}
			issuer ` + is.URL + `
		}
		policy {
			rule auditors ` + "`" + `tool.name != "audit" || (has(caller.claims.groups) && "auditors" in caller.claims.groups)` + "`" + `
		}`})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ann := g.connectBearer(ctx, is.Token(g.MCPURL, oauthtest.Claims{"sub": "ann", "groups": []string{"auditors"}}))
	bob := g.connectBearer(ctx, is.Token(g.MCPURL, oauthtest.Claims{"sub": "bob"}))
	if got := toolNames(t, ctx, ann); got != "audit_cancel,audit_result,audit_start,audit_status,drop_user,get_user,whoami" {
		t.Errorf("the auditor sees %s", got)
	}
	if got := toolNames(t, ctx, bob); got != "drop_user,get_user,whoami" {
		t.Errorf("bob sees %s", got)
	}
	res, err := ann.CallTool(ctx, &mcp.CallToolParams{Name: "audit_start", Arguments: map[string]any{"id": 4}})
	if err != nil || res.IsError {
		t.Fatalf("audit_start: %v %+v", err, res)
	}
	job, _ := res.StructuredContent.(map[string]any)["job_id"].(string)
	if job == "" {
		t.Fatalf("audit_start answered no job_id: %+v", res.StructuredContent)
	}
	for _, tool := range []string{"audit_start", "audit_status", "audit_result", "audit_cancel"} {
		_, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": 4, "job_id": job}})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown tool %q", tool)) {
			t.Errorf("bob calling %s: %v", tool, err)
		}
	}
	res, err = ann.CallTool(ctx, &mcp.CallToolParams{Name: "audit_status", Arguments: map[string]any{"job_id": job}})
	if err != nil || res.IsError {
		t.Errorf("the auditor's audit_status: %v %+v", err, res)
	}
}
