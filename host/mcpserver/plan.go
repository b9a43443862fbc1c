package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/store"
)

// The call plan. The outermost receiving middleware resolves once what a
// request is about, and all inside it (telemetry, view, policy, tasks,
// the handlers of tools, resources, prompts and the meta-tools) reads
// that plan from the request's context instead of resolving it again:
// the host attached to the endpoint, loaded once (a request sees one host
// from end to end, even across a reload), its view, the caller, and for
// a tools/call (and the call call_tool makes) the view's tool, the
// host's tool (host.Tool, which host.Host.Call and StartTask take
// instead of a name) and the policy's decision. A task's tool is known
// once the task is read, a publication once the SDK has matched the
// request to its handler: they are resolved there, on the plan's host.

type planKey struct{}

// plan is what one request is about.
type plan struct {
	h      *host.Host
	view   *viewState   // the view of h; nil without a view
	scope  host.Scope   // the workspace and agent the request runs as
	caller *auth.Caller // the caller as the policy sees it; nil without a policy
	// token is the caller's verified access token (a host call's
	// SubjectToken), traceParent and traceState the request's trace
	// context headers.
	token, traceParent, traceState string
	// user is the verified access token's user ("" for none), session the
	// digest of the MCP session ("" for none), redirect the consent
	// callback of the endpoint (consent.go).
	user, session, redirect string
	// bound is the upper bound the caller put on the call's timeout
	// (X-Mesh-Timeout, legacy.go); 0 for none.
	bound time.Duration
	// address is the client's address key (markClient), "" when unknown.
	address string
	toolCall
}

// toolCall is what a plan resolves of a tools/call; zero for other
// requests.
type toolCall struct {
	name string    // the name called, as the endpoint publishes it
	meta bool      // a discovery meta-tool's
	vt   *viewTool // the view's tool of that name; nil without a view
	tool host.Tool // the host's tool: not Served for a name the endpoint does not serve
	// hidden: the name is a tool of the host that the view hides or
	// renames, unknown to the endpoint's clients.
	hidden bool
	// The policy's decision: an isError result naming the rule that
	// refused the arguments, or the unknown-tool error for a tool hidden
	// from the caller; neither to go on.
	refused *mcp.CallToolResult
	denied  error
}

// planMiddleware resolves the plan of every request, but for a call the
// hot path resolved and declined (declinedPlans): that one's is reused.
func (ep *Endpoint) planMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c := &planContext{Context: ctx}
		if p := ep.plans.take(req.GetExtra()); p != nil && method == "tools/call" && p.name == callName(req) {
			c.plan = *p
		} else {
			ep.resolve(&c.plan, method, req)
		}
		return next(c, method, req)
	}
}

// callName is the tool a tools/call names ("" for another request).
func callName(req mcp.Request) string {
	if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
		return cr.Params.Name
	}
	return ""
}

// declinedPlans are the plans of the calls the hot path resolved and then
// declined (a tool that relays messages, a discovery meta-tool, ...), by
// the key planHeader carries from ServeHTTP to planMiddleware: go-sdk's
// path serves them with the same plan, and the policy is not evaluated
// twice.
type declinedPlans struct {
	seq   atomic.Uint64
	plans sync.Map // key -> *plan
}

// planHeader carries the key of a declined call's plan.
const planHeader = internalHeaderPrefix + "Plan"

// put keeps p for the request of header h.
func (d *declinedPlans) put(h http.Header, p *plan) {
	key := strconv.FormatUint(d.seq.Add(1), 36)
	d.plans.Store(key, p)
	h.Set(planHeader, key)
}

// take returns and forgets the plan kept for the request of extra (nil
// for none).
func (d *declinedPlans) take(extra *mcp.RequestExtra) *plan {
	if extra == nil || extra.Header == nil {
		return nil
	}
	// The header stays as it is: a handler that outlives its POST may
	// still read it.
	key := extra.Header.Get(planHeader)
	if key == "" {
		return nil
	}
	p, _ := d.plans.LoadAndDelete(key)
	pl, _ := p.(*plan)
	return pl
}

