package opsfile

import (
	"bytes"
	"fmt"

	"github.com/crankmcp/crank/host/auth"
)

// UpstreamTokenPlaceholder is where an operation's config takes the token
// its upstream_auth obtains.
const UpstreamTokenPlaceholder = "{crank.upstream_token}"

// parseUpstreamAuth checks an operation's upstream_auth, expands its
// placeholders (the client secret is a secret) and checks that the config
// uses the token, and that a config using it has an upstream_auth.
func parseUpstreamAuth(cfg *auth.UpstreamConfig, op *Operation, expand func(string) string, secrets map[string]bool,
	fail func(ptr, format string, args ...any)) {
	uses := bytes.Contains(op.Config, []byte(UpstreamTokenPlaceholder))
	if cfg == nil {
		if uses {
			fail("/config", "uses %s but the operation has no upstream_auth to obtain it", UpstreamTokenPlaceholder)
		}
		return
	}
	c := *cfg
	c.PreviousTokenKeys = append([]string(nil), c.PreviousTokenKeys...)
	plain := []struct {
		field string
		v     *string
	}{{"token_endpoint", &c.TokenEndpoint}, {"client_id", &c.ClientID}, {"audience", &c.Audience}, {"resource", &c.Resource},
		{"metadata_url", &c.MetadataURL}, {"authorization_endpoint", &c.AuthorizationEndpoint},
		{"revocation_endpoint", &c.RevocationEndpoint}, {"redirect_uri", &c.RedirectURI}}
	secret := []struct {
		field string
		v     *string
	}{{"client_secret", &c.ClientSecret}, {"token_key", &c.TokenKey}}
	for i := range c.PreviousTokenKeys {
		secret = append(secret, struct {
			field string
			v     *string
		}{fmt.Sprintf("previous_token_keys/%d", i), &c.PreviousTokenKeys[i]})
	}
	if a := op.allow; a != nil {
		for _, f := range append(plain, secret...) {
			if ph := a.refusedPlaceholder(*f.v); ph != "" {
				fail("/upstream_auth/"+f.field, "placeholder %s is not allowed in a catalog entry: %s", ph, a.placeholderRule())
			}
		}
	}
	for _, f := range plain {
		*f.v, _ = expandString(*f.v, expand, nil)
	}
	for _, f := range secret {
		if *f.v != "" {
			*f.v = expand(*f.v)
			addSecret(secrets, *f.v)
		}
	}
	if c.ClientSecret != "" {
		addSecret(secrets, c.ClientID+":"+c.ClientSecret)
	}
	if c.Grant == auth.GrantAuthorizationCode && c.Name == "" {
		c.Name = op.Name // an entry's own grant, shared by the tools it expands to
	}
	if err := c.Check(); err != nil {
		fail("/upstream_auth/"+authFieldOf(err), "%v", err)
		return
	}
	if !uses {
		fail("/upstream_auth", "the config never uses %s: put it where the upstream expects its token, e.g. headers: {Authorization: \"Bearer %s\"}",
			UpstreamTokenPlaceholder, UpstreamTokenPlaceholder)
		return
	}
	op.UpstreamAuth = &c
}

// authFieldOf is the field an auth config error starts with ("grant: ...").
func authFieldOf(err error) string {
	msg := err.Error()
	for i := 0; i < len(msg); i++ {
		if msg[i] == ':' {
			return msg[:i]
		}
	}
	return msg
}
