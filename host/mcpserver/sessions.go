package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// MCP sessions across replicas.
//
// go-sdk keeps a stateful endpoint's sessions in a private in-memory map.
// Crank records each session's state in the store when the client
// initializes, and a replica that gets an Mcp-Session-Id it does not hold
// rebuilds the session from that record (Server.Connect with the recorded
// ServerSessionState) and serves it on a transport of its own. Every request
// that carries a session ID still goes through the SDK's handler first, so
// its checks (Host, protocol version, Content-Type, Accept, body limit)
// apply to restored sessions too; only the SDK's "session not found" answer
// is held back and replaced by the restore.
//
// The store is on the request path only when a session is created
// (initialize, notifications/initialized, logging/setLevel: one put each),
// deleted, or first seen by this replica (one get). Serving a session this
// replica holds costs no etcd round trip; its record's expiry is pushed out
// in the background, at most once per session timeout / 10.

// sessionIDHeader is the Streamable HTTP session header.
const sessionIDHeader = "Mcp-Session-Id"

// replicaSessions are the MCP sessions this replica serves and knows the
// store record of.
type replicaSessions struct {
	mu       sync.Mutex
	sessions map[string]*liveSession
}

// liveSession is one MCP session served by this replica.
type liveSession struct {
	id    string
	agent string
	ss    *mcp.ServerSession
	// transport is set when this replica rebuilt the session from the
	// store; nil when the SDK's handler created (and owns) it.
	transport *mcp.StreamableServerTransport
	// tokenUser is the user of the verified token the SDK's handler
	// bound its session to (it refuses the requests of any other, 403).
	tokenUser string
	created   time.Time
	// slot counts the session against the endpoint's session limits
	// until it ends (limits.go).
	slot *sessionSlot

	mu          sync.Mutex
	negotiated  string
	initialized bool
	logLevel    string

	// hot are the streams of the calls the hot path is serving, each
	// closed once its answer is in the event log (hotpath.go); guarded
	// by mu.
	hot map[string]chan struct{}
	// calls are the session's calls in flight on either path, by their
	// JSON-RPC id as encoded (inflight.go); guarded by mu.
	calls map[string]*flight

	closed    atomic.Bool  // closing or closed: not to be served any more
	recorded  atomic.Bool  // the store holds the record
	lastTouch atomic.Int64 // unix nanoseconds of the last put or touch
	touching  atomic.Bool

	// Idle timeout of the session, paused while a request runs: the
	// endpoint times out every session, the SDK's own too (whose POSTs
	// the hot path serves without the SDK's handler, hotpath.go).
	idle    time.Duration
	timerMu sync.Mutex
	refs    int
	timer   *time.Timer
}

func (rs *replicaSessions) get(id string) *liveSession {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.sessions[id]
}

// add registers ls unless a session with its ID is already registered, and
// forgets it when the session closes. It returns the registered session.
func (rs *replicaSessions) add(ls *liveSession) (*liveSession, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if cur := rs.sessions[ls.id]; cur != nil {
		return cur, false
	}
	if rs.sessions == nil {
		rs.sessions = make(map[string]*liveSession)
	}
	rs.sessions[ls.id] = ls
	return ls, true
}

func (rs *replicaSessions) watch(ls *liveSession) {
	telemetry.MCPSessionOpened(ls.transport != nil) // restored sessions have their own transport
	telemetry.MCPSessionsHeld(1)
	go func() {
		_ = ls.ss.Wait()
		telemetry.MCPSessionsHeld(-1)
		ls.closed.Store(true)
		ls.stopTimer()
		ls.slot.release()
		rs.mu.Lock()
		if rs.sessions[ls.id] == ls {
			delete(rs.sessions, ls.id)
		}
		rs.mu.Unlock()
	}()
}

// record is the session's store record.
func (ep *Endpoint) record(ls *liveSession) store.MCPSession {
	ls.mu.Lock()
	rec := store.MCPSession{
		ID: ls.id, ProtocolVersion: ls.negotiated, Initialized: ls.initialized, LogLevel: ls.logLevel,
		WorkspaceID: ep.workspace, AgentID: ls.agent, CreatedAt: ls.created, TTL: ep.sessionTTL,
	}
	ls.mu.Unlock()
	if p := ls.ss.InitializeParams(); p != nil {
		if p.ClientInfo != nil {
			rec.ClientName, rec.ClientVersion, rec.ClientTitle = p.ClientInfo.Name, p.ClientInfo.Version, p.ClientInfo.Title
		}
		rec.InitializeParams = sessionState(p)
	}
	return rec
}

