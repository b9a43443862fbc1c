package host

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// Users' grants at upstreams (upstream_auth grant authorization_code):
// a call acts as its user at a third-party API, with that user's own
// token, which the user granted once in a browser at the upstream's
// provider.
//
//   - The user is the OAuth subject of the endpoint's auth (a verified
//     bearer token's, CallRequest.User). A caller without one (anonymous,
//     or named only by an agent header or an MCP session) has no grant of
//     its own: its call is an isError result saying so.
//   - A user without a grant (or whose grant is gone, revoked, or lacks a
//     scope the config now asks) is asked to consent: a consent is
//     recorded in the store (pending, expiring after consentTTL, with the
//     PKCE verifier sealed), and the provider's authorization URL carries
//     a state sealed with the fleet's shared key (cursor.go, purpose
//     consentState) bound to the workspace, the user, the upstream, the
//     MCP session and the call. The URL reaches the user as a URL-mode
//     elicitation (MCP 2025-11-25, a client that declares it): once the
//     client accepts, the call waits for the consent and then goes on;
//     or, for a 2026-07-28 client that declares it, as an input-required
//     result whose retry waits likewise; or, for any other client, as an
//     isError result with the URL and what to do.
//   - The provider sends the browser back to the endpoint's callback
//     (CompleteConsent, on any replica): the state must open under the
//     fleet key with the consent's record, the consent must still be
//     pending (taken once by compare-and-swap: a replay is refused), and
//     the browser's authenticated user must be the consent's (unless the
//     config says browser_user: unchecked). The code is exchanged (PKCE)
//     and the tokens stored, sealed (auth.TokenKeys: envelope encryption
//     with the config's token_key) and bound to their record.
//   - A token near its expiry is refreshed before the call, by one
//     replica at a time per grant (the store's refresh lock; the others
//     wait for its result); a refresh token the provider refuses ends the
//     grant, and the user consents again.
//   - A user revokes a grant (the upstream_grants tool, the console): the
//     record goes, and the tokens are revoked at the provider where it
//     offers RFC 7009.
//
// Tokens never appear in a log, a result, a list, a metric or a store
// value in clear: the call's token is redacted from its result like any
// upstream token (upstream_auth.go).

// GrantStore is what the host keeps of users' grants (*store.Etcd is one).
type GrantStore interface {
	GetUpstreamGrant(ctx context.Context, workspace, upstream, user string) (*store.UpstreamGrant, error)
	PutUpstreamGrant(ctx context.Context, g store.UpstreamGrant, expect int64) (*store.UpstreamGrant, error)
	DeleteUpstreamGrant(ctx context.Context, workspace, upstream, user string, expect int64) (*store.UpstreamGrant, error)
	ListUpstreamGrants(ctx context.Context, workspace, user string) ([]*store.UpstreamGrant, error)
	CountUpstreamGrants(ctx context.Context, workspace string) (map[string]int, error)
	LockUpstreamGrant(ctx context.Context, workspace, upstream, user string, ttl time.Duration) (func(), bool, error)
	CreateUpstreamConsent(ctx context.Context, c store.UpstreamConsent) (*store.UpstreamConsent, error)
	GetUpstreamConsent(ctx context.Context, id string) (*store.UpstreamConsent, error)
	SetUpstreamConsent(ctx context.Context, c *store.UpstreamConsent, status, errMsg string) (*store.UpstreamConsent, error)
}

var _ GrantStore = (*store.Etcd)(nil)

const (
	// consentState is the purpose of a sealed consent state, and
	// consentInput the value prefix of a consent's request state.
	consentState = "consent"
	consentInput = "crank-consent:"
	// consentTTL is how long a user may take to consent.
	consentTTL = 10 * time.Minute
	// refreshLockTTL bounds a refresh in flight; refreshWait is how long a
	// call waits for another replica's.
	refreshLockTTL = 30 * time.Second
	refreshWait    = 15 * time.Second
	// consentPoll is how often a waiting call looks at its consent.
	consentPoll = 250 * time.Millisecond
	// consentRequestID names the consent in an input-required result.
	consentRequestID = "crank_upstream_consent"
)

// userGrant is an authorization_code upstream of the host: its config,
// its provider client and its token keys.
type userGrant struct {
	cfg  *auth.UpstreamConfig
	src  *auth.Upstream
	keys *auth.TokenKeys
}

