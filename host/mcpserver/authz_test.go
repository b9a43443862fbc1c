package mcpserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/internal/oauthtest"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// authEndpoint serves tasksOps on st behind a resource server that
// accepts is's tokens for the endpoint's URL with scope "mcp", and the
// policy of rules. It returns the endpoint's URL and its audit records.
func authEndpoint(t *testing.T, st *store.Etcd, upURL string, is *oauthtest.Issuer, rules []auth.Rule, mutate ...func(*Options)) (string, *observer.ObservedLogs) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String() + "/mcp"
	rs, err := auth.NewResourceServer(auth.ResourceConfig{Resource: url, Issuers: []auth.IssuerConfig{{Issuer: is.Issuer()}},
		Scopes: []string{"mcp"}, MinKeyRefresh: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := auth.CompilePolicy(rules)
	if err != nil {
		t.Fatal(err)
	}
	core, audit := observer.New(zap.InfoLevel)
	hst := newTestHost(t, fmt.Sprintf(tasksOps, upURL), st, zap.New(core))
	opts := testOptions("default")
	opts.Auth, opts.Policy = rs, policy
	for _, m := range mutate {
		m(&opts)
	}
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(hst, st)
	srv.Config.Handler = ep
	srv.Start()
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	return url, audit
}

// bearer is a raw client presenting token.
func bearer(t *testing.T, url, token string) *mcptest.Client {
	return &mcptest.Client{T: t, URL: url, Header: http.Header{"Authorization": {"Bearer " + token}}}
}

// post sends an initialize with the Authorization header auth ("" for
// none) and returns the response.
func post(t *testing.T, url, authz string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// The endpoint is a resource server: its metadata, 401 with the
// challenge, 403 for a missing scope, 503 while the issuer is down, and a
// token's user as the caller, bound to the MCP session it opened.
func TestEndpointRequiresBearerTokens(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewReports(t)
	is := oauthtest.New(t)
	url, audit := authEndpoint(t, st, up.URL, is, nil)
	meta := strings.Replace(url, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)

	resp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"resource":"`+url+`"`) || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("metadata: %d %s", resp.StatusCode, body)
	}

	challenge := `Bearer resource_metadata="` + meta + `", scope="mcp"`
	for _, c := range []struct {
		name, authz string
		status      int
		header      string
	}{
		{"no token", "", 401, challenge},
		{"expired", "Bearer " + is.Token(url, oauthtest.Claims{"scope": "mcp", "exp": time.Now().Add(-time.Hour).Unix()}), 401,
			challenge + `, error="invalid_token", error_description="the token has expired"`},
		{"another resource's", "Bearer " + is.Token("https://api.example.com", oauthtest.Claims{"scope": "mcp"}), 401, challenge + `, error="invalid_token"`},
		{"missing scope", "Bearer " + is.Token(url, oauthtest.Claims{"scope": "profile"}), 403,
			challenge + `, error="insufficient_scope", error_description="the token lacks the scope mcp"`},
		{"basic", "Basic YTpi", 400, ""},
	} {
		resp := post(t, url, c.authz)
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != c.status || !strings.HasPrefix(got, c.header) || (c.header == "") != (got == "") {
			t.Errorf("%s: %d %q, want %d %q", c.name, resp.StatusCode, got, c.status, c.header)
		}
	}

	alice := bearer(t, url, is.Token(url, oauthtest.Claims{"scope": "mcp"}))
	alice.Initialize(tasksProtocolVersion)
	task := alice.StartTask("report_start", map[string]any{"n": 5})
	up.Await(t, "arrived", "5")
	mcptest.WaitUntil(t, "the audit record of the start", func() bool {
		for _, e := range audit.All() {
			if m := e.ContextMap(); m["id"] == task.TaskID && m["agent"] == "user:alice" {
				return true
			}
		}
		return false
	})

	// Bob's token on Alice's session: another caller's session is
	// unknown to him.
	thief := bearer(t, url, is.Token(url, oauthtest.Claims{"scope": "mcp", "sub": "bob"}))
	thief.Session, thief.Version = alice.Session, alice.Version
	if r := thief.Call("tasks/get", map[string]any{"taskId": task.TaskID}); r.HTTPStatus != http.StatusNotFound {
		t.Errorf("another user's token on the session: %d %s", r.HTTPStatus, r.Body)
	}
	up.Release("5")

	// The issuer unreachable: 503 with Retry-After, then it recovers.
	down := oauthtest.New(t)
	url2, _ := authEndpoint(t, st, up.URL, down, nil)
	tok := down.Token(url2, oauthtest.Claims{"scope": "mcp"})
	down.SetDown(true)
	if resp := post(t, url2, "Bearer "+tok); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("issuer down: %d", resp.StatusCode)
	}
	down.SetDown(false)
	mcptest.WaitUntil(t, "the token accepted once the issuer is back", func() bool { return post(t, url2, "Bearer "+tok).StatusCode == 200 })
}

// policyRules: report is for analysts; get_user only for ids under 100;
// only authenticated users call anything.
var policyRules = []auth.Rule{
	{Name: "analysts-report", Expression: `tool.name != "report" || (has(caller.claims.groups) && "analysts" in caller.claims.groups)`},
	{Name: "small-ids", Expression: `!has(args.id) || args.id < 100`},
	{Name: "users-only", Expression: `caller.id.startsWith("user:")`},
}

// Two callers with different claims see different tools and get the
// refusals the policy says, for family tools and tasks too.
func TestPolicyPerCaller(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	is := oauthtest.New(t)
	url, _ := authEndpoint(t, st, up.URL, is, policyRules)
	analyst := is.Token(url, oauthtest.Claims{"scope": "mcp", "sub": "ann", "groups": []string{"analysts"}})
	staff := is.Token(url, oauthtest.Claims{"scope": "mcp", "sub": "bob", "groups": []string{"staff"}})

	tools := func(c *mcptest.Client) []string {
		var res struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		c.OK("tools/list", nil, &res)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	ann := bearer(t, url, analyst)
	ann.Initialize(tasksProtocolVersion)
	bob := bearer(t, url, staff)
	bob.Initialize(tasksProtocolVersion)
	if got := strings.Join(tools(ann), ","); got != "get_user,report_cancel,report_result,report_start,report_status" {
		t.Errorf("the analyst sees %s", got)
	}
	if got := strings.Join(tools(bob), ","); got != "get_user" {
		t.Errorf("staff sees %s", got)
	}

	// A hidden tool is an unknown tool, family tools and task calls too.
	for _, tool := range []string{"report_start", "report_status"} {
		bob.Fails("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"n": 1, "job_id": "job_x"}}, -32602, fmt.Sprintf("unknown tool %q", tool))
	}
	bob.Fails("tools/call", map[string]any{"name": "report_start", "arguments": map[string]any{"n": 1}, "task": map[string]any{}}, -32602, "unknown tool")

	// Arguments a rule refuses: an isError result naming the rule,
	// counted as a denied call.
	denied := deniedCalls(t, "get_user")
	if res := callTool(bob, "get_user", map[string]any{"id": 500}); !res.IsError || !strings.Contains(res.Text(), `denied by policy rule "small-ids"`) {
		t.Errorf("get_user 500 = %+v", res)
	}
	if n := deniedCalls(t, "get_user"); n < denied+1 {
		t.Errorf("crank_tool_calls_total{tool=get_user,outcome=denied} went from %v to %v", denied, n)
	}
	if res := callTool(bob, "get_user", map[string]any{"id": 7}); res.IsError {
		t.Errorf("get_user 7 = %+v", res)
	}

	// The analyst's task is hidden from her too once her token no longer
	// says she is one: tasks/get, result and cancel say not found and
	// tasks/list leaves it out.
	task := ann.StartTask("report_start", map[string]any{"n": 3})
	demoted := bearer(t, url, is.Token(url, oauthtest.Claims{"scope": "mcp", "sub": "ann", "groups": []string{"staff"}}))
	demoted.Session, demoted.Version = ann.Session, ann.Version
	demoted.SkipIDs(1000)
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		demoted.Fails(m, map[string]any{"taskId": task.TaskID}, -32602, "not found")
	}
	var list struct {
		Tasks []mcptest.Task `json:"tasks"`
	}
	demoted.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("tasks/list of the demoted caller = %+v", list.Tasks)
	}
	ann.OK("tasks/list", nil, &list)
	if len(list.Tasks) != 1 {
		t.Errorf("tasks/list of the analyst = %+v", list.Tasks)
	}
	if got := ann.GetTask(task.TaskID); got.TaskID != task.TaskID {
		t.Errorf("tasks/get of the analyst = %+v", got)
	}
}

// A policy without authentication still governs: a session caller is no
// "user:" and sees nothing.
func TestPolicyWithoutAuthentication(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	p, err := auth.CompilePolicy(policyRules)
	if err != nil {
		t.Fatal(err)
	}
	_, url, _ := newTaskEndpoint(t, st, up.URL, func(o *Options) { o.Policy = p })
	anon := &mcptest.Client{T: t, URL: url}
	anon.Initialize(tasksProtocolVersion)
	var res struct {
		Tools []any `json:"tools"`
	}
	anon.OK("tools/list", nil, &res)
	if len(res.Tools) != 0 {
		t.Errorf("an anonymous session sees %d tools", len(res.Tools))
	}
	user := &mcptest.Client{T: t, URL: url, Header: http.Header{"X-Agent": {"user:eve"}}}
	user.Initialize(tasksProtocolVersion)
	user.OK("tools/list", nil, &res)
	if len(res.Tools) != 0 { // the agent header is "header:user:eve", never a user
		t.Errorf("an agent header claiming a user sees %d tools", len(res.Tools))
	}
}

// A verified token's user is the caller ahead of the user an
// authentication handler in front set.
func TestTokenUserAheadOfAuthenticatedUser(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	is := oauthtest.New(t)
	url, _ := authEndpoint(t, st, up.URL, is, []auth.Rule{{Name: "alice-only", Expression: `caller.id == "user:alice" && caller.user == "alice"`}},
		func(o *Options) {
			o.AuthenticatedUser = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
		})
	count := func(sub, handlerUser string) int {
		c := bearer(t, url, is.Token(url, oauthtest.Claims{"scope": "mcp", "sub": sub}))
		c.Header.Set("X-Test-User", handlerUser)
		c.Initialize(tasksProtocolVersion)
		var res struct {
			Tools []any `json:"tools"`
		}
		c.OK("tools/list", nil, &res)
		return len(res.Tools)
	}
	if n := count("alice", "bob"); n == 0 {
		t.Error("alice's token behind a handler that says bob: no tools")
	}
	if n := count("bob", "alice"); n != 0 {
		t.Errorf("bob's token behind a handler that says alice: %d tools", n)
	}
}

// deniedCalls reads crank_tool_calls_total{tool, outcome="denied"}.
func deniedCalls(t *testing.T, tool string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := telemetry.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "crank_tool_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["outcome"] == "denied" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
