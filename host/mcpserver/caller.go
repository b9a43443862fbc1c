package mcpserver

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
)

// The caller's identity: the workspace of the endpoint and the agent a
// request runs as, which scope its stream sessions, jobs and tasks and
// count against its quotas.
//
// The agent comes from the first of these sources that has one, each with
// a prefix of its own, so that no value of one source can equal a value of
// another (an agent header saying "user:alice" is "header:user:alice"):
//
//   - "user:<id>": the authenticated user, a verified MCP bearer token's
//     or the one an authentication handler in front of the endpoint
//     verified (Options.AuthenticatedUser);
//   - "header:<value>": the configured agent header (Options.AgentHeader),
//     which the endpoint trusts as it is: the operator sets it at a proxy
//     that removes the clients' own copies;
//   - "session:<digest>": the MCP session of a stateful endpoint, when
//     neither of the above names the caller. Its ID is 130 random bits
//     that only the client holding the session knows, so what one session
//     starts no other session sees, whatever clientInfo either sends. The
//     agent is a digest of the ID, not the ID: agents are written to audit
//     logs and store records, and the ID is the session's credential. A
//     client that wants its jobs back in a later session needs an identity
//     that outlives sessions: one of the sources above, or an operation
//     with scope: workspace.
//
// A sessionless request (any request to a stateless endpoint, a
// 2026-07-28 request to a stateful one: generation.go) has no session: one
// naming no user and no agent header has no agent. It can use workspace-scoped sessions and jobs
// (shared by every such caller), and an agent-scoped start is refused with
// an error that says how to give callers an identity (needsAgent).

// Agent prefixes, one per identity source.
const (
	agentUserPrefix    = "user:"
	agentHeaderPrefix  = "header:"
	agentSessionPrefix = "session:"
)

// internalHeaderPrefix starts the request headers through which ServeHTTP
// hands what it learnt of a request to the SDK's handlers and the
// middlewares. ServeHTTP first removes every client-sent header with this
// prefix, whatever path the request takes next, so none can be forged;
// none reaches an upstream.
const internalHeaderPrefix = "X-Crank-Internal-"

// authUserHeader carries the authenticated user (Options.AuthenticatedUser)
// from ServeHTTP to the tool call.
const authUserHeader = internalHeaderPrefix + "User"

// stripInternal removes every internal header a client sent.
func stripInternal(h http.Header) {
	for k := range h {
		if len(k) >= len(internalHeaderPrefix) && strings.EqualFold(k[:len(internalHeaderPrefix)], internalHeaderPrefix) {
			delete(h, k)
		}
	}
}

// markIdentity sets authUserHeader to the authenticated user, when there
// is one.
func (ep *Endpoint) markIdentity(r *http.Request) {
	if ep.authenticatedUser == nil {
		return
	}
	if id := ep.authenticatedUser(r); id != "" {
		r.Header.Set(authUserHeader, id)
	}
}

// agentOf is the calling agent's identity as the request itself states
// it: the authenticated user (a verified MCP bearer token's, else the
// authentication layer's), else the configured agent header; "" for none.
func (ep *Endpoint) agentOf(h http.Header, ti *auth.TokenInfo) string {
	if ti != nil && ti.UserID != "" {
		return agentUserPrefix + ti.UserID
	}
	if h != nil {
		if id := h.Get(authUserHeader); id != "" {
			return agentUserPrefix + id
		}
		if ep.agentHeader != "" {
			if id := h.Get(ep.agentHeader); id != "" {
				return agentHeaderPrefix + id
			}
		}
	}
	return ""
}

// callerAgent is the agent a request runs as: agentOf, else, on a
// stateful endpoint, the MCP session; "" for a sessionless request that
// names no agent.
func (ep *Endpoint) callerAgent(extra *mcp.RequestExtra, ss *mcp.ServerSession) string {
	if extra != nil {
		if id := ep.agentOf(extra.Header, extra.TokenInfo); id != "" {
			return id
		}
	}
	if ep.transport.stateful && ss != nil && ss.ID() != "" {
		return sessionAgent(ss.ID())
	}
	return ""
}

// sessionAgent is the agent of an MCP session that names no other: the
// digest of its ID (store.MCPSessionDigest).
func sessionAgent(id string) string {
	return agentSessionPrefix + store.MCPSessionDigest(id)
}

// sessionField names an MCP session in a log line: by its digest, the
// name the live-state list and the session's agent use, never by its ID,
// which is the client's credential.
func sessionField(id string) zap.Field {
	return zap.String("session", store.MCPSessionDigest(id))
}

// needsAgent returns the error result of a call of t that would start an
// agent-scoped session or job for a caller without an agent (a sessionless
// request naming no user and no agent header), nil for any other call.
func needsAgent(t host.Tool, agent string) *mcp.CallToolResult {
	op := t.Operation()
	if agent != "" || op == nil || op.Role != opsfile.RoleStart || op.Family == nil || !op.Family.AgentScoped {
		return nil
	}
	what := "sessions"
	if op.Family.Job != nil {
		what = "jobs"
	}
	return toolError("tool %q keeps its %s per agent, and this request names no agent: a sessionless request (protocol 2026-07-28, "+
		"or any request to a stateless endpoint) has no MCP session to own them. Open an MCP session (protocol 2025-11-25) on a stateful endpoint, "+
		"authenticate callers before crank, configure agent_header (set by a proxy that removes client copies), or give the operation scope: workspace",
		t.Name(), what)
}