// bindUserGrants gathers the host's authorization_code upstreams by name:
// entries that share a name must configure it alike.
func (h *Host) bindUserGrants(fail func(op *opsfile.Operation, ptr, reason string)) {
	first := map[string]*opsfile.Operation{}
	for _, op := range h.file.Operations {
		c := op.UpstreamAuth
		if c == nil || c.Grant != auth.GrantAuthorizationCode {
			continue
		}
		if prev := first[c.Name]; prev != nil {
			a, _ := json.Marshal(prev.UpstreamAuth)
			b, _ := json.Marshal(c)
			if string(a) != string(b) {
				fail(op, "/upstream_auth/name", fmt.Sprintf("upstream %q is configured differently by entry %q: entries that share an upstream's grants configure its upstream_auth alike", c.Name, prev.Name))
			}
			continue
		}
		first[c.Name] = op
		src, err := h.upstreams.of(c, op.Egress())
		if err != nil {
			fail(op, "/upstream_auth", err.Error())
			continue
		}
		keys, err := auth.NewTokenKeys(c.TokenKey, c.PreviousTokenKeys)
		if err != nil {
			fail(op, "/upstream_auth/token_key", err.Error())
			continue
		}
		if h.grants == nil {
			h.grants = map[string]*userGrant{}
		}
		h.grants[c.Name] = &userGrant{cfg: c, src: src, keys: keys}
	}
}

// grantStore is the host's store of grants, nil without one.
func (h *Host) grantStore() GrantStore {
	gs, _ := h.store.(GrantStore)
	return gs
}

// grantAAD binds a grant's sealed tokens to its record.
func grantAAD(workspace, upstream, user string) []byte {
	b, _ := json.Marshal([]string{"grant", workspace, upstream, user})
	return b
}

// consentAAD binds a consent's sealed verifier to it.
func consentAAD(c *store.UpstreamConsent) []byte {
	b, _ := json.Marshal([]string{"consent", c.WorkspaceID, c.Upstream, c.User, c.Call})
	return b
}

// UpstreamGrants names the host's authorization_code upstreams, sorted.
func (h *Host) UpstreamGrants() []string {
	var out []string
	for n := range h.grants {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// userToken obtains the upstream token of a call of an authorization_code
// upstream as its user: the grant's, refreshed when due, or, for a user
// without one, the consent (an elicitation, an input-required result or
// an error result with its URL: res).
func (h *Host) userToken(ctx context.Context, op *boundOp, ug *userGrant, req *CallRequest) (string, *Result) {
	name := ug.cfg.Name
	if req.User == "" {
		return "", classed(errorResult(fmt.Sprintf("tool %q acts as you at %s, so it needs to know who you are: "+
			"call it with an OAuth access token the endpoint accepts (its auth block); an anonymous caller, "+
			"or one named only by an agent header or an MCP session, has no grant of its own", op.Name, name)), OutcomeDenied)
	}
	gs := h.grantStore()
	if gs == nil {
		return "", classed(errorResult(fmt.Sprintf("tool %q: users' grants at %s need the gateway's store", op.Name, name)), OutcomeStoreUnavailable)
	}
	if req.Input != nil { // a 2026-07-28 retry after the consent's input-required result
		if id, ok := h.consentOfInput(ctx, op, *req); ok {
			req.Input = nil
			if res := h.awaitConsent(ctx, gs, op, name, id); res != nil {
				return "", res
			}
		}
	}
	tok, err := h.grantToken(ctx, gs, ug, req.WorkspaceID, req.User)
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, errNoGrant):
		return h.consent(ctx, gs, op, ug, req)
	}
	h.log.Warn("upstream grant unavailable", zap.String("tool", op.Name), zap.String("upstream", name), zap.String("error", h.redact.String(err.Error())))
	class := OutcomeUpstreamError
	if store.Retryable(err) {
		class = OutcomeStoreUnavailable
	}
	return "", classed(errorResult(h.redact.String(fmt.Sprintf("tool %q: your token for %s could not be obtained: %v", op.Name, name, err))), class)
}

// errNoGrant: the user has no usable grant and must consent.
var errNoGrant = errors.New("no grant")

