package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"sync"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
)

// Per-caller upstream credentials (an operation's upstream_auth): before
// the call reaches the adapter, the host obtains a token for the upstream
// (package auth: an RFC 8693 token exchange of the caller's verified
// access token, or a client-credentials token of the gateway's own),
// cached until it expires, and puts it where the operation's config says
// with the placeholder {crank.upstream_token}, e.g.
//
//	upstream_auth:
//	  grant: token_exchange
//	  token_endpoint: https://login.example.com/oauth/token
//	  client_id: crank
//	  client_secret: "{env.CRANK_CLIENT_SECRET}"
//	  audience: https://api.example.com
//	config:
//	  headers:
//	    Authorization: "Bearer {crank.upstream_token}"
//
// The caller's own token (CallRequest.SubjectToken) never reaches an
// adapter. The upstream token does, in the config of this one call only;
// it is redacted from the call's result like a configured secret.

// upstreamSources are the token sources of a host's upstream_auth
// configs, one per distinct config, so operations of one upstream share
// their tokens.
type upstreamSources struct {
	mu      sync.Mutex
	sources map[string]*auth.Upstream
}

func (s *upstreamSources) of(cfg *auth.UpstreamConfig, rs *egress.Rules) (*auth.Upstream, error) {
	key, _ := json.Marshal([]any{cfg, rs.List()})
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.sources[string(key)]; u != nil {
		return u, nil
	}
	// A catalog's entry reaches its token endpoint under its rules.
	u, err := auth.NewUpstream(*cfg, auth.NewClient(rs))
	if err != nil {
		return nil, err
	}
	if s.sources == nil {
		s.sources = map[string]*auth.Upstream{}
	}
	s.sources[string(key)] = u
	return u, nil
}

// upstreamCredential is the upstream token of one call.
type upstreamCredential struct {
	token    string
	redactor *redact.Redactor
}

// obtainUpstreamToken sets req.upstream for a call of an operation with
// upstream_auth (the tool itself, or a family's start tool: the others
// do not reach the upstream with the caller's arguments), or returns the
// error result of a call whose token could not be obtained.
func (h *Host) obtainUpstreamToken(ctx context.Context, op *boundOp, req *CallRequest) *Result {
	base := op
	if op.base != nil {
		if op.Role != opsfile.RoleStart {
			return nil
		}
		base = op.base
	}
	if base.UpstreamAuth == nil {
		return nil
	}
	if ug := h.grants[base.UpstreamAuth.Name]; ug != nil && base.UpstreamAuth.Grant == auth.GrantAuthorizationCode {
		tok, res := h.userToken(ctx, op, ug, req) // upstream_grant.go
		if res != nil {
			return res
		}
		req.upstream = &upstreamCredential{token: tok, redactor: redact.New([]string{tok})}
		return nil
	}
	src, err := h.upstreams.of(base.UpstreamAuth, base.Egress())
	if err == nil {
		var tok string
		if tok, err = src.Token(ctx, req.SubjectToken); err == nil {
			req.upstream = &upstreamCredential{token: tok, redactor: redact.New([]string{tok})}
			return nil
		}
	}
	what := "could not be obtained"
	if errors.Is(err, auth.ErrNoSubjectToken) {
		what = "needs the caller's access token"
	}
	h.log.Warn("upstream credentials "+what, zap.String("tool", op.Name), zap.String("error", h.redact.String(err.Error())))
	return errorResult(h.redact.String(fmt.Sprintf("tool %q: the upstream's credentials (%s) %s: %v",
		op.Name, base.UpstreamAuth.Grant, what, err)))
}

// operation is the adapter's operation of a call: with the upstream
// token in its config, and excerpts long enough to redact it from.
func (c *upstreamCredential) operation(op sdk.Operation) sdk.Operation {
	if c == nil {
		return op
	}
	quoted, _ := json.Marshal(c.token)
	op.Config = bytes.ReplaceAll(op.Config, []byte(opsfile.UpstreamTokenPlaceholder), quoted[1:len(quoted)-1])
	op.ExcerptMargin = max(op.ExcerptMargin, redact.Chain{c.redactor}.Longest())
	return op
}

// redactString removes the upstream token from a call's text.
func (c *upstreamCredential) redactString(s string) string {
	if c == nil {
		return s
	}
	return c.redactor.String(s)
}

// redactJSON removes the upstream token from a JSON answer.
func (c *upstreamCredential) redactJSON(raw json.RawMessage) json.RawMessage {
	if c == nil {
		return raw
	}
	return c.redactor.JSON(raw)
}

// redactProtocol removes the upstream token from a JSON-RPC error.
func (c *upstreamCredential) redactProtocol(pe *sdk.ProtocolError) *sdk.ProtocolError {
	if c == nil {
		return pe
	}
	return redactProtocol(c.redactor, pe)
}

// redact removes the upstream token from a call's result.
func (c *upstreamCredential) redact(r *Result) *Result {
	if c == nil || r == nil {
		return r
	}
	return redactResult(c.redactor, r)
}
