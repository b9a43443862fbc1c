package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// The hot path: a plain unary tools/call served without go-sdk's
// transport and session machinery.
//
// go-sdk serves a POST by decoding its body again (twice more for a
// sessionless request, which also gets a throwaway server session of its
// own), dispatching it through its JSON-RPC connection and encoding the
// answer through its stream. For the one request that is most of the
// traffic, a unary tools/call, the endpoint does that itself: serveHot
// decides once, from the body peek.go already read and parsed, whether a
// POST takes the hot path, resolves the call's plan once (a call it then
// declines hands that plan to the SDK's path), runs the endpoint's one
// declared middleware list (endpoint.go middlewares, but the plan's)
// around the host's tool handler (callTool), and encodes the answer once
// into a pooled buffer that is written once, as the SDK's stream would
// have framed it: same status, headers, JSON or SSE event, priming event
// and event ids, event-log appends. The in-flight table is the session's
// one for both paths (inflight.go); the Host and Origin decision was made
// before either (origin.go).
//
// A POST takes it when it holds one JSON-RPC request (no batch) whose
// method is tools/call, with params of name, arguments and _meta only
// (no task, no requestState or inputResponses, no progress token, no
// tasks extension), for a tool the plan resolves to a served unary tool
// whose adapter relays nothing back before the result (host.Tool.Unary:
// no log messages, no client requests), and that is either
//
//   - sessionless (2026-07-28, on a stateful or stateless endpoint) with
//     the _meta and Mcp-Method/Mcp-Name headers the SDK would accept, or
//   - of a 2025-11-25 (or earlier) session this replica holds, live and
//     initialized, for the caller that opened it, with a protocol version
//     header the session negotiated (or none).
//
// Everything else goes to go-sdk as before: initialize, discovery, lists,
// notifications, tasks, windows and families, meta-tools, unknown tools,
// requests of sessions another replica holds, anything the SDK would
// refuse or answer in a way of its own.

// hotHandler is the endpoint's middlewares (all but the plan's, which
// serveHot resolved) around the host's tool handler.
func (ep *Endpoint) hotHandler() mcp.MethodHandler {
	h := mcp.MethodHandler(func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		cr := req.(*mcp.CallToolRequest)
		res, err := ep.callTool(ctx, cr)
		if err != nil || res == nil {
			return res, err
		}
		// What go-sdk's callTool does to its tools' results: typed
		// complete for a client of 2026-07-28, never "content": null.
		if sessionless(cr.Extra) {
			typed := completeCall
			typed.Meta, typed.Content, typed.StructuredContent, typed.IsError = res.Meta, res.Content, res.StructuredContent, res.IsError
			res = &typed
		} else if res.Content == nil {
			res = &mcp.CallToolResult{Meta: res.Meta, StructuredContent: res.StructuredContent, IsError: res.IsError}
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		return res, nil
	})
	for _, s := range ep.stages {
		if s.name != stagePlan {
			h = s.m(h)
		}
	}
	return h
}

// hotCall is a POST on the hot path.
type hotCall struct {
	id       jsonrpc.ID
	idJSON   []byte // the id as the SDK encodes it
	params   *mcp.CallToolParamsRaw
	version  string // the protocol version header
	newProto bool   // sessionless (2026-07-28)
	ls       *liveSession
	cancel   context.CancelFunc // a session's call's
}

// serveHot serves r on the hot path and reports whether it did.
func (ep *Endpoint) serveHot(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if ep.noHotPath.Load() || ep.hot == nil {
		return false
	}
	if r.Method == http.MethodGet {
		ep.awaitHot(r)
		return false
	}
	c, ok := ep.hotRequest(r, p)
	if !ok {
		ep.cancelHot(r, p) // the SDK serves it as well
		return false
	}
	var ss *mcp.ServerSession
	if c.ls != nil {
		ss = c.ls.ss
	}
	req := &mcp.CallToolRequest{Session: ss, Params: c.params,
		Extra: &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}}
	ctx := r.Context()
	if c.ls != nil {
		// A session's calls outlive their POST, as the SDK serves them:
		// notifications/cancelled ends one (cancelHot).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		c.cancel = cancel
	}
	pc := &planContext{Context: ctx}
	ep.resolve(&pc.plan, "tools/call", req) // plan.go
	if pc.plan.h == nil || pc.plan.meta || !pc.plan.tool.Unary() ||
		c.newProto && paramHeaders(pc.plan.tool.Operation().InputSchema) { // the SDK checks the Mcp-Param-* headers
		ep.plans.put(r.Header, &pc.plan) // go-sdk's path reuses it (plan.go)
		return false
	}
	if ls := c.ls; ls != nil {
		ls.startRequest()
		defer ls.endRequest()
		defer ep.touch(ls) // sessions.go
	}
	ep.hotCalls.Add(1)
	ep.answerHot(w, r, c, pc, req)
	return true
}