// sessionState is what a session's record keeps of its initialize params:
// what another replica needs to serve the session (the protocol version
// the client asked for, clientInfo's name, title and version, and the
// client's capabilities), not the rest (_meta, icons, unknown fields).
func sessionState(p *mcp.InitializeParams) json.RawMessage {
	kept := mcp.InitializeParams{ProtocolVersion: p.ProtocolVersion, Capabilities: p.Capabilities}
	if c := p.ClientInfo; c != nil {
		kept.ClientInfo = &mcp.Implementation{Name: c.Name, Title: c.Title, Version: c.Version}
	}
	b, _ := json.Marshal(kept)
	return withDeclaredCapabilities(b, p.Capabilities) // clientrequests.go
}

// stateSize is the size of the initialize state a session's record keeps:
// its sessionState, and clientInfo's fields again on their own.
func stateSize(p *mcp.InitializeParams) int {
	if p == nil {
		return 0
	}
	n := len(sessionState(p))
	if c := p.ClientInfo; c != nil {
		n += len(c.Name) + len(c.Title) + len(c.Version)
	}
	return n
}

// logLevels are the levels logging/setLevel may set (RFC 5424's).
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// put writes the session's record; a failure leaves the session local to
// this replica until a later use records it.
func (ep *Endpoint) put(ctx context.Context, ls *liveSession) {
	stp := ep.store.Load()
	if stp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	if err := (*stp).PutMCPSession(ctx, ep.record(ls)); err != nil {
		ls.recorded.Store(false)
		ep.logger.Warn("MCP session not recorded in the store: other replicas cannot serve it until it is",
			sessionField(ls.id), zap.Error(err))
		return
	}
	ls.recorded.Store(true)
	ls.lastTouch.Store(time.Now().UnixNano())
}

// storeCallTimeout bounds a store call made for an MCP request; the store's
// own operation timeout (5s by default) usually ends it first.
const storeCallTimeout = 10 * time.Second

// sessionMiddleware records a session when the SDK has initialized it (with
// the protocol version it negotiated) and again when its log level changes.
// It refuses an initialize whose state is over the limit, or that a session
// limit refuses, before the SDK initializes the session (which the SDK then
// closes), and a log level the protocol does not have.
func (ep *Endpoint) sessionMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss == nil || ss.ID() == "" {
			return next(ctx, method, req)
		}
		switch method {
		case "initialize":
			return ep.initializeSession(ctx, ss, req, next)
		case "logging/setLevel":
			p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
			if ok && p != nil && !slices.Contains(logLevels, p.Level) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
					"params.level: %q is not a logging level (one of %v)", truncateRunes(string(p.Level), 32), logLevels)}
			}
			res, err := next(ctx, method, req)
			if ls := ep.replicas.get(ss.ID()); err == nil && ok && ls != nil && ls.ss == ss {
				ls.mu.Lock()
				ls.logLevel = string(p.Level)
				ls.mu.Unlock()
				ep.put(ctx, ls)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// initializeSession serves the initialize of a new session: it checks the
// state the session would keep and counts the session against the limits,
// then records it once the SDK has initialized it.
func (ep *Endpoint) initializeSession(ctx context.Context, ss *mcp.ServerSession, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if ep.replicas.get(ss.ID()) != nil {
		return next(ctx, "initialize", req) // a repeated initialize: the SDK refuses it
	}
	p, _ := req.GetParams().(*mcp.InitializeParams)
	if n, limit := stateSize(p), ep.limits.MaxStateBytes; n > limit {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"initialize: the clientInfo and capabilities a session keeps take %d bytes here, over this server's limit of %d bytes (%s)",
			n, limit, optMaxSessionState)}
	}
	var client, agent, tokenUser string
	if ex := req.GetExtra(); ex != nil {
		client, agent = ex.Header.Get(clientHeader), ep.agentOf(ex.Header, ex.TokenInfo)
		if ex.TokenInfo != nil {
			tokenUser = ex.TokenInfo.UserID
		}
	}
	slot, err := ep.sessions.acquire(client)
	if err != nil {
		return nil, &jsonrpc.Error{Code: codeSessionLimit, Message: err.Error()}
	}
	res, err := next(ctx, "initialize", req)
	ir, ok := res.(*mcp.InitializeResult)
	if err != nil || !ok {
		slot.release()
		return res, err
	}
	ls, fresh := ep.replicas.add(&liveSession{id: ss.ID(), agent: agent, tokenUser: tokenUser, ss: ss, created: time.Now().UTC(),
		negotiated: ir.ProtocolVersion, slot: slot})
	if fresh {
		ep.idleTimeout(ls)
		ep.replicas.watch(ls)
	} else {
		slot.release()
	}
	ep.put(ctx, ls)
	return res, err
}

