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
	ua := `upstream_auth: {grant: token_exchange, token_endpoint: "https://login.example.com/token", client_id: gw, audience: api}`
	for _, c := range []struct{ yaml, want string }{
		{op(`config: {headers: {Authorization: "Bearer {crank.upstream_token}"}}`), `operation "a": /config: uses {crank.upstream_token} but the operation has no upstream_auth`},
		{op(ua + `, config: {url: "https://api.example.com"}`), `operation "a": /upstream_auth: the config never uses {crank.upstream_token}`},
		{op(`upstream_auth: {grant: password, token_endpoint: "https://l.example/t", client_id: gw, audience: api}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/grant: grant: "password" is not one of`},
		{op(`upstream_auth: {grant: client_credentials, token_endpoint: "http://login.example.com/token", client_id: gw, audience: api}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/token_endpoint: token_endpoint:`},
		{op(`upstream_auth: {grant: client_credentials, token_endpoint: "https://l.example/t", client_id: gw}, config: {a: "{crank.upstream_token}"}`),
			`/upstream_auth/audience: audience: required`},
	} {
		_, err := opsfile.Parse("ops.yaml", []byte(c.yaml), opsfile.LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.yaml, err, c.want)
		}
	}
}