// grantToken is the user's access token at the upstream: the stored one,
// or a refreshed one when it is due; errNoGrant when there is none, it
// lacks a configured scope, or the provider refused its refresh.
func (h *Host) grantToken(ctx context.Context, gs GrantStore, ug *userGrant, workspace, user string) (string, error) {
	name := ug.cfg.Name
	for attempt := 0; ; attempt++ {
		g, err := gs.GetUpstreamGrant(ctx, workspace, name, user)
		if errors.Is(err, store.ErrNotFound) {
			return "", errNoGrant
		}
		if err != nil {
			return "", err
		}
		toks, err := h.openGrant(ug, g)
		if err != nil {
			h.log.Warn("a user's upstream grant does not open; asking for consent again", zap.String("upstream", name), zap.Error(err))
			_, _ = gs.DeleteUpstreamGrant(ctx, workspace, name, user, g.Revision)
			return "", errNoGrant
		}
		if !grantedAll(toks.Scope, ug.cfg.Scopes) {
			return "", errNoGrant // insufficient: consent again for the scopes asked now
		}
		now := time.Now()
		if now.Before(toks.Renew) {
			return toks.Access, nil
		}
		if toks.Refresh == "" {
			if now.Before(toks.Expires) {
				return toks.Access, nil
			}
			return "", errNoGrant
		}
		unlock, ok, err := gs.LockUpstreamGrant(ctx, workspace, name, user, refreshLockTTL)
		if err != nil {
			return "", err
		}
		if !ok { // another replica refreshes it: wait for its grant
			if attempt > 0 || !h.awaitRefresh(ctx, gs, workspace, name, user, g.Revision) {
				if now.Before(toks.Expires) {
					return toks.Access, nil
				}
				return "", fmt.Errorf("a refresh of your token in flight elsewhere did not end within %s: retry the call", refreshWait)
			}
			continue
		}
		tok, err := h.refreshGrant(ctx, gs, ug, g, toks)
		unlock()
		if err != nil && !errors.Is(err, errNoGrant) && now.Before(toks.Expires) {
			h.log.Warn("refreshing a user's upstream token failed; using it until it expires", zap.String("upstream", name),
				zap.String("error", h.redact.String(err.Error())))
			return toks.Access, nil
		}
		return tok, err
	}
}

// openGrant opens a grant's tokens.
func (h *Host) openGrant(ug *userGrant, g *store.UpstreamGrant) (*auth.Tokens, error) {
	plain, _, err := ug.keys.Open(g.Sealed, grantAAD(g.WorkspaceID, g.Upstream, g.User))
	if err != nil {
		return nil, err
	}
	var t auth.Tokens
	if err := json.Unmarshal(plain, &t); err != nil || t.Access == "" {
		return nil, errors.New("the opened grant holds no tokens")
	}
	return &t, nil
}

// grantedAll reports whether scope (space-separated) holds every scope
// of want.
func grantedAll(scope string, want []string) bool {
	have := strings.Fields(scope)
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// awaitRefresh waits until the grant changes from revision rev (another
// replica's refresh stored it, or it went) or the refresh lock is free.
func (h *Host) awaitRefresh(ctx context.Context, gs GrantStore, workspace, upstream, user string, rev int64) bool {
	ctx, cancel := context.WithTimeout(ctx, refreshWait)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(consentPoll):
		}
		g, err := gs.GetUpstreamGrant(ctx, workspace, upstream, user)
		if errors.Is(err, store.ErrNotFound) || err == nil && g.Revision != rev {
			return true
		}
		if unlock, ok, err := gs.LockUpstreamGrant(ctx, workspace, upstream, user, time.Second); err == nil && ok {
			unlock() // the refresher is gone without a result: refresh here
			return true
		}
	}
}

// refreshGrant refreshes a grant whose refresh lock the caller holds and
// stores the new tokens (sealed again with the current key).
func (h *Host) refreshGrant(ctx context.Context, gs GrantStore, ug *userGrant, g *store.UpstreamGrant, toks *auth.Tokens) (string, error) {
	name := ug.cfg.Name
	if cur, err := gs.GetUpstreamGrant(ctx, g.WorkspaceID, name, g.User); err == nil && cur.Revision != g.Revision {
		// Refreshed meanwhile: read it again (the caller's next round).
		if t, err := h.openGrant(ug, cur); err == nil && time.Now().Before(t.Renew) {
			return t.Access, nil
		}
	}
	fresh, err := ug.src.Refresh(ctx, toks.Refresh)
	var refused *auth.RefusedError
	switch {
	case errors.As(err, &refused) && (refused.Code == "invalid_grant" || refused.Code == "unauthorized_client"):
		telemetry.UpstreamRefresh(name, "invalid")
		h.log.Info("the provider refused a user's refresh token; the user consents again", zap.String("upstream", name), zap.String("error", refused.Code))
		_, _ = gs.DeleteUpstreamGrant(ctx, g.WorkspaceID, name, g.User, g.Revision)
		return "", errNoGrant
	case err != nil:
		telemetry.UpstreamRefresh(name, "error")
		return "", err
	}
	if fresh.Scope == "" {
		fresh.Scope = toks.Scope
	}
	if _, err := h.storeGrant(ctx, gs, ug, g.WorkspaceID, g.User, fresh, g.Revision, g.CreatedAt); err != nil {
		telemetry.UpstreamRefresh(name, "error")
		return "", err
	}
	telemetry.UpstreamRefresh(name, "ok")
	return fresh.Access, nil
}