// codeSessionLimit is the JSON-RPC error of an initialize a session limit
// refuses.
const codeSessionLimit = -32000

// sessionInitialized records that the client of ss sent
// notifications/initialized.
func (ep *Endpoint) sessionInitialized(ctx context.Context, ss *mcp.ServerSession) {
	ls := ep.replicas.get(ss.ID())
	if ls == nil || ls.ss != ss {
		return
	}
	ls.mu.Lock()
	ls.initialized = true
	ls.mu.Unlock()
	ep.put(ctx, ls)
}

// serveMCP hands the request to the SDK's handler and, when that does not
// know the request's session, to the session's record in the store.
func (ep *Endpoint) serveMCP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sessionIDHeader)
	if id == "" {
		ep.http.ServeHTTP(w, r)
		return
	}
	agent := ep.agentOf(r.Header, auth.TokenInfoFromContext(r.Context()))
	ls := ep.replicas.get(id)
	if ls != nil && ls.agent != agent {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	body := &readTracker{ReadCloser: r.Body}
	r.Body = body
	p := &probeWriter{ResponseWriter: w, body: body}
	if ls != nil && ls.transport == nil && r.Method == http.MethodPost {
		// The SDK's handler pauses its sessions' idle timeout for a POST
		// (sessionInfo.startPOST); the endpoint keeps that timeout.
		ls.startRequest()
		defer ls.endRequest()
	}
	ep.http.ServeHTTP(p, r)
	if !p.missed {
		if ls != nil && ls.transport == nil {
			if r.Method == http.MethodDelete && p.status == http.StatusNoContent {
				ls.closed.Store(true) // before its watch notices: no hot call serves it
				ep.deleteRecord(r.Context(), id)
			} else {
				ep.touch(ls)
			}
		}
		return
	}
	// The SDK's handler has no such session: serve it from the store,
	// unless the ID is known not to be there or its client has looked up
	// too many that were not (unknown.go).
	if ls == nil || ls.transport == nil || ls.closed.Load() {
		client := ep.clientOf(r)
		if v := ep.unknown.check(id, client); v != lookUp {
			refuseUnknown(w, v)
			return
		}
		if r.Method == http.MethodDelete {
			ep.deleteUnheld(w, r, id, agent, client)
			return
		}
		slot, err := ep.sessions.acquire(client)
		if err != nil {
			refuseSession(w, err)
			return
		}
		if ls, err = ep.restore(r.Context(), id, agent, slot); err != nil {
			ep.lookupMissed(id, client, err)
			ep.sessionLookupFailed(w, id, err)
			return
		}
	}
	if r.Method == http.MethodDelete {
		ls.close()
		ep.deleteRecord(r.Context(), id)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ls.startRequest()
	defer ls.endRequest()
	ls.transport.ServeHTTP(w, r)
	ep.touch(ls)
}

// restore rebuilds session id from its store record, or returns the copy
// another request restored meanwhile. slot counts the rebuilt session; it
// is released when none is rebuilt.
func (ep *Endpoint) restore(ctx context.Context, id, agent string, slot *sessionSlot) (_ *liveSession, err error) {
	kept := false
	defer func() {
		if !kept {
			slot.release()
		}
	}()
	stp := ep.store.Load()
	if stp == nil {
		return nil, store.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	rec, err := (*stp).GetMCPSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.WorkspaceID != ep.workspace || rec.AgentID != agent {
		return nil, errOtherCaller
	}
	state := &mcp.ServerSessionState{
		InitializeParams:          new(mcp.InitializeParams),
		NegotiatedProtocolVersion: rec.ProtocolVersion,
		LogLevel:                  mcp.LoggingLevel(rec.LogLevel),
	}
	if len(rec.InitializeParams) > 0 && json.Unmarshal(rec.InitializeParams, state.InitializeParams) == nil {
		restoreRoots(rec.InitializeParams, state.InitializeParams) // clientrequests.go
	} else {
		// A record without the verbatim params: rebuild what it keeps.
		state.InitializeParams = &mcp.InitializeParams{
			ProtocolVersion: rec.ProtocolVersion,
			ClientInfo:      &mcp.Implementation{Name: rec.ClientName, Version: rec.ClientVersion, Title: rec.ClientTitle},
		}
		if len(rec.ClientCapabilities) > 0 {
			state.InitializeParams.Capabilities = new(mcp.ClientCapabilities)
			_ = json.Unmarshal(rec.ClientCapabilities, state.InitializeParams.Capabilities)
		}
	}
	if rec.Initialized {
		state.InitializedParams = new(mcp.InitializedParams)
	}

	ep.replicas.mu.Lock()
	defer ep.replicas.mu.Unlock()
	if cur := ep.replicas.sessions[id]; cur != nil && cur.transport != nil && !cur.closed.Load() {
		return cur, nil
	}
	t := &mcp.StreamableServerTransport{SessionID: id, EventStore: ep.eventStore}
	ss, err := ep.server.Connect(context.WithoutCancel(ctx), t, &mcp.ServerSessionOptions{State: state})
	if err != nil {
		return nil, err
	}
	ls := &liveSession{
		id: id, agent: rec.AgentID, ss: ss, transport: t, created: rec.CreatedAt, slot: slot,
		negotiated: rec.ProtocolVersion, initialized: rec.Initialized, logLevel: rec.LogLevel,
	}
	kept = true
	ls.recorded.Store(true)
	ls.lastTouch.Store(time.Now().UnixNano())
	ep.idleTimeout(ls)
	if ep.replicas.sessions == nil {
		ep.replicas.sessions = make(map[string]*liveSession)
	}
	ep.replicas.sessions[id] = ls // replaces a closed entry, if any
	ep.replicas.watch(ls)
	ep.logger.Debug("MCP session restored from the store", sessionField(id))
	return ls, nil
}

// errOtherCaller is the lookup of a session recorded for another workspace
// or agent: for this caller it does not exist.
var errOtherCaller = fmt.Errorf("the session is another caller's: %w", store.ErrNotFound)

// lookupMissed notes a store lookup that found no session for client
// (unknown.go): an ID the store does not have at all is cached as absent.
func (ep *Endpoint) lookupMissed(id, client string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		ep.unknown.miss(id, client, !errors.Is(err, errOtherCaller))
	}
}

// deleteUnheld ends a session this replica does not hold: its record goes.
func (ep *Endpoint) deleteUnheld(w http.ResponseWriter, r *http.Request, id, agent, client string) {
	stp := ep.store.Load()
	if stp == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeCallTimeout)
	defer cancel()
	rec, err := (*stp).GetMCPSession(ctx, id)
	if err == nil && (rec.WorkspaceID != ep.workspace || rec.AgentID != agent) {
		err = errOtherCaller
	}
	if err == nil {
		err = (*stp).DeleteMCPSession(ctx, id)
	}
	if err != nil {
		ep.lookupMissed(id, client, err)
		ep.sessionLookupFailed(w, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteRecord removes a session the client ended. On failure the record
// expires on its own after the session timeout.
func (ep *Endpoint) deleteRecord(ctx context.Context, id string) {
	stp := ep.store.Load()
	if stp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	if err := (*stp).DeleteMCPSession(ctx, id); err != nil {
		ep.logger.Warn("ended MCP session not deleted from the store; it expires after the session timeout",
			sessionField(id), zap.Error(err))
	}
}

// sessionLookupFailed answers a request whose session could not be served
// from the store: 404 as for any unknown session, or 503 with a retryable
// JSON-RPC error when etcd is unavailable.
func (ep *Endpoint) sessionLookupFailed(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	ep.logger.Warn("MCP session lookup in the store failed", sessionField(id), zap.Error(err))
	msg := "the MCP session is not held by this replica and the session store cannot be read"
	if errors.Is(err, store.ErrUnavailable) {
		msg = "the MCP session is not held by this replica and the session store (etcd) is unavailable; retry shortly"
		w.Header().Set("Retry-After", "1")
	}
	writeJSONRPCError(w, http.StatusServiceUnavailable, -32000, msg, map[string]any{"retryable": true})
}

// writeJSONRPCError answers with a JSON-RPC error object without an id.
func writeJSONRPCError(w http.ResponseWriter, status, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// touch pushes the session record's expiry out, in the background and at
// most once per session timeout / 10, so that a session in use here does
// not expire for the other replicas. A record that is gone was deleted by
// the client through another replica: the session ends here too. A record
// that could not be written at initialize is written now.
func (ep *Endpoint) touch(ls *liveSession) {
	stp := ep.store.Load()
	if stp == nil {
		return
	}
	now := time.Now().UnixNano()
	if now-ls.lastTouch.Load() < int64(ep.sessionTTL/10) || !ls.touching.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer ls.touching.Store(false)
		if !ls.recorded.Load() {
			ep.put(context.Background(), ls)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		defer cancel()
		err := (*stp).TouchMCPSession(ctx, ls.id)
		switch {
		case err == nil:
			ls.lastTouch.Store(now)
		case errors.Is(err, store.ErrNotFound):
			ep.logger.Info("MCP session ended elsewhere (its store record is gone); closing it here", sessionField(ls.id))
			ls.close()
		default:
			ep.logger.Debug("MCP session expiry not pushed out; retried on its next use", sessionField(ls.id), zap.Error(err))
		}
	}()
}

// idleTimeout starts the session's idle timeout, when sessions have one.
func (ep *Endpoint) idleTimeout(ls *liveSession) {
	if ep.sessionTTL <= 0 {
		return
	}
	ls.timerMu.Lock()
	defer ls.timerMu.Unlock()
	ls.idle = ep.sessionTTL
	ls.timer = time.AfterFunc(ep.sessionTTL, ls.close)
}

// close ends the session on this replica.
func (ls *liveSession) close() {
	ls.closed.Store(true)
	_ = ls.ss.Close()
}

// startRequest pauses a restored session's idle timeout while a request
// runs; endRequest restarts it when none does.
func (ls *liveSession) startRequest() {
	ls.timerMu.Lock()
	defer ls.timerMu.Unlock()
	if ls.timer == nil {
		return
	}
	if ls.refs == 0 {
		ls.timer.Stop()
	}
	ls.refs++
}

func (ls *liveSession) endRequest() {
	ls.timerMu.Lock()
	defer ls.timerMu.Unlock()
	if ls.timer == nil {
		return
	}
	ls.refs--
	if ls.refs == 0 {
		ls.timer.Reset(ls.idle)
	}
}

func (ls *liveSession) stopTimer() {
	ls.timerMu.Lock()
	defer ls.timerMu.Unlock()
	if ls.timer != nil {
		ls.timer.Stop()
		ls.timer = nil
	}
}

// readTracker notes whether a request body has been read.
type readTracker struct {
	io.ReadCloser
	read atomic.Bool
}

func (t *readTracker) Read(p []byte) (int, error) {
	t.read.Store(true)
	return t.ReadCloser.Read(p)
}

// probeWriter passes the SDK handler's response through, except its
// "session not found" answer — a 404 written before the request body was
// read — which it swallows and reports as missed.
type probeWriter struct {
	http.ResponseWriter
	body   *readTracker
	status int
	missed bool
}

func (p *probeWriter) WriteHeader(code int) {
	if p.status != 0 {
		if !p.missed {
			p.ResponseWriter.WriteHeader(code)
		}
		return
	}
	p.status = code
	if code == http.StatusNotFound && !p.body.read.Load() {
		p.missed = true
		h := p.ResponseWriter.Header()
		h.Del("Content-Type")
		h.Del("X-Content-Type-Options")
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *probeWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.WriteHeader(http.StatusOK)
	}
	if p.missed {
		return len(b), nil
	}
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for the SDK's SSE streams.
func (p *probeWriter) Flush() {
	if !p.missed {
		_ = http.NewResponseController(p.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (p *probeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Interface guards.
var (
	_ http.Flusher  = (*probeWriter)(nil)
	_ io.ReadCloser = (*readTracker)(nil)
)
