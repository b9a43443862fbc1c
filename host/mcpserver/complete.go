package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// Completions and subscriptions of the host's publications.
//
// completion/complete of a published prompt's or resource template's
// argument goes to the host (host.Complete), under the policy as a
// rendering or read is (args {"argument": …, "value": …}); the
// completions capability is offered only while the active host has a
// publication whose upstream offers completions, and a completion of
// another is -32601.
//
// resources/subscribe of a published resource (or a URI a template
// matches) whose upstream offers subscriptions is a subscription of the
// client's session (go-sdk keeps which sessions subscribed to which URI,
// and sends them notifications/resources/updated); the endpoint watches
// each URI once through the host (host.WatchResource) while a session of
// this replica is subscribed to it, and ends the watch at the last
// unsubscribe, or at the first update after the last subscribed session
// is gone. resources.subscribe is offered only while the active host has
// such a publication. A 2026-07-28 client's subscriptions/listen with
// resourceSubscriptions subscribes the same way for as long as it
// listens. Subscriptions live on the replica that took them: a session
// that moves to another replica (sessions.go) keeps none, and its client
// must subscribe again (docs/architecture/mcp-upstreams.md).

// offerPublished removes from caps what the host h does not offer, and
// adds the MCP Apps extension when it serves an App.
func offerPublished(caps *mcp.ServerCapabilities, h *host.Host) {
	if caps == nil {
		return
	}
	if h == nil || !h.Completions() {
		caps.Completions = nil
	}
	if caps.Resources != nil && (h == nil || !h.Subscriptions()) {
		caps.Resources.Subscribe = false
	}
	if h != nil && h.Apps() {
		// A federated tool has an MCP App (its _meta names its ui
		// resource): the gateway serves the extension's tools and
		// ui:// resources as they are.
		caps.AddExtension(host.ExtensionUI, nil)
	}
}

// publishedCapsMiddleware offers completions, subscriptions and the MCP
// Apps extension in the initialize and server/discover results only when
// the host has them.
func (ep *Endpoint) publishedCapsMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			offerPublished(r.Capabilities, planOf(ctx).h)
		case *mcp.DiscoverResult:
			offerPublished(r.Capabilities, planOf(ctx).h)
		}
		return res, err
	}
}

// complete answers completion/complete.
func (ep *Endpoint) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := planOf(ctx)
	ref := req.Params.Ref
	var kind host.PublicationKind
	var key, uri string
	switch ref.Type {
	case "ref/prompt":
		kind, key = host.KindPrompt, ref.Name
	case "ref/resource":
		kind, key, uri = host.KindResourceTemplate, ref.URI, ref.URI
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("ref.type: must be ref/prompt or ref/resource, got %q", ref.Type)}
	}
	args, _ := json.Marshal(map[string]string{"argument": req.Params.Argument.Name, "value": req.Params.Argument.Value})
	pr, err := ep.publicationRequest(p, kind, key, uri, args)
	if err != nil {
		return nil, err
	}
	arg := host.CompletionRequest{Argument: req.Params.Argument.Name, Value: req.Params.Argument.Value}
	if req.Params.Context != nil {
		arg.Arguments = req.Params.Context.Arguments
	}
	raw, err := p.h.Complete(ctx, pr, arg)
	if err != nil {
		return nil, publicationError(err)
	}
	var c mcp.CompletionResultDetails
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s %q: the adapter's completion is not an MCP completion: %v", kind, key, err)}
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	return &mcp.CompleteResult{Completion: c}, nil
}

// watches are the resources the endpoint watches for its sessions'
// subscriptions, by URI.
type watches struct {
	mu    sync.Mutex
	byURI map[string]*watch
}

// watch is one URI's: the sessions subscribed to it, and the host's
// watch, under way until ready is closed (err then says whether it
// failed).
type watch struct {
	sessions map[*mcp.ServerSession]bool
	ready    chan struct{}
	err      error
	stop     context.CancelFunc
}