// hotRequest reads what the hot path needs of r from its peeked body and
// headers; ok is false for a request the SDK serves.
func (ep *Endpoint) hotRequest(r *http.Request, p *peeked) (c hotCall, ok bool) {
	if r.Method != http.MethodPost || p.body == nil || len(r.Header.Values("Last-Event-ID")) > 0 {
		return c, false
	}
	m := p.message()
	if !m.ok || m.version != "2.0" || m.method != "tools/call" || m.task != nil || len(m.id) == 0 || m.progressToken() ||
		!json.Valid(p.body) { // nothing after the message, as go-sdk decodes it
		return c, false
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return c, false
	}
	if !acceptsBoth(r.Header.Values("Accept")) {
		return c, false
	}
	if c.id, c.idJSON, ok = hotID(m.id); !ok {
		return c, false
	}
	if c.params, ok = hotParams(m.params); !ok {
		return c, false
	}
	c.version = r.Header.Get("MCP-Protocol-Version")
	metaVersion, hasMetaVersion := c.params.Meta[mcp.MetaKeyProtocolVersion]
	switch gen := ep.generation(r, p); {
	case !ep.transport.stateful || gen == genSessionless:
		// The sessionless protocol, as the SDK's stateless handler
		// accepts it (streamable.go servePOST, validateRequestMeta,
		// validateMcpHeaders).
		if c.version != sessionlessProtocolVersion || metaVersion != c.version ||
			r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != c.params.Name ||
			!metaObject(m.meta, mcp.MetaKeyClientCapabilities, true) || !metaObject(m.meta, mcp.MetaKeyClientInfo, false) ||
			declaresTasks(c.params.Meta) { // taskext.go: may start a task
			return c, false
		}
		c.newProto = true
		return c, true
	case gen != genSession || hasMetaVersion:
		return c, false
	}
	return c, ep.hotSession(r, &c)
}

// hotSession finds the live session of a session's call, and reports
// whether the hot path serves it as the SDK would.
func (ep *Endpoint) hotSession(r *http.Request, c *hotCall) bool {
	id := r.Header.Get(sessionIDHeader)
	if id == "" || c.version >= sessionlessProtocolVersion {
		return false
	}
	ls := ep.replicas.get(id)
	if ls == nil || ls.closed.Load() {
		return false
	}
	ti := auth.TokenInfoFromContext(r.Context())
	if ls.agent != ep.agentOf(r.Header, ti) {
		return false // serveMCP answers 404
	}
	if ls.transport == nil && ls.tokenUser != "" && (ti == nil || ti.UserID != ls.tokenUser) {
		return false // the SDK answers 403
	}
	ls.mu.Lock()
	ready := ls.negotiated != "" && (c.version == "" || c.version == ls.negotiated)
	ls.mu.Unlock()
	// The SDK serves a session's calls once it has the initialize params
	// (before notifications/initialized too). A client that asked for
	// 2026-07-28 in its initialize gets results typed as that protocol's
	// (go-sdk's clientSupportsMultiRoundTrip).
	if ip := ls.ss.InitializeParams(); !ready || ip == nil || ip.ProtocolVersion >= sessionlessProtocolVersion {
		return false
	}
	c.ls = ls
	return true
}

// hotID is a request id as go-sdk decodes and encodes it; ok is false
// for an id it refuses.
func hotID(raw json.RawMessage) (jsonrpc.ID, []byte, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return jsonrpc.ID{}, nil, false
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil || !id.IsValid() {
		return jsonrpc.ID{}, nil, false
	}
	var b []byte
	switch x := id.Raw().(type) {
	case int64:
		b = strconv.AppendInt(nil, x, 10)
	case string:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(x) != nil {
			return jsonrpc.ID{}, nil, false
		}
		b = bytes.TrimRight(buf.Bytes(), "\n")
	default:
		return jsonrpc.ID{}, nil, false
	}
	return id, b, true
}

