package caddymodule

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/crankmcp/crank/host/mcpserver"
)

// SessionLimits bound what clients can make a stateful endpoint hold (its
// JSON fields are the handler's own). Each count is on by default: 0 means
// the default, a negative count (Caddyfile: off) no limit.
type SessionLimits struct {
	// MaxMCPSessions bounds the live MCP sessions of this endpoint on
	// each replica (created there, or moved there from another). An
	// initialize past it gets 503. Default 4096.
	MaxMCPSessions int `json:"max_mcp_sessions,omitempty"`
	// MaxMCPSessionsPerClient bounds them per client address (Caddy's
	// client IP, which honours the server's trusted_proxies; an IPv6
	// address counts as its /64). An initialize past it gets 429.
	// Default 128.
	MaxMCPSessionsPerClient int `json:"max_mcp_sessions_per_client,omitempty"`
	// MaxMCPSessionState bounds, in bytes, what one session keeps of its
	// initialize params in its etcd record (clientInfo and capabilities);
	// a larger initialize is refused with a JSON-RPC error naming the
	// limit. Default 16KiB, at most 64KiB.
	MaxMCPSessionState int64 `json:"max_mcp_session_state,omitempty"`
	// MaxSessionlessRequestsPerClient bounds, a second, the requests a
	// client sends without an MCP session (the 2026-07-28 protocol, or
	// any request to a stateless endpoint), in bursts of up to twice as
	// many. A client is the user of its bearer token (or of an
	// authentication handler before crank), else its address as for
	// max_mcp_sessions_per_client. A request past it gets 429 with
	// Retry-After. Default 10000.
	MaxSessionlessRequestsPerClient int `json:"max_sessionless_requests_per_client,omitempty"`
}

// validate checks the session limits.
func (l *SessionLimits) validate() error {
	if l.MaxMCPSessionState < 0 || l.MaxMCPSessionState > mcpserver.MaxSessionStateBytes {
		return fmt.Errorf("crank: max_mcp_session_state: must be 1-%d bytes, got %d", mcpserver.MaxSessionStateBytes, l.MaxMCPSessionState)
	}
	return nil
}

// endpoint returns the MCP endpoint's session limits.
func (l *SessionLimits) endpoint() mcpserver.SessionLimits {
	return mcpserver.SessionLimits{MaxSessions: l.MaxMCPSessions, MaxSessionsPerClient: l.MaxMCPSessionsPerClient,
		MaxStateBytes: int(l.MaxMCPSessionState), MaxSessionlessRequestsPerClient: l.MaxSessionlessRequestsPerClient}
}

// clientIP is Caddy's client IP of a request: the remote address, or the
// address a trusted proxy forwarded.
func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip
}

// unmarshalCaddyfile reads one session limit subdirective of the crank
// block and reports whether it was one. Syntax:
//
//	max_mcp_sessions            <n>|off
//	max_mcp_sessions_per_client <n>|off
//	max_mcp_session_state       <size>
//	max_sessionless_requests_per_client <n>|off   # a second
func (l *SessionLimits) unmarshalCaddyfile(d *caddyfile.Dispenser) (bool, error) {
	opt := d.Val()
	var dst *int
	switch opt {
	case "max_mcp_sessions":
		dst = &l.MaxMCPSessions
	case "max_mcp_sessions_per_client":
		dst = &l.MaxMCPSessionsPerClient
	case "max_sessionless_requests_per_client":
		dst = &l.MaxSessionlessRequestsPerClient
	case "max_mcp_session_state":
	default:
		return false, nil
	}
	var arg string
	if err := oneArg(d, &arg); err != nil {
		return true, err
	}
	if dst == nil {
		size, err := humanizeBytes(arg)
		if err != nil || size <= 0 || size > mcpserver.MaxSessionStateBytes {
			return true, d.Errf("%s: must be a size of 1 byte to %d bytes (e.g. 16KiB), got %q", opt, mcpserver.MaxSessionStateBytes, arg)
		}
		l.MaxMCPSessionState = size
		return true, nil
	}
	if arg == "off" {
		*dst = -1
		return true, nil
	}
	what := "sessions"
	if dst == &l.MaxSessionlessRequestsPerClient {
		what = "requests a second"
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n <= 0 {
		return true, d.Errf("%s: must be a whole number of %s, or off for no limit (got %q)", opt, what, arg)
	}
	*dst = n
	return true, nil
}
