package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Both protocol generations on one endpoint.
//
// A stateful endpoint (the default) serves the session protocol
// (2024-11-05 … 2025-11-25: initialize, Mcp-Session-Id, the GET stream,
// resumable SSE streams, core tasks) and the sessionless protocol
// (2026-07-28: server/discover, no sessions, Mcp-Method/Mcp-Name headers,
// the tasks extension) side by side on the same URL. Each POST is
// classified before the SDK reads it:
//
//   - sessionless: server/discover (with or without a session ID, which
//     it ignores: discovery reads no session), a request whose
//     MCP-Protocol-Version header is 2026-07-28 or later (unknown future
//     versions included: the SDK answers those -32022 naming the
//     versions it serves), or a request with no Mcp-Session-Id whose
//     params._meta names a protocol version (the SDK answers -32020 if
//     the header is missing or differs). It is served by a second SDK
//     handler in stateless mode over the same MCP server, which checks
//     Mcp-Method and Mcp-Name against the body (-32020, 400).
//   - sessionless too, unless the endpoint refuses them: a session-less
//     legacy request (legacy.go), one with no Mcp-Session-Id and no
//     2026-07-28 version whose method is not initialize, such as the bare
//     tools/call of an mcp-mesh caller.
//   - refused: a 2026-07-28 (or later) request that carries an
//     Mcp-Session-Id: a session belongs to the older generation, whose
//     requests name the session's negotiated version. 400, -32600.
//   - everything else (initialize, GET, DELETE, requests of a session):
//     the session protocol, as before. A session's request is served in
//     the session's generation even when its params._meta carries the
//     2026-07-28 envelope (a client that stamps it on every request):
//     go-sdk would take the request as sessionless and refuse
//     resources/subscribe, logging/setLevel and ping as removed, or answer
//     -32022, so the endpoint drops the envelope first (sessionRequest).
//
// A stateless endpoint serves every request without a session, both
// generations alike.
//
// A sessionless client's subscriptions/listen (the 2026-07-28 stream of
// server messages) holds its POST open for as long as the client keeps
// it, as a session holds its GET stream: each one counts as a session
// against max_mcp_sessions and max_mcp_sessions_per_client while it is
// open (limits.go), so that such streams cannot pile up unbounded.

// requestGeneration is how an endpoint serves a request.
type requestGeneration int

const (
	genSession     requestGeneration = iota // the session protocol
	genSessionless                          // the sessionless protocol
	genConflict                             // a sessionless request naming a session: refused
)

// generation classifies a request of a stateful endpoint (see above).
func (ep *Endpoint) generation(r *http.Request, p *peeked) requestGeneration {
	if !ep.transport.stateful || r.Method != http.MethodPost {
		return genSession
	}
	hasSession := r.Header.Get(sessionIDHeader) != ""
	if p.body != nil && p.message().method == methodDiscover {
		return genSessionless
	}
	if r.Header.Get("MCP-Protocol-Version") >= sessionlessProtocolVersion {
		if hasSession {
			return genConflict
		}
		return genSessionless
	}
	if !hasSession && p.body != nil && p.message().meta[mcp.MetaKeyProtocolVersion] != nil &&
		p.message().method != "initialize" {
		return genSessionless
	}
	if !ep.transport.refuseLegacy && ep.legacySessionless(r, p) { // legacy.go
		return genSessionless
	}
	return genSession
}

// methodDiscover is the sessionless protocol's discovery request.
const methodDiscover = "server/discover"

// refuseGeneration answers a request no generation can serve, and reports
// whether it did.
func (ep *Endpoint) refuseGeneration(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if ep.generation(r, p) != genConflict {
		return false
	}
	var id json.RawMessage
	if p.body != nil {
		id = p.message().id
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32600,
		"message": "Bad Request: MCP-Protocol-Version " + quoteHeader(r.Header.Get("MCP-Protocol-Version")) +
			" is the sessionless protocol, whose requests carry no Mcp-Session-Id; a session's requests name the version it negotiated " +
			"(" + tasksProtocolVersion + " or earlier)"}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
	return true
}

// quoteHeader quotes a header value for an error message, bounded.
func quoteHeader(v string) string {
	b, _ := json.Marshal(truncateRunes(v, 64))
	return string(b)
}

// methodListen is the sessionless protocol's stream of server messages.
const methodListen = "subscriptions/listen"

// counted wraps the serving of a sessionless subscriptions/listen so that
// it holds a session slot of its client while it runs; a request over a
// session limit is refused as an initialize would be. Other requests are
// served by next as they are.
func (ep *Endpoint) counted(r *http.Request, p *peeked, next func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
	if p.body == nil || p.message().method != methodListen {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		slot, err := ep.sessions.acquire(ep.clientOf(r))
		if err != nil {
			refuseSession(w, err)
			return
		}
		defer slot.release()
		next(w, r)
	}
}

// sessionlessHandler returns the SDK handler of a stateful endpoint's
// sessionless requests: stateless, with no event store (the sessionless
// protocol has no resumption), cancelling a call when its POST ends.
func (ep *Endpoint) sessionlessHandler(opts mcp.StreamableHTTPOptions) *mcp.StreamableHTTPHandler {
	opts.Stateless = true
	opts.EventStore = nil
	opts.PropagateRequestCancellation = true
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server }, &opts)
}

// sessionEnvelope are the _meta keys of the sessionless protocol's
// per-request envelope (SEP-2575), which mean nothing in a session.
var sessionEnvelope = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, mcp.MetaKeyClientInfo, mcp.MetaKeyLogLevel}

// sessionRequest drops the sessionless envelope from the params._meta of a
// request of a session (Mcp-Session-Id, a session protocol version), so
// that the SDK serves it in the session's generation: the request's body
// (r's and p's) is rewritten without those keys, the rest as it was sent.
func (ep *Endpoint) sessionRequest(r *http.Request, p *peeked) {
	if p.body == nil || r.Header.Get(sessionIDHeader) == "" || ep.generation(r, p) != genSession {
		return
	}
	m := p.message()
	if m.meta[mcp.MetaKeyProtocolVersion] == nil {
		return
	}
	var top, params, meta map[string]json.RawMessage
	if json.Unmarshal(p.body, &top) != nil || json.Unmarshal(top["params"], &params) != nil || json.Unmarshal(params["_meta"], &meta) != nil {
		return
	}
	for _, k := range sessionEnvelope {
		delete(meta, k)
	}
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return
	}
	if top["params"], err = json.Marshal(params); err != nil {
		return
	}
	body, err := json.Marshal(top)
	if err != nil {
		return
	}
	*p = peeked{body: body}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
}
