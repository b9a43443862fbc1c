package mcpserver

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
)

// The caller's identity: the workspace of the endpoint and the agent a
// request runs as, which scope its stream sessions, jobs and tasks and
// count against its quotas.

// authUserHeader carries the authenticated user (Options.AuthenticatedUser)
// from ServeHTTP to the tool call. ServeHTTP always removes a client-sent
// one, so it cannot be forged; it never reaches an upstream.
const authUserHeader = "X-Crank-Authenticated-User"

// markIdentity replaces any client-sent authUserHeader with the
// authenticated user, when there is one.
func (ep *Endpoint) markIdentity(r *http.Request) {
	r.Header.Del(authUserHeader)
	if ep.authenticatedUser == nil {
		return
	}
	if id := ep.authenticatedUser(r); id != "" {
		r.Header.Set(authUserHeader, id)
	}
}

// agentOf is the calling agent's identity: the authenticated identity (a
// verified MCP bearer token's user, or the authenticated user), else the
// configured agent header.
func (ep *Endpoint) agentOf(h http.Header, ti *auth.TokenInfo) string {
	if ti != nil && ti.UserID != "" {
		return ti.UserID
	}
	if h != nil {
		if id := h.Get(authUserHeader); id != "" {
			return id
		}
		if ep.agentHeader != "" {
			return h.Get(ep.agentHeader)
		}
	}
	return ""
}

// callerAgent is the agent a tool call runs as: agentOf, else the MCP
// client's name (so that quotas and isolation still tell clients apart).
func (ep *Endpoint) callerAgent(extra *mcp.RequestExtra, ss *mcp.ServerSession) string {
	if extra != nil {
		if id := ep.agentOf(extra.Header, extra.TokenInfo); id != "" {
			return id
		}
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			return "client:" + p.ClientInfo.Name
		}
	}
	return ""
}

// callerScope is the workspace and agent a request runs as: the same as
// its tool calls (callerAgent).
func (ep *Endpoint) callerScope(extra *mcp.RequestExtra, ss *mcp.ServerSession) host.Scope {
	return host.Scope{WorkspaceID: ep.workspace, AgentID: ep.callerAgent(extra, ss)}
}