// hotParams are a tools/call's params when they hold only a name (a
// string), arguments and _meta (an object); ok is false otherwise.
func hotParams(raw json.RawMessage) (*mcp.CallToolParamsRaw, bool) {
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil || params == nil {
		return nil, false
	}
	out := &mcp.CallToolParamsRaw{}
	for k, v := range params {
		switch k {
		case "name":
			if json.Unmarshal(v, &out.Name) != nil || len(v) == 0 || v[0] != '"' {
				return nil, false
			}
		case "arguments":
			out.Arguments = v
		case "_meta":
			if string(v) == "null" {
				continue
			}
			if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &out.Meta) != nil {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	if out.Name == "" {
		return nil, false
	}
	return out, true
}

// metaObject reports whether _meta's key holds a JSON object (or, not
// required, is absent).
func metaObject(meta map[string]json.RawMessage, key string, required bool) bool {
	v, ok := meta[key]
	if !ok {
		return !required
	}
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{' && json.Valid(v)
}

// acceptsBoth reports whether the Accept header values take both JSON and
// SSE, as go-sdk requires of a POST.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// paramHeaders reports whether an input schema binds arguments to
// Mcp-Param-* headers (x-mcp-header), which the SDK checks.
func paramHeaders(schema json.RawMessage) bool {
	return bytes.Contains(schema, []byte("x-mcp-header"))
}

// hotBuffers are the buffers the hot path encodes its answers into.
var hotBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer bounds the buffers kept for reuse.
const maxPooledBuffer = 64 << 10

// completeCall is a CallToolResult typed complete (resultType, which
// go-sdk's type keeps unexported): a sessionless result is a copy of it.
var completeCall = func() (r mcp.CallToolResult) {
	_ = json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r)
	return r
}()

// answerHot runs the call and writes its answer as the SDK's stream
// would.
func (ep *Endpoint) answerHot(w http.ResponseWriter, r *http.Request, c hotCall, pc *planContext, req *mcp.CallToolRequest) {
	// The session's event log, as the SDK's stream keeps it: opened,
	// then the priming event of 2025-11-25 and later, then the answer.
	var es mcp.EventStore
	var sid, stream string
	if c.ls != nil && ep.eventStore != nil {
		es, sid, stream = ep.eventStore, c.ls.id, rand.Text()
		if err := es.Open(r.Context(), sid, stream); err != nil {
			http.Error(w, "storing stream: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer c.ls.hotStream(stream)()
	}
	h := w.Header()
	if c.ls != nil {
		// claimCall (inflight.go) holds the call's id: notifications/cancelled ends it.
		c.ls.setCancel(string(c.idJSON), c.cancel)
	}
	h.Set("Cache-Control", "no-cache, no-transform")
	// A restored session's transport is the endpoint's own, which has no
	// JSON answers (sessions.go restore).
	asJSON := ep.transport.jsonResponse && (c.ls == nil || c.ls.transport == nil)
	if asJSON {
		h.Set("Content-Type", "application/json")
	} else {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
	}
	buf := hotBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			hotBuffers.Put(buf)
		}
	}()
	next := 0
	if es != nil {
		// A restored session's transport serves its requests without the
		// SDK's handler, which tells it the protocol version header: it
		// reads none, as it reads no header (2025-03-26), and so sends no
		// priming event.
		version := c.version
		if version == "" || c.ls.transport != nil {
			version = "2025-03-26"
		}
		if !asJSON && version >= tasksProtocolVersion {
			if err := es.Append(r.Context(), sid, stream, nil); err != nil {
				ep.logger.Warn("storing the priming event", zap.Error(err))
			}
			buf.WriteString("event: prime\nid: ")
			buf.WriteString(stream)
			buf.WriteString("_0\ndata: \n\n")
			ep.writeEvent(w, buf.Bytes())
			buf.Reset()
			next = 1
		}
	}

	res, err := ep.hot(pc, "tools/call", req)
	data := ep.encodeAnswer(buf, c, res, err)
	status := 0
	if c.newProto {
		status = errorStatus(err)
	}
	if es != nil {
		// The event log keeps what it is given until it is stored; data
		// is the pooled buffer's.
		if err := es.Append(r.Context(), sid, stream, bytes.Clone(data)); err != nil {
			ep.logger.Debug("storing the answer's event", zap.Error(err))
		}
		c.ls.answered(stream)
	}
	switch {
	case status != 0:
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
	case asJSON:
		_, _ = w.Write(data)
	default:
		// The event, framed around the answer in the same buffer.
		frame := hotBuffers.Get().(*bytes.Buffer)
		frame.Reset()
		frame.WriteString("event: message\n")
		if es != nil {
			frame.WriteString("id: ")
			frame.WriteString(stream)
			frame.WriteByte('_')
			frame.WriteString(strconv.Itoa(next))
			frame.WriteByte('\n')
		}
		frame.WriteString("data: ")
		frame.Write(data)
		frame.WriteString("\n\n")
		ep.writeEvent(w, frame.Bytes())
		if frame.Cap() <= maxPooledBuffer {
			hotBuffers.Put(frame)
		}
	}
}

// writeEvent writes one SSE event and flushes it, as go-sdk does.
func (ep *Endpoint) writeEvent(w http.ResponseWriter, b []byte) {
	_, _ = w.Write(b)
	_ = http.NewResponseController(w).Flush()
}

// encodeAnswer encodes the JSON-RPC answer of a call into buf, as
// go-sdk's server and connection would: the result typed as its
// protocol's and naming the server (2026-07-28), encoded without HTML
// escaping around what the result's own encoder escaped.
func (ep *Endpoint) encodeAnswer(buf *bytes.Buffer, c hotCall, res mcp.Result, err error) []byte {
	if err == nil {
		if data, ok := ep.encodeResult(buf, c, res); ok {
			return data
		}
		err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be encoded"}
	}
	data, merr := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: c.id, Error: err})
	if merr != nil {
		ep.logger.Error("tools/call answer not encoded", zap.Error(merr))
	}
	return data
}