// planContext is a request's context with its plan: one allocation for
// both.
type planContext struct {
	context.Context
	plan plan
}

func (c *planContext) Value(key any) any {
	if key == (planKey{}) {
		return &c.plan
	}
	return c.Context.Value(key)
}

// planOf is the plan of the request ctx serves (planMiddleware made it);
// a context without one gets an empty plan, of no host.
func planOf(ctx context.Context) *plan {
	if p, ok := ctx.Value(planKey{}).(*plan); ok {
		return p
	}
	return &plan{}
}

// resolve makes p the plan of a request.
func (ep *Endpoint) resolve(p *plan, method string, req mcp.Request) {
	ep.resolves.Add(1)
	h := ep.active.Load()
	extra := req.GetExtra()
	ss, _ := req.GetSession().(*mcp.ServerSession)
	id := tokenIdentity(extra)
	*p = plan{h: h, view: ep.viewOf(h), scope: host.Scope{WorkspaceID: ep.workspace, AgentID: ep.callerAgent(extra, ss)},
		token: id.Token(), redirect: ep.consentRedirect()}
	if id != nil {
		p.user = id.User
	}
	if ss != nil && ss.ID() != "" {
		p.session = store.MCPSessionDigest(ss.ID())
	}
	if extra != nil && extra.Header != nil {
		p.traceParent, p.traceState = extra.Header.Get("Traceparent"), extra.Header.Get("Tracestate")
		p.bound = callBound(extra.Header) // legacy.go
		p.address = extra.Header.Get(clientHeader)
	}
	if ep.policy != nil {
		p.caller = ep.policyCaller(extra, p.scope.AgentID)
	}
	if cr, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && cr.Params != nil && h != nil {
		p.name = cr.Params.Name
		switch {
		case p.view == nil:
			p.tool = h.Tool(p.name)
		case ep.view.discovery != DiscoveryOff && slices.Contains(metaToolNames, p.name):
			p.meta = true
		case p.view.byPublished[p.name] != nil:
			p.vt = p.view.byPublished[p.name]
			p.tool = p.vt.served
		default:
			p.hidden = h.Tool(p.name).Served()
		}
		ep.decide(p, cr.Params.Arguments)
	}
}

// callOf is the plan of the call call_tool makes of vt, a tool of p's
// view, under the name it was called by.
func (ep *Endpoint) callOf(p *plan, name string, vt *viewTool, args json.RawMessage) plan {
	q := *p
	q.toolCall = toolCall{name: name, vt: vt, tool: vt.served}
	ep.decide(&q, args)
	return q
}

// decide is the policy's decision on the call of p.tool with args.
func (ep *Endpoint) decide(p *plan, args json.RawMessage) {
	if ep.policy != nil && p.tool.Served() {
		p.refused, p.denied = ep.policyCheck(p.caller, p.tool, args) // policy.go
	}
}

// served reports whether the endpoint serves the tool called: one its
// view publishes (or a discovery meta-tool), the host's without a view.
// Only such names become telemetry labels and span names.
func (p *plan) served() bool { return p.meta || p.tool.Served() }

// callRequest is the host call of the plan's tool with args, by its
// caller.
func (p *plan) callRequest(args json.RawMessage) host.CallRequest {
	return host.CallRequest{Tool: p.tool, Arguments: args, WorkspaceID: p.scope.WorkspaceID, AgentID: p.scope.AgentID,
		ClientID:     ratelimit.ClientOf(p.scope.AgentID, p.address),
		SubjectToken: p.token, TraceParent: p.traceParent, TraceState: p.traceState, MaxTimeout: p.bound,
		User: p.user, Session: p.session, ConsentRedirect: p.redirect}
}

// unknownTool is the error of a tools/call of a tool the endpoint does
// not serve, as the SDK words it: what a tool the view or the policy
// hides gets too, so that it is not revealed.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}
