package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/internal/telemetry"
)

// Rate limits (host/ratelimit): the endpoint's own (Options.RateLimits,
// the handler's) and those of the operations its host serves (the files'
// and the catalog's rate_limits), all of which must pass. A receiving
// middleware inside the policy (a hidden or refused call spends nothing,
// and is not revealed by a limit's refusal) and outside tasks (a
// task-augmented call is limited too) applies them to every tools/call,
// on the hot path and the SDK's alike, and call_tool applies them to the
// call it makes. A refused call is a JSON-RPC error of code
// ratelimit.CodeRateLimited whose data names the limit and the seconds to
// wait; it costs no etcd request. The limits that apply to a tool are
// resolved once per tool and host (limitTable).
//
// Requests without a session are budgeted too, per client, before the SDK
// reads them (throttled): a session's requests are bounded by the
// sessions a client may hold (max_mcp_sessions_per_client, limits.go), a
// request served without one — every request of the sessionless protocol
// (2026-07-28, generation.go) and every request of a stateless endpoint —
// holds nothing, so each client gets a budget of them instead: the
// built-in limit max_sessionless_requests_per_client, refilled at
// MaxSessionlessRequestsPerClient a second up to twice that. Past it a
// request gets 429 with Retry-After and the same JSON-RPC error.
//
// A client is ratelimit.ClientOf: its verified user (a bearer token's, or
// the one an authentication handler in front of the endpoint verified),
// else its agent header (set by a trusted proxy), else its address
// (clientOf: Caddy's client IP, an IPv6 address as its /64).

// DefaultMaxSessionlessRequestsPerClient is far above what a busy agent
// host sends without a session from one address. Measured: 8 go-sdk
// clients calling in a loop through the hot path reach about 1,300 to
// 1,650 calls a second on a 2-core machine (issue 49's run;
// TestSessionlessDefaultFitsAgentHost logs its own), and the earlier
// default of 1,000 refused them; at 10,000 (bursts of 20,000) they stay
// well inside it on larger machines too, and a flood from one client is
// still bounded on each replica.
const DefaultMaxSessionlessRequestsPerClient = 10_000

// optMaxSessionlessRequests is the limit's Caddyfile option, and its name
// in refusals and metrics.
const optMaxSessionlessRequests = "max_sessionless_requests_per_client"

// sessionlessBudget is the budget of requests without a session of rate a
// second per client, nil for none.
func sessionlessBudget(rate int) *ratelimit.Budget {
	if rate <= 0 {
		return nil
	}
	return ratelimit.NewRequestBudget(ratelimit.Limit{Name: optMaxSessionlessRequests, Rate: strconv.Itoa(rate) + "/s",
		Burst: 2 * rate, Per: ratelimit.PerClient})
}

// limitCaller is who sends a request as the limits key it: agent is the
// agent it runs as ("" when not known yet).
func (ep *Endpoint) limitCaller(h http.Header, ti *sdkauth.TokenInfo, agent string) *ratelimit.Caller {
	c := &ratelimit.Caller{Workspace: ep.workspace, Agent: agent}
	switch {
	case ti != nil && ti.UserID != "":
		c.User = ti.UserID
	case h != nil:
		c.User = h.Get(authUserHeader)
	}
	if h != nil {
		c.Address = h.Get(clientHeader)
	}
	c.Client = ratelimit.ClientOf(ep.agentOf(h, ti), c.Address)
	return c
}

// markClient hands the client's address key of a POST on to what counts
// per client: the session middleware (a session it opens), the rate
// limits, and the per-client quotas of the sessions and jobs a call
// starts (plan.callRequest).
func (ep *Endpoint) markClient(r *http.Request) {
	if r.Method == http.MethodPost {
		r.Header.Set(clientHeader, ep.clientOf(r))
	}
}

// sessionlessRequest reports whether a POST is served without a session.
func (ep *Endpoint) sessionlessRequest(r *http.Request, p *peeked) bool {
	return !ep.transport.stateful || ep.generation(r, p) == genSessionless
}

// throttled answers a request served without a session whose client spent
// its budget, and reports whether it did.
func (ep *Endpoint) throttled(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if ep.sessionless == nil || r.Method != http.MethodPost || !ep.sessionlessRequest(r, p) {
		return false
	}
	ref := ep.sessionless.Admit(ep.limitCaller(r.Header, sdkauth.TokenInfoFromContext(r.Context()), ""))
	if ref == nil {
		return false
	}
	telemetry.RateLimited(ref.Limit, ref.Scope)
	refuseLimited(w, ref)
	return true
}

// refuseLimited answers a request a limit refused: 429, Retry-After and
// the JSON-RPC error of the refusal.
func refuseLimited(w http.ResponseWriter, ref *ratelimit.Refusal) {
	w.Header().Set("Retry-After", strconv.Itoa(ref.RetryAfterSeconds()))
	writeJSONRPCError(w, http.StatusTooManyRequests, ratelimit.CodeRateLimited, ref.Error(), ref.Data())
}