// storeGrant seals a user's tokens and stores them at revision expect.
func (h *Host) storeGrant(ctx context.Context, gs GrantStore, ug *userGrant, workspace, user string, t *auth.Tokens, expect int64, created time.Time) (*store.UpstreamGrant, error) {
	plain, _ := json.Marshal(t)
	sealed, err := ug.keys.Seal(plain, grantAAD(workspace, ug.cfg.Name, user))
	if err != nil {
		return nil, err
	}
	return gs.PutUpstreamGrant(ctx, store.UpstreamGrant{WorkspaceID: workspace, Upstream: ug.cfg.Name, User: user, Scope: t.Scope,
		Sealed: sealed, Expires: t.Expires, Renew: t.Renew, Refreshable: t.Refresh != "", CreatedAt: created}, expect)
}

// callDigest names a call in its consent: the tool and its arguments.
func callDigest(tool string, args json.RawMessage) string {
	sum := sha256.Sum256([]byte(tool + "\x00" + string(args)))
	return hex.EncodeToString(sum[:16])
}

// consentBind is what a consent's state is bound to.
func consentBind(c *store.UpstreamConsent) []string {
	return []string{c.WorkspaceID, c.User, c.Upstream, c.Session, c.Call}
}

// consent starts the user's consent and answers the call: by a URL-mode
// elicitation that the call waits out, by an input-required result, or by
// an error result with the URL.
func (h *Host) consent(ctx context.Context, gs GrantStore, op *boundOp, ug *userGrant, req *CallRequest) (string, *Result) {
	name := ug.cfg.Name
	redirect := ug.cfg.RedirectURI
	if redirect == "" {
		redirect = req.ConsentRedirect
	}
	if redirect == "" {
		return "", classed(errorResult(fmt.Sprintf("tool %q: consent to %s needs a redirect URI: set upstream_auth.redirect_uri, or give the endpoint an auth block (its resource followed by %s)",
			op.Name, name, auth.CallbackSuffix)), OutcomeError)
	}
	key, err := h.cursorKey(ctx)
	if err != nil {
		return "", classed(errorResult("the consent cannot be started now (the shared keys are unavailable): retry the call"), OutcomeStoreUnavailable)
	}
	verifier, challenge := auth.NewPKCE()
	c := store.UpstreamConsent{WorkspaceID: req.WorkspaceID, Upstream: name, User: req.User, Session: req.Session,
		Call: callDigest(op.Name, normalizeArguments(req.Arguments)), RedirectURI: redirect, ExpiresAt: time.Now().Add(consentTTL)}
	if c.Sealed, err = ug.keys.Seal([]byte(verifier), consentAAD(&c)); err != nil {
		return "", classed(errorResult(fmt.Sprintf("tool %q: the consent cannot be started: %v", op.Name, err)), OutcomeError)
	}
	rec, err := gs.CreateUpstreamConsent(ctx, c)
	if err != nil {
		return "", classed(errorResult(h.redact.String(fmt.Sprintf("tool %q: the consent cannot be started now: %v", op.Name, err))), OutcomeStoreUnavailable)
	}
	state := sealCursor(key, consentState, consentBind(rec), rec.ID+"."+strconv.FormatInt(rec.ExpiresAt.Unix(), 10))
	link, err := ug.src.AuthorizationURL(ctx, state, challenge, redirect)
	if err != nil {
		return "", classed(errorResult(h.redact.String(fmt.Sprintf("tool %q: the consent cannot be started: %v", op.Name, err))), OutcomeUpstreamUnreachable)
	}
	telemetry.UpstreamConsent(name, "started")
	host := ""
	if u, err := url.Parse(link); err == nil {
		host = u.Host
	}
	message := fmt.Sprintf("Tool %q acts as you at %s. Open the link, sign in at %s and allow access; the call then goes on. The link is yours alone and works once, for %s.",
		op.Name, name, host, consentTTL)
	elicit := map[string]any{"mode": "url", "elicitationId": rec.ID, "url": link, "message": message}
	switch {
	case req.Ask != nil && declaresURLElicitation(req.ClientCapabilities):
		params, _ := json.Marshal(elicit)
		answer, err := req.Ask(ctx, methodElicitation, params)
		if err != nil {
			return "", classed(errorResult(fmt.Sprintf("tool %q: the client did not take the consent link (%v). Open it yourself, then call the tool again: %s", op.Name, err, link)), OutcomeError)
		}
		var a struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(answer, &a)
		if a.Action != "accept" {
			return "", classed(errorResult(fmt.Sprintf("tool %q: you did not open the link to connect %s (%s); the call needs your consent there", op.Name, name, a.Action)), OutcomeDenied)
		}
		if res := h.awaitConsent(ctx, gs, op, name, rec.ID); res != nil {
			return "", res
		}
		if req.ElicitationComplete != nil {
			req.ElicitationComplete(ctx, rec.ID)
		}
		tok, err := h.grantToken(ctx, gs, ug, req.WorkspaceID, req.User)
		if err != nil {
			return "", classed(errorResult(h.redact.String(fmt.Sprintf("tool %q: your token for %s could not be read after the consent: %v", op.Name, name, err))), OutcomeError)
		}
		return tok, nil
	case req.InputRequired && declaresURLElicitation(req.ClientCapabilities):
		ir, _ := json.Marshal(map[string]any{consentRequestID: map[string]any{"method": methodElicitation, "params": elicit}})
		st, err := h.sealInput(ctx, inputBind(op, *req, normalizeArguments(req.Arguments)), consentInput+rec.ID)
		if err != nil {
			return "", classed(errorResult("the consent cannot be started now (the shared keys are unavailable): retry the call"), OutcomeStoreUnavailable)
		}
		return "", &Result{InputRequests: ir, RequestState: st}
	}
	return "", classed(errorResult(fmt.Sprintf("Tool %q acts as you at %s, and you have not connected it yet. "+
		"Open this link in your browser, sign in at %s and allow access, then call the tool again (the link is yours alone, works once, for %s):\n%s",
		op.Name, name, host, consentTTL, link)), OutcomeDenied)
}

