package mcpserver

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Session-less legacy calls. Clients that never open a session — the
// mcp-mesh CLI (meshctl) and its agents' proxies, curl scripts — POST a
// bare tools/call (or any other request) with no initialize, no
// Mcp-Session-Id and no 2026-07-28 MCP-Protocol-Version header. A
// stateful endpoint serves such a request as a one-shot stateless call,
// as a stateless endpoint does (progress streamed as SSE when it carries
// a progress token, the final response last), unless its config says
// sessionless_legacy refuse: then it answers 400 as before, naming the
// header it misses. Identity, rate limits, quotas and policy are those
// of any sessionless request (the same handler serves it); a request that
// names an Mcp-Session-Id is the session protocol's, so a stale or
// unknown one still gets 404.
//
// This is the one place that decides it: generation (generation.go)
// classifies the request as sessionless, and checkRequest (transport.go)
// refuses it only when the endpoint refuses legacy calls.

// legacySessionless reports whether r is a session-less legacy request
// of a stateful endpoint: a POST of one JSON-RPC request or notification
// other than initialize, with no Mcp-Session-Id and no sessionless
// (2026-07-28 or later) MCP-Protocol-Version.
func (ep *Endpoint) legacySessionless(r *http.Request, p *peeked) bool {
	if !ep.transport.stateful || r.Method != http.MethodPost || p.body == nil ||
		r.Header.Get(sessionIDHeader) != "" || r.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion {
		return false
	}
	msg := p.message()
	return msg.ok && msg.method != "" && msg.method != "initialize"
}

// meshTimeoutHeader is the header in which mcp-mesh callers (meshctl,
// the mesh proxies) send how long they wait for the answer, in seconds.
const meshTimeoutHeader = "X-Mesh-Timeout"

// callBound is the upper bound a request's X-Mesh-Timeout puts on the
// timeout of the call it makes (0: none): the seconds it names less one,
// the time the answer needs to get back, and at least one second. A value
// that is not a positive number of seconds puts none.
func callBound(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get(meshTimeoutHeader))
	if v == "" {
		return 0
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs <= 0 || secs > 86400 {
		return 0
	}
	return max(time.Duration(secs*float64(time.Second))-time.Second, time.Second)
}