// subscribe answers resources/subscribe.
func (ep *Endpoint) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	p := planOf(ctx)
	uri := req.Params.URI
	var pub *host.Publication
	if p.h != nil {
		pub, _ = p.h.ResourceOf(uri)
	}
	if pub == nil {
		return mcp.ResourceNotFoundError(uri)
	}
	args, _ := json.Marshal(map[string]string{"uri": uri})
	if err := ep.publicationPolicy(p, pub, uri, args); err != nil {
		return err
	}
	if !pub.Subscribes {
		return &jsonrpc.Error{Code: host.CodeMethodNotFound, Message: fmt.Sprintf("resource %q cannot be subscribed to (its upstream offers no subscriptions)", uri)}
	}
	ws := &ep.watches
	ws.mu.Lock()
	if ws.byURI == nil {
		ws.byURI = map[string]*watch{}
	}
	if w := ws.byURI[uri]; w != nil {
		w.sessions[req.Session] = true
		ws.mu.Unlock()
		<-w.ready
		if w.err != nil {
			return w.err
		}
		return nil
	}
	wctx, stop := context.WithCancel(context.Background())
	w := &watch{sessions: map[*mcp.ServerSession]bool{req.Session: true}, ready: make(chan struct{}), stop: stop}
	ws.byURI[uri] = w
	ws.mu.Unlock()

	pr := host.PublicationRequest{Publication: pub, URI: uri, WorkspaceID: p.scope.WorkspaceID, AgentID: p.scope.AgentID,
		SubjectToken: p.token, TraceParent: p.traceParent, TraceState: p.traceState}
	done, err := p.h.WatchResource(wctx, pr, func(updated string) { ep.resourceUpdated(w, uri, updated) })
	if err != nil {
		stop()
		w.err = publicationError(err)
		ep.endWatch(uri, w)
		close(w.ready)
		return w.err
	}
	close(w.ready)
	go func() {
		var err error
		select {
		case err = <-done:
		case <-ep.closed:
		}
		stop()
		if err != nil && !errors.Is(err, context.Canceled) {
			ep.logger.Warn("resource subscription ended", zap.String("uri", uri), zap.Error(err))
		}
		ep.endWatch(uri, w)
	}()
	return nil
}

// unsubscribe answers resources/unsubscribe: the session's subscription
// ends, and the watch with the URI's last one.
func (ep *Endpoint) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	ws := &ep.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byURI[req.Params.URI]; w != nil {
		delete(w.sessions, req.Session)
		ep.pruneLocked(req.Params.URI, w)
	}
	return nil
}

// pruneLocked forgets the sessions of w that are gone, and ends w when
// none is left.
func (ep *Endpoint) pruneLocked(uri string, w *watch) {
	live := map[*mcp.ServerSession]bool{}
	for s := range ep.server.Sessions() {
		live[s] = true
	}
	for s := range w.sessions {
		if !live[s] {
			delete(w.sessions, s)
		}
	}
	if len(w.sessions) == 0 {
		w.stop()
		if ep.watches.byURI[uri] == w {
			delete(ep.watches.byURI, uri)
		}
	}
}

// endWatch forgets the watch w of uri.
func (ep *Endpoint) endWatch(uri string, w *watch) {
	ep.watches.mu.Lock()
	defer ep.watches.mu.Unlock()
	if ep.watches.byURI[uri] == w {
		delete(ep.watches.byURI, uri)
	}
}

// resourceUpdated tells the sessions subscribed to uri that the resource
// updated (uri itself, or one below it) changed.
func (ep *Endpoint) resourceUpdated(w *watch, uri, updated string) {
	ep.watches.mu.Lock()
	ep.pruneLocked(uri, w)
	left := len(w.sessions)
	ep.watches.mu.Unlock()
	if left == 0 {
		return
	}
	ctx := context.Background()
	_ = ep.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: updated})
	if updated != uri {
		_ = ep.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}