// methodElicitation is the MCP request a consent link is sent with.
const methodElicitation = "elicitation/create"

// declaresURLElicitation reports whether a client's capabilities declare
// URL-mode elicitation.
func declaresURLElicitation(caps json.RawMessage) bool {
	var c struct {
		Elicitation *struct {
			URL json.RawMessage `json:"url"`
		} `json:"elicitation"`
	}
	return json.Unmarshal(caps, &c) == nil && c.Elicitation != nil && len(c.Elicitation.URL) > 0 && string(c.Elicitation.URL) != "null"
}

// consentOfInput is the consent a retry's request state names, when the
// host issued it for this call.
func (h *Host) consentOfInput(ctx context.Context, op *boundOp, req CallRequest) (string, bool) {
	key, err := h.cursorKey(ctx)
	if err != nil {
		return "", false
	}
	v, ok := openCursor(key, inputState, inputBind(op, req, normalizeArguments(req.Arguments)), req.Input.State)
	var in sealedInput
	if !ok || json.Unmarshal([]byte(v), &in) != nil || !strings.HasPrefix(in.State, consentInput) || time.Now().Unix() > in.Expires {
		return "", false
	}
	return strings.TrimPrefix(in.State, consentInput), true
}

// awaitConsent waits until the consent is done (nil), or answers why the
// call cannot go on.
func (h *Host) awaitConsent(ctx context.Context, gs GrantStore, op *boundOp, name, id string) *Result {
	for {
		c, err := gs.GetUpstreamConsent(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return classed(errorResult(fmt.Sprintf("tool %q: the consent to %s expired before it was completed: call the tool again for a new link", op.Name, name)), OutcomeTimeout)
		case err == nil && c.Status == store.ConsentDone:
			return nil
		case err == nil && c.Status == store.ConsentFailed:
			return classed(errorResult(h.redact.String(fmt.Sprintf("tool %q: the consent to %s failed: %s. Call the tool again for a new link", op.Name, name, c.Error))), OutcomeDenied)
		}
		select {
		case <-ctx.Done():
			return classed(errorResult(fmt.Sprintf("tool %q: the call ended while waiting for your consent to %s", op.Name, name)), OutcomeCancelled)
		case <-time.After(consentPoll):
		}
	}
}

