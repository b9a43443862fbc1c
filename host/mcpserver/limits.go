package mcpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// What one client can make an endpoint hold: live MCP sessions, in all and
// per client address, each refused before it costs a store write; and the
// initialize state one session keeps in its store record (sessions.go).

// SessionLimits bound the MCP sessions of a stateful endpoint. Zero means
// the default; a negative count means no limit.
type SessionLimits struct {
	// MaxSessions bounds the live MCP sessions the endpoint (one
	// workspace) holds on this replica: created here or restored from the
	// store. An initialize past it gets 503, a request that would restore
	// a session 503 as well. Default DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerClient bounds them per client address (an IPv6
	// address counts as its /64). An initialize past it gets 429.
	// Default DefaultMaxSessionsPerClient.
	MaxSessionsPerClient int
	// MaxStateBytes bounds what a session keeps of its initialize params
	// (protocol version, clientInfo's name, title and version, and the
	// client's capabilities, as recorded): a larger initialize is refused
	// with -32602 naming the limit. Default DefaultMaxSessionStateBytes,
	// at most MaxSessionStateBytes.
	MaxStateBytes int
	// MaxSessionlessRequestsPerClient bounds the requests a client sends
	// without a session, a second (ratelimit.go); past it they get 429.
	// Default DefaultMaxSessionlessRequestsPerClient.
	MaxSessionlessRequestsPerClient int
}

// Session limit defaults and bounds.
const (
	DefaultMaxSessions          = 4096
	DefaultMaxSessionsPerClient = 128
	DefaultMaxSessionStateBytes = 16 << 10
	MaxSessionStateBytes        = 64 << 10
)

// withDefaults fills in the defaults; a negative count becomes 0, no limit.
func (l SessionLimits) withDefaults() SessionLimits {
	def := func(v, d int) int {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	l.MaxSessions = def(l.MaxSessions, DefaultMaxSessions)
	l.MaxSessionsPerClient = def(l.MaxSessionsPerClient, DefaultMaxSessionsPerClient)
	l.MaxSessionlessRequestsPerClient = def(l.MaxSessionlessRequestsPerClient, DefaultMaxSessionlessRequestsPerClient)
	if l.MaxStateBytes <= 0 {
		l.MaxStateBytes = DefaultMaxSessionStateBytes
	}
	return l
}

// check reports whether the limits are usable.
func (l SessionLimits) check() error {
	if l.MaxStateBytes > MaxSessionStateBytes {
		return fmt.Errorf("the session state limit is %d bytes, over the largest allowed, %d", l.MaxStateBytes, MaxSessionStateBytes)
	}
	return nil
}

// sessionCounter counts the live sessions of an endpoint, in all and per
// client address.
type sessionCounter struct {
	max, perClient int // 0: no limit

	mu      sync.Mutex
	total   int
	clients map[string]int
}

// sessionLimitError is a session refused by a limit.
type sessionLimitError struct {
	option string // the crank handler option that sets the limit
	max    int
	client string // for the per-client limit
}

func (e *sessionLimitError) Error() string {
	if e.client != "" {
		return fmt.Sprintf("too many MCP sessions from this client address (%s): at most %d live sessions per client (%s); "+
			"end sessions you no longer use (HTTP DELETE) or let them time out", e.client, e.max, e.option)
	}
	return fmt.Sprintf("this server holds as many MCP sessions as it may (%d, %s); retry later", e.max, e.option)
}

// status is the HTTP status of the refusal: 429 for the client's own
// limit, 503 for the endpoint's.
func (e *sessionLimitError) status() int {
	if e.client != "" {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable
}

// Caddyfile option names of the limits, for errors.
const (
	optMaxSessions          = "max_mcp_sessions"
	optMaxSessionsPerClient = "max_mcp_sessions_per_client"
	optMaxSessionState      = "max_mcp_session_state"
)

// full reports the limit a new session from client would exceed, nil when
// none: the early refusal, before the SDK creates the session.
func (c *sessionCounter) full(client string) *sessionLimitError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fullLocked(client)
}

func (c *sessionCounter) fullLocked(client string) *sessionLimitError {
	if c.perClient > 0 && c.clients[client] >= c.perClient {
		return &sessionLimitError{option: optMaxSessionsPerClient, max: c.perClient, client: client}
	}
	if c.max > 0 && c.total >= c.max {
		return &sessionLimitError{option: optMaxSessions, max: c.max}
	}
	return nil
}

// acquire counts one more session of client, or refuses it.
func (c *sessionCounter) acquire(client string) (*sessionSlot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fullLocked(client); err != nil {
		return nil, err
	}
	c.total++
	if c.clients == nil {
		c.clients = map[string]int{}
	}
	c.clients[client]++
	return &sessionSlot{c: c, client: client}, nil
}

// sessionSlot is one counted session; release uncounts it, once.
type sessionSlot struct {
	c        *sessionCounter
	client   string
	released atomic.Bool
}

func (s *sessionSlot) release() {
	if s == nil || s.released.Swap(true) {
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.clients[s.client]--; c.clients[s.client] <= 0 {
		delete(c.clients, s.client)
	}
}

// live returns the number of counted sessions, in all and of client.
func (c *sessionCounter) live(client string) (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.clients[client]
}

// clientHeader carries the client's address key from ServeHTTP to the
// session middleware, which counts a new session against it.
const clientHeader = internalHeaderPrefix + "Client"

// clientOf is the key of the address a request comes from: its IP address
// (from Options.ClientAddress, else the connection's remote address), an
// IPv6 one as its /64, since one host commonly holds a whole /64.
func (ep *Endpoint) clientOf(r *http.Request) string {
	addr := ""
	if ep.clientAddress != nil {
		addr = ep.clientAddress(r)
	}
	if addr == "" {
		addr = r.RemoteAddr
	}
	return clientKey(addr)
}

// clientKey is the limit key of an address: host:port or a bare host.
func clientKey(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		if len(host) > 64 {
			host = host[:64]
		}
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// admitSession refuses a stateful initialize at once when a session limit
// is reached, before the SDK creates the session (markClient gave the
// session middleware the client's address key, to count the session it
// may open). It reports whether it answered.
func (ep *Endpoint) admitSession(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if !ep.transport.stateful || r.Method != http.MethodPost || r.Header.Get(sessionIDHeader) != "" {
		return false
	}
	client := r.Header.Get(clientHeader) // markClient
	if p.body == nil || p.message().method != "initialize" {
		return false
	}
	if err := ep.sessions.full(client); err != nil {
		refuseSession(w, err)
		return true
	}
	return false
}

// refuseSession answers a request a session limit refuses.
func refuseSession(w http.ResponseWriter, err error) {
	status, data := http.StatusServiceUnavailable, map[string]any(nil)
	if le, ok := err.(*sessionLimitError); ok {
		status, data = le.status(), map[string]any{"limit": le.option, "max": le.max}
	}
	writeJSONRPCError(w, status, codeSessionLimit, err.Error(), data)
}

// truncateRunes shortens s to at most n bytes, for an error message.
func truncateRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
