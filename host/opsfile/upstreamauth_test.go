package opsfile_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/opsfile"
)

func TestUpstreamAuthLoadErrors(t *testing.T) {
	op := func(extra string) string {
		return "operations: [{name: a, description: d, adapter: rest, " + extra + "}]"
	}
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	ac := `upstream_auth: {grant: authorization_code, client_id: gw`
	ua := `upstream_auth: {grant: token_exchange, token_endpoint: "https://login.example.com/token", client_id: gw, audience: api}`
	for _, c := range []struct{ yaml, want string }{
		{op(`config: {headers: {Authorization: "Bearer {crank.upstream_token}"}}`), `operation "a": /config: uses {crank.upstream_token} but the operation has no upstream_auth`},
		{op(ua + `, config: {url: "https://api.example.com"}`), `operation "a": /upstream_auth: the config never uses {crank.upstream_token}`},
		{op(`upstream_auth: {grant: password, token_endpoint: "https://l.example/t", client_id: gw, audience: api}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/grant: must be one of token_exchange, client_credentials, authorization_code`},
		{op(`upstream_auth: {grant: client_credentials, token_endpoint: "http://login.example.com/token", client_id: gw, audience: api}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/token_endpoint: token_endpoint:`},
		{op(`upstream_auth: {grant: client_credentials, token_endpoint: "https://l.example/t", client_id: gw}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/audience: audience: required`},
		{op(ac + `, metadata_url: "https://idp.example/.well-known/oauth-authorization-server"}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/token_key: token_key: required`},
		{op(ac + `, authorization_endpoint: "https://idp.example/auth", token_key: "` + key + `"}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/metadata_url: metadata_url: required, or both authorization_endpoint and token_endpoint`},
		{op(ac + `, metadata_url: "https://idp.example/m", token_key: "c2hvcnQ="}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/token_key: token_key: is 5 bytes, not 32`},
		{op(ac + `, metadata_url: "https://idp.example/m", token_key: "` + key + `", redirect_uri: "https://mcp.example/cb"}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/redirect_uri: redirect_uri: "https://mcp.example/cb" must end in /oauth/callback`},
		{op(ac + `, metadata_url: "https://idp.example/m", token_key: "` + key + `", browser_user: anyone}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/browser_user: must be one of required, unchecked`},
		{op(`upstream_auth: {grant: client_credentials, token_endpoint: "https://l.example/t", client_id: gw, audience: api, token_key: "` + key + `"}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/token_key: token_key: only for grant authorization_code`},
	} {
		_, err := opsfile.Parse("ops.yaml", []byte(c.yaml), opsfile.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.yaml, err, c.want)
		}
	}
}

// An authorization_code entry's grant is named after the entry unless it
// names one; its token keys are secrets.
func TestUpstreamAuthAuthorizationCode(t *testing.T) {
	t.Setenv("CRANK_TEST_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	f, err := opsfile.Parse("ops.yaml", []byte(`operations:
  - name: my_notes
    description: d
    adapter: rest
    upstream_auth: {grant: authorization_code, metadata_url: "https://idp.example/.well-known/oauth-authorization-server",
      client_id: gw, token_key: "{env.CRANK_TEST_KEY}", scopes: [notes.read]}
    config: {method: GET, url: "https://api.example/notes", headers: {Authorization: "Bearer {crank.upstream_token}"}}
`), opsfile.LoadOptions{Expand: func(s string) string {
		return strings.ReplaceAll(s, "{env.CRANK_TEST_KEY}", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	}})
	if err != nil {
		t.Fatal(err)
	}
	ua := f.Operations[0].UpstreamAuth
	if ua.Name != "my_notes" || ua.TokenKey != "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" || !ua.ChecksBrowserUser() {
		t.Errorf("upstream_auth %+v", ua)
	}
	found := false
	for _, s := range f.Secrets {
		found = found || s == ua.TokenKey
	}
	if !found {
		t.Error("the token key is not a secret")
	}
}
