package mcpserver

import (
	"context"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/auth"
)

// Authorization: with Options.Auth the endpoint is an OAuth 2.1 resource
// server (MCP authorization, RFC 9728): every MCP request needs a bearer
// token its authorization servers issued for this resource.
//
//   - GET /.well-known/oauth-protected-resource/<endpoint path> (and the
//     root form) is its protected resource metadata, served to anyone
//     when Caddy routes those paths to the handler.
//   - A request without a token gets 401 with WWW-Authenticate naming
//     the metadata and the scopes; an invalid one 401 with
//     error="invalid_token"; a token without the required scopes 403 with
//     error="insufficient_scope"; a token that cannot be checked because
//     its authorization server is unreachable 503 with Retry-After.
//   - A valid token's user becomes the caller ("user:<user>", caller.go),
//     ahead of an authentication handler's user, and its identity rides in
//     the SDK's TokenInfo. An MCP session belongs to the caller that
//     opened it: another user's token on it gets 404, as for an unknown
//     session (sessions.go).
//
// The token itself never leaves the gateway: the host only exchanges it
// for an upstream token where an operation says so (RFC 8693).

// identityKey is the TokenInfo.Extra key of the verified token's
// *auth.Identity.
const identityKey = "crank.identity"

// serveMetadata serves the protected resource metadata and reports
// whether r asked for it.
func (ep *Endpoint) serveMetadata(w http.ResponseWriter, r *http.Request) bool {
	return ep.auth != nil && ep.auth.ServeMetadata(w, r)
}

// authorized serves r with next once its bearer token checks out, with
// the token's TokenInfo in its context; otherwise it answers the refusal.
func (ep *Endpoint) authorized(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	id, aerr := ep.auth.Authenticate(r.Context(), r)
	if aerr != nil {
		ep.refuseToken(w, aerr)
		return
	}
	ti := &sdkauth.TokenInfo{UserID: id.User, Scopes: id.Scopes, Extra: map[string]any{identityKey: id}}
	// The SDK keeps TokenInfo under a context key of its own, which only
	// its middleware sets: it is handed the identity checked above.
	sdkauth.RequireBearerToken(func(context.Context, string, *http.Request) (*sdkauth.TokenInfo, error) {
		return ti, nil
	}, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next).ServeHTTP(w, r)
}

// refuseToken answers a refused token: its status, the WWW-Authenticate
// challenge (401 and 403) or Retry-After (503), and a JSON-RPC error.
func (ep *Endpoint) refuseToken(w http.ResponseWriter, e *auth.Error) {
	switch e.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "5")
		ep.logger.Warn("bearer token not checked: authorization server unavailable", zap.String("reason", e.Description))
		writeJSONRPCError(w, e.Status, -32000, "the bearer token could not be checked: "+e.Description+"; retry shortly",
			map[string]any{"retryable": true})
		return
	case http.StatusUnauthorized, http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", ep.auth.Challenge(e))
	}
	ep.logger.Debug("bearer token refused", zap.Int("status", e.Status), zap.String("error", e.Code), zap.String("reason", e.Description))
	writeJSONRPCError(w, e.Status, -32001, e.Error(), nil)
}

// tokenIdentity is the verified token's identity of a request, nil
// without one.
func tokenIdentity(extra *mcp.RequestExtra) *auth.Identity {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	id, _ := extra.TokenInfo.Extra[identityKey].(*auth.Identity)
	return id
}