// ConsentCallback is a consent's callback as the browser brought it: the
// query the provider sent (code, state, or error) and the browser's
// authenticated user ("" for none).
type ConsentCallback struct {
	State, Code, Error, ErrorDescription string
	BrowserUser                          string
}

// ConsentOutcome is what the callback page says: the upstream, and
// whether the grant is stored; Status is the HTTP status.
type ConsentOutcome struct {
	Upstream string
	OK       bool
	Status   int
	Message  string
}

// CompleteConsent serves a consent's callback on any replica: it checks
// the state (issued by the fleet for this consent, not expired, not used,
// its user the browser's), exchanges the code and stores the user's
// tokens. Its message never holds a token.
func (h *Host) CompleteConsent(ctx context.Context, cb ConsentCallback) ConsentOutcome {
	refuse := func(status int, upstream, format string, args ...any) ConsentOutcome {
		telemetry.UpstreamConsent(upstreamLabel(upstream), "refused")
		return ConsentOutcome{Upstream: upstream, Status: status, Message: fmt.Sprintf(format, args...)}
	}
	gs := h.grantStore()
	if gs == nil || len(h.grants) == 0 {
		return ConsentOutcome{Status: 404, Message: "this endpoint has no upstream to connect"}
	}
	id, ok := consentIDOf(cb.State)
	if !ok {
		return refuse(400, "", "this link's state is not one this gateway issued")
	}
	c, err := gs.GetUpstreamConsent(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return refuse(410, "", "this consent has expired or never existed: call the tool again for a new link")
	case err != nil:
		return ConsentOutcome{Status: 503, Message: "the gateway's store is unavailable: reload this page in a moment"}
	}
	key, err := h.cursorKey(ctx)
	if err != nil {
		return ConsentOutcome{Status: 503, Message: "the gateway's keys are unavailable: reload this page in a moment"}
	}
	if _, ok := openCursor(key, consentState, consentBind(c), cb.State); !ok {
		return refuse(400, c.Upstream, "this link's state is not one this gateway issued for this consent")
	}
	ug := h.grants[c.Upstream]
	if ug == nil {
		return refuse(404, c.Upstream, "upstream %q is no longer served here", c.Upstream)
	}
	if c.Status != store.ConsentPending {
		return refuse(409, c.Upstream, "this consent was completed already: a link works once")
	}
	if ug.cfg.ChecksBrowserUser() {
		switch cb.BrowserUser {
		case c.User:
		case "":
			return refuse(401, c.Upstream, "sign in to the gateway first: this page must know you are the user who asked (an authentication handler before crank on this route)")
		default:
			return refuse(403, c.Upstream, "this consent was started by another user: only they can complete it")
		}
	}
	taken, err := gs.SetUpstreamConsent(ctx, c, store.ConsentTaken, "")
	switch {
	case errors.Is(err, store.ErrConsentUsed):
		return refuse(409, c.Upstream, "this consent was completed already: a link works once")
	case errors.Is(err, store.ErrNotFound):
		return refuse(410, c.Upstream, "this consent has expired: call the tool again for a new link")
	case err != nil:
		return ConsentOutcome{Upstream: c.Upstream, Status: 503, Message: "the gateway's store is unavailable: reload this page in a moment"}
	}
	fail := func(status int, msg string) ConsentOutcome {
		_, _ = gs.SetUpstreamConsent(context.WithoutCancel(ctx), taken, store.ConsentFailed, msg)
		telemetry.UpstreamConsent(c.Upstream, "failed")
		return ConsentOutcome{Upstream: c.Upstream, Status: status, Message: msg}
	}
	if cb.Error != "" {
		msg := "the provider answered " + auth.Printable(cb.Error)
		if cb.ErrorDescription != "" {
			msg += " (" + auth.Printable(cb.ErrorDescription) + ")"
		}
		return fail(403, msg)
	}
	if cb.Code == "" {
		return fail(400, "the provider sent no code")
	}
	verifier, _, err := ug.keys.Open(c.Sealed, consentAAD(c))
	if err != nil {
		return fail(500, "the consent's verifier does not open: "+err.Error())
	}
	toks, err := ug.src.Exchange(ctx, cb.Code, string(verifier), c.RedirectURI)
	if err != nil {
		h.log.Warn("a consent's code exchange failed", zap.String("upstream", c.Upstream), zap.String("error", h.redact.String(err.Error())))
		return fail(502, h.redact.String("the provider refused the code: "+err.Error()))
	}
	if !grantedAll(toks.Scope, ug.cfg.Scopes) {
		return fail(403, fmt.Sprintf("the provider granted %q, short of the scopes asked (%s)", toks.Scope, strings.Join(ug.cfg.Scopes, " ")))
	}
	if _, err := h.storeGrant(ctx, gs, ug, c.WorkspaceID, c.User, toks, store.AnyVersion, time.Time{}); err != nil {
		return fail(503, "the grant could not be stored: "+err.Error())
	}
	if _, err := gs.SetUpstreamConsent(context.WithoutCancel(ctx), taken, store.ConsentDone, ""); err != nil {
		h.log.Warn("a completed consent could not be marked done", zap.String("upstream", c.Upstream), zap.Error(err))
	}
	telemetry.UpstreamConsent(c.Upstream, "completed")
	h.log.Info("a user connected an upstream", zap.String("upstream", c.Upstream), zap.String("user", c.User))
	return ConsentOutcome{Upstream: c.Upstream, OK: true, Status: 200,
		Message: fmt.Sprintf("%s is connected: you can close this window and return to your agent.", c.Upstream)}
}

