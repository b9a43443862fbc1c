// Package auth is the authorization of a Crank endpoint, without Caddy
// or the MCP SDK: the OAuth 2.1 resource server that checks the bearer
// tokens of MCP requests (JWT access tokens against their issuers' JWKS,
// opaque tokens by introspection), the caller's identity it yields, the
// per-tool policy in CEL, and the per-caller credentials the host obtains
// for upstreams (token exchange, client credentials).
//
// Nothing here does I/O when it is built: issuer metadata and keys are
// fetched on first use and refreshed as needed, so a config can be
// checked (caddy validate) without reaching an authorization server.
package auth