func (ep *Endpoint) encodeResult(buf *bytes.Buffer, c hotCall, res mcp.Result) ([]byte, bool) {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil {
		return nil, false
	}
	if c.newProto {
		// go-sdk's annotateServerInfo, for every result of 2026-07-28.
		m := r.Meta
		if m == nil {
			m = mcp.Meta{}
		}
		if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
			m[mcp.MetaKeyServerInfo] = ep.impl
		}
		r.Meta = m
	}
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(c.idJSON)
	buf.WriteString(`,"result":`)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(r) != nil {
		return nil, false
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteByte('}')
	return buf.Bytes(), true
}

// errorStatus is the HTTP status 2026-07-28 gives a JSON-RPC error
// answer (go-sdk's extractErrorStatus); 0 for the usual 200.
func errorStatus(err error) int {
	var jerr *jsonrpc.Error
	if err == nil || !errors.As(err, &jerr) {
		return 0
	}
	switch jerr.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// A session's client whose POST stream dropped resumes it with a GET
// naming the stream's last event id. go-sdk serves that GET; for a stream
// of the hot path, which go-sdk's transport does not know, it replays the
// stream's events from the event log and ends. So the GET of a stream the
// hot path is still serving waits until the call's answer is in the log,
// and then the replay has the answer, as the SDK's live stream would.

// hotStream registers a hot path stream of the session; the function it
// returns ends it, its answer given or not.
func (ls *liveSession) hotStream(stream string) func() {
	ls.mu.Lock()
	if ls.hot == nil {
		ls.hot = make(map[string]chan struct{})
	}
	ls.hot[stream] = make(chan struct{})
	ls.mu.Unlock()
	return func() { ls.answered(stream) }
}

// answered ends a hot path stream: its answer is in the event log.
func (ls *liveSession) answered(stream string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ch, ok := ls.hot[stream]; ok {
		close(ch)
		delete(ls.hot, stream)
	}
}

// awaitHot waits, for as long as r lasts, until the hot path stream a
// resuming GET names has its answer in the event log.
func (ep *Endpoint) awaitHot(r *http.Request) {
	eid := r.Header.Get("Last-Event-ID")
	stream, _, ok := strings.Cut(eid, "_")
	if !ok || stream == "" {
		return
	}
	ls := ep.replicas.get(r.Header.Get(sessionIDHeader))
	if ls == nil {
		return
	}
	ls.mu.Lock()
	ch := ls.hot[stream]
	ls.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-r.Context().Done():
	}
}

// cancelHot cancels the hot path call a session's notifications/cancelled
// names; the SDK gets the notification too (for the calls it serves).
func (ep *Endpoint) cancelHot(r *http.Request, p *peeked) {
	if r.Method != http.MethodPost || p.body == nil {
		return
	}
	m := p.message()
	if !m.ok || m.method != "notifications/cancelled" || m.id != nil {
		return
	}
	ls := ep.replicas.get(r.Header.Get(sessionIDHeader))
	if ls == nil || ls.agent != ep.agentOf(r.Header, auth.TokenInfoFromContext(r.Context())) {
		return
	}
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.params, &params) != nil {
		return
	}
	_, id, ok := hotID(params.RequestID)
	if !ok {
		return
	}
	if cancel := ls.cancelOf(string(id)); cancel != nil {
		cancel()
	}
}