// consentIDOf is the consent a sealed state names (its value, readable:
// sealing authenticates, it does not hide).
func consentIDOf(state string) (string, bool) {
	rest, ok := strings.CutPrefix(state, sealedCursorPrefix)
	if !ok {
		return "", false
	}
	v, _, ok := strings.Cut(rest, ".")
	b, err := base64.RawURLEncoding.Strict().DecodeString(v)
	if !ok || err != nil {
		return "", false
	}
	id, _, ok := strings.Cut(string(b), ".")
	return id, ok && strings.HasPrefix(id, store.UpstreamConsentIDPrefix)
}

// upstreamLabel bounds a metric label: "" (unknown) is "_unknown".
func upstreamLabel(s string) string {
	if s == "" {
		return "_unknown"
	}
	return s
}

// GrantInfo is a user's grant as lists show it: never a token.
type GrantInfo struct {
	Upstream    string    `json:"upstream"`
	User        string    `json:"user,omitempty"`
	Scope       string    `json:"scope,omitempty"`
	Refreshable bool      `json:"refreshable"`
	Expires     time.Time `json:"access_expires"`
	Granted     time.Time `json:"granted"`
	Updated     time.Time `json:"updated"`
}

// ListGrants lists a user's grants at the host's upstreams (user "":
// everybody's, for operators: the user is named, never a token).
func (h *Host) ListGrants(ctx context.Context, workspace, user string) ([]GrantInfo, error) {
	gs := h.grantStore()
	if gs == nil {
		return nil, errors.New("no store")
	}
	gl, err := gs.ListUpstreamGrants(ctx, workspace, user)
	if err != nil {
		return nil, err
	}
	out := []GrantInfo{}
	for _, g := range gl {
		out = append(out, GrantInfo{Upstream: g.Upstream, User: g.User, Scope: g.Scope, Refreshable: g.Refreshable,
			Expires: g.Expires, Granted: g.CreatedAt, Updated: g.UpdatedAt})
	}
	return out, nil
}

// RevokeOutcome says what a revocation did.
type RevokeOutcome struct {
	Upstream string `json:"upstream"`
	// Revoked: the grant was deleted (false: there was none).
	Revoked bool `json:"revoked"`
	// Provider: revoked at the provider too ("revoked"), not offered
	// there ("unsupported"), or failed there ("error: …").
	Provider string `json:"provider,omitempty"`
}