// limitedError is the JSON-RPC error of a call a limit refused.
func limitedError(ref *ratelimit.Refusal) *jsonrpc.Error {
	data, _ := json.Marshal(ref.Data())
	return &jsonrpc.Error{Code: ratelimit.CodeRateLimited, Message: ref.Error(), Data: data}
}

// limitTable is the budgets of the limits of the endpoint and of its
// active host, and which of them apply to each tool (resolved on first
// use).
type limitTable struct {
	h       *host.Host
	budgets []*ratelimit.Budget
	fleet   bool // one of them is fleet-wide
	byTool  sync.Map
}

// setLimits makes the limits of h (the host made active, or whose tools
// changed) and of the endpoint the ones calls meet; it releases the
// budgets of the previous table.
func (ep *Endpoint) setLimits(h *host.Host) {
	t := &limitTable{h: h}
	var ls []ratelimit.Limit
	ls = append(ls, ep.rateLimits...)
	if h != nil && h.File() != nil {
		ls = append(ls, h.File().RateLimits...)
	}
	seen := map[string]bool{}
	for _, l := range ls {
		if id := l.ID(); !seen[id] {
			seen[id] = true
			t.budgets = append(t.budgets, ep.budgets.Acquire(l))
			t.fleet = t.fleet || l.Fleet
		}
	}
	old := ep.limitTab.Swap(t)
	if old != nil {
		for _, b := range old.budgets {
			ep.budgets.Release(b)
		}
	}
	if t.fleet {
		ep.coordinate()
	}
}

// coordinate has the fleet-wide budgets coordinated through the store,
// when it is a ratelimit.Fleet.
func (ep *Endpoint) coordinate() {
	if stp := ep.store.Load(); stp != nil {
		if f, ok := (*stp).(ratelimit.Fleet); ok {
			ep.budgets.Coordinate(f, ep.logger)
		}
	}
}

// releaseLimits gives back the budgets of the table (Close).
func (ep *Endpoint) releaseLimits() {
	if old := ep.limitTab.Swap(nil); old != nil {
		for _, b := range old.budgets {
			ep.budgets.Release(b)
		}
	}
}

// limitsOf is the budgets of the limits that apply to the call of p's
// tool.
func (ep *Endpoint) limitsOf(p *plan) ratelimit.Set {
	t := ep.limitTab.Load()
	if t == nil || len(t.budgets) == 0 || !p.tool.Served() {
		return nil
	}
	name := p.tool.Name()
	if s, ok := t.byTool.Load(name); ok {
		return s.(ratelimit.Set)
	}
	tool := ratelimit.Tool{Name: name, Upstreams: p.tool.Upstreams()}
	if op := p.tool.Operation(); op != nil && op.Family != nil {
		tool.Family = p.tool.Base().Name
	}
	if st := p.view; st != nil {
		if vt := st.byHost[name]; vt != nil {
			tool.InToolset = func(set string) bool { return slices.Contains(vt.toolsets, set) }
		} else {
			tool.InToolset = func(string) bool { return false }
		}
	}
	var s ratelimit.Set
	for _, b := range t.budgets {
		if l := b.Limit(); l.Applies(tool) {
			s = append(s, b)
		}
	}
	t.byTool.Store(name, s)
	return s
}

// admit spends one call of every limit that applies to the call of p, or
// returns the JSON-RPC error that refuses it (counted and logged as the
// call's refusal).
func (ep *Endpoint) admit(p *plan, extra *mcp.RequestExtra) error {
	s := ep.limitsOf(p)
	if len(s) == 0 {
		return nil
	}
	var c *ratelimit.Caller
	if extra != nil {
		c = ep.limitCaller(extra.Header, extra.TokenInfo, p.scope.AgentID)
	} else {
		c = ep.limitCaller(nil, nil, p.scope.AgentID)
	}
	ref := s.Admit(c)
	if ref == nil {
		return nil
	}
	telemetry.RateLimited(ref.Limit, ref.Scope)
	ep.logger.Debug("tool call refused by a rate limit", zap.String("tool", p.tool.Name()), zap.String("limit", ref.Limit),
		zap.String("agent", p.scope.AgentID))
	p.h.RecordRefused(p.callRequest(nil), host.OutcomeRateLimited, ref.Limit)
	return limitedError(ref)
}

// limitMiddleware applies the rate limits to every tools/call.
func (ep *Endpoint) limitMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			if p := planOf(ctx); p.h != nil && !p.meta {
				if err := ep.admit(p, req.GetExtra()); err != nil {
					return nil, err
				}
			}
		}
		return next(ctx, method, req)
	}
}

// RateLimits returns the state of the rate limits this endpoint holds on
// this replica (its own and its host's), for the admin API.
func (ep *Endpoint) RateLimits() []ratelimit.State {
	t := ep.limitTab.Load()
	if t == nil {
		return nil
	}
	out := make([]ratelimit.State, 0, len(t.budgets))
	for _, b := range t.budgets {
		out = append(out, b.State())
	}
	return out
}
