package mcpserver

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The in-flight table: one per session, for both paths. A session's call
// is in flight from its POST's arrival until its POST has ended and its
// handler has returned (a call go-sdk serves outlives a POST whose client
// left). ServeHTTP claims a POST's call id in it before either path sees
// the POST (claimCall) and refuses an id already in flight there, on
// whichever path, with the answer go-sdk gives (servePOST); go-sdk's own
// check, behind it, then never fires for a call of a session this replica
// holds. The SDK's handler holds the call while it runs (flightMiddleware),
// which finds it through callHeader, and the hot path keeps its call's
// cancel function in it for notifications/cancelled (cancelHot).
//
// A batch is go-sdk's alone (the sessions' protocols before 2025-06-18),
// as is a call of a session not yet initialized (not in replicas yet).

// callHeader names a POST's call id, as encoded, from ServeHTTP to the
// middlewares.
const callHeader = internalHeaderPrefix + "Call"

// flight is a call in flight: refs are its POST and its handler, cancel
// ends a hot path call (nil for go-sdk's, which ends its own).
type flight struct {
	refs   int
	cancel context.CancelFunc
}

// claimCall claims the id of a session's call in the session's in-flight
// table. It answers a POST whose id is in flight already and reports that
// it did (refused); otherwise release, when not nil, must run once the POST
// ends.
func (ep *Endpoint) claimCall(w http.ResponseWriter, r *http.Request, p *peeked) (release func(), refused bool) {
	if r.Method != http.MethodPost || p.body == nil {
		return nil, false
	}
	sid := r.Header.Get(sessionIDHeader)
	if sid == "" {
		return nil, false
	}
	m := p.message()
	if !m.ok || m.method == "" || len(m.id) == 0 {
		return nil, false
	}
	ls := ep.replicas.get(sid)
	ti := auth.TokenInfoFromContext(r.Context())
	if ls == nil || ls.closed.Load() || ls.agent != ep.agentOf(r.Header, ti) {
		return nil, false // the SDK answers 404
	}
	if ls.transport == nil && ls.tokenUser != "" && (ti == nil || ti.UserID != ls.tokenUser) {
		return nil, false // the SDK answers 403
	}
	id, key, ok := hotID(m.id)
	if !ok {
		return nil, false // the SDK refuses it on its own
	}
	if !ls.hold(string(key), true) {
		ep.refuseDuplicate(w, id, ls)
		return nil, true
	}
	r.Header.Set(callHeader, string(key))
	return func() { ls.release(string(key)) }, false
}

// refuseDuplicate answers a call whose id is in flight on the session as
// go-sdk's servePOST does: the stream's headers set, then a 400 JSON-RPC
// error.
func (ep *Endpoint) refuseDuplicate(w http.ResponseWriter, id jsonrpc.ID, ls *liveSession) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	if !ep.transport.jsonResponse || ls.transport != nil {
		h.Set("Connection", "keep-alive")
	}
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
		Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %v", id.Raw())}})
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(data)
}

// hold adds a reference to the call of key: a new one when claim is set
// (false if the call is in flight already), an existing one otherwise
// (false if it is not in flight).
func (ls *liveSession) hold(key string, claim bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	f := ls.calls[key]
	switch {
	case claim && f != nil, !claim && f == nil:
		return false
	case f == nil:
		if ls.calls == nil {
			ls.calls = make(map[string]*flight)
		}
		f = &flight{}
		ls.calls[key] = f
	}
	f.refs++
	return true
}

// release drops a reference to the call of key; the last one ends it.
func (ls *liveSession) release(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if f := ls.calls[key]; f != nil {
		if f.refs--; f.refs <= 0 {
			delete(ls.calls, key)
		}
	}
}

// setCancel gives the call of key the function that cancels it.
func (ls *liveSession) setCancel(key string, cancel context.CancelFunc) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if f := ls.calls[key]; f != nil {
		f.cancel = cancel
	}
}

// cancelOf is the function that cancels the call of key (nil for none).
func (ls *liveSession) cancelOf(key string) context.CancelFunc {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if f := ls.calls[key]; f != nil {
		return f.cancel
	}
	return nil
}

// flightMiddleware holds a session's call in the in-flight table while
// its handler runs, which can outlast its POST.
func (ep *Endpoint) flightMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		extra := req.GetExtra()
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if extra == nil || extra.Header == nil || ss == nil || ss.ID() == "" {
			return next(ctx, method, req)
		}
		key := extra.Header.Get(callHeader)
		if key == "" {
			return next(ctx, method, req)
		}
		ls := ep.replicas.get(ss.ID())
		if ls == nil || !ls.hold(key, false) {
			return next(ctx, method, req)
		}
		defer ls.release(key)
		return next(ctx, method, req)
	}
}