// RevokeGrant deletes a user's grant at an upstream and revokes its
// tokens at the provider where it offers RFC 7009.
func (h *Host) RevokeGrant(ctx context.Context, workspace, user, upstream string) (RevokeOutcome, error) {
	out := RevokeOutcome{Upstream: upstream}
	gs := h.grantStore()
	ug := h.grants[upstream]
	if gs == nil || ug == nil {
		return out, fmt.Errorf("%w: %q is not an upstream users connect to here (%s)", ErrUnknownUpstream, upstream, strings.Join(h.UpstreamGrants(), ", "))
	}
	g, err := gs.DeleteUpstreamGrant(ctx, workspace, upstream, user, store.AnyVersion)
	if errors.Is(err, store.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.Revoked = true
	telemetry.UpstreamRevocation(upstream, "gateway", "ok")
	toks, err := h.openGrant(ug, g)
	if err != nil {
		out.Provider = "error: the grant's tokens do not open"
		return out, nil
	}
	tok, hint := toks.Refresh, "refresh_token"
	if tok == "" {
		tok, hint = toks.Access, "access_token"
	}
	switch err := ug.src.Revoke(ctx, tok, hint); {
	case errors.Is(err, auth.ErrNoRevocation):
		out.Provider = "unsupported"
		telemetry.UpstreamRevocation(upstream, "provider", "unsupported")
	case err != nil:
		out.Provider = "error: " + h.redact.String(redactString(err.Error(), toks))
		telemetry.UpstreamRevocation(upstream, "provider", "error")
	default:
		out.Provider = "revoked"
		telemetry.UpstreamRevocation(upstream, "provider", "ok")
	}
	h.log.Info("a user revoked an upstream grant", zap.String("upstream", upstream), zap.String("user", user), zap.String("provider", out.Provider))
	return out, nil
}

// redactString removes a grant's tokens from s.
func redactString(s string, t *auth.Tokens) string {
	for _, tok := range []string{t.Access, t.Refresh} {
		if tok != "" {
			s = strings.ReplaceAll(s, tok, "[REDACTED]")
		}
	}
	return s
}

// ErrUnknownUpstream: a revocation names no authorization_code upstream
// of the host.
var ErrUnknownUpstream = errors.New("unknown upstream")

// GrantsToolName is the tool through which users see and revoke their
// own grants, served by a host with authorization_code upstreams.
const GrantsToolName = "upstream_grants"

// addGrantsTool adds the grants tool to tab when the host has
// authorization_code upstreams.
func (h *Host) addGrantsTool(tab *toolTable, fail func(op *opsfile.Operation, ptr, reason string)) {
	names := h.UpstreamGrants()
	if len(names) == 0 {
		return
	}
	if prev := tab.ops[GrantsToolName]; prev != nil {
		fail(prev.Operation, "/name", fmt.Sprintf("%q is the tool through which users see and revoke their upstream grants (upstream_auth authorization_code): name this one otherwise", GrantsToolName))
		return
	}
	enum, _ := json.Marshal(names)
	readOnly, open := false, true
	op := &opsfile.Operation{Name: GrantsToolName, Title: "Your connected upstreams",
		Description: "Lists the upstreams you have connected (granted this gateway access to, as you), with the scopes granted; " +
			"never a token. With revoke, disconnects one: the gateway forgets your tokens and revokes them at the provider where it can. " +
			"The next call of a tool of that upstream asks you to connect it again.",
		Mode: opsfile.ModeUnary, Timeout: 30 * time.Second,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"grants":{"type":"array","items":{"type":"object"}},"revoked":{"type":"object"}},"required":["grants"]}`),
		Annotations:  &opsfile.Annotations{ReadOnly: &readOnly, OpenWorld: &open}}
	if err := op.SetInputSchema(json.RawMessage(`{"type":"object","properties":{"revoke":{"type":"string","enum":` + string(enum) +
		`,"description":"The upstream to disconnect."}}}`)); err != nil {
		fail(op, "/input_schema", err.Error())
		return
	}
	b := &boundOp{Operation: op, builtin: h.callGrantsTool}
	tab.ops[op.Name] = b
	tab.list = append(tab.list, op)
}

// callGrantsTool serves the grants tool for the caller's own grants.
func (h *Host) callGrantsTool(ctx context.Context, req CallRequest, args json.RawMessage) *Result {
	if req.User == "" {
		return classed(errorResult("upstream grants are per user: call with an OAuth access token the endpoint accepts (its auth block)"), OutcomeDenied)
	}
	var in struct {
		Revoke string `json:"revoke"`
	}
	_ = json.Unmarshal(args, &in)
	out := map[string]any{}
	if in.Revoke != "" {
		r, err := h.RevokeGrant(ctx, req.WorkspaceID, req.User, in.Revoke)
		if err != nil {
			return classed(errorResult(h.redact.String(err.Error())), OutcomeStoreUnavailable)
		}
		out["revoked"] = r
	}
	gl, err := h.ListGrants(ctx, req.WorkspaceID, req.User)
	if err != nil {
		return classed(errorResult(h.redact.String("your grants cannot be listed now: "+err.Error())), OutcomeStoreUnavailable)
	}
	for i := range gl {
		gl[i].User = ""
	}
	out["grants"] = gl
	b, _ := json.Marshal(out)
	return &Result{Structured: b, Text: string(b)}
}
