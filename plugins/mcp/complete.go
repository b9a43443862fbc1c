package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Completions and subscriptions of what an entry publishes.
//
// When the upstream declares the completions capability, an entry's
// prompts and resource templates complete their arguments (sdk.Completer):
// one completion/complete on the shared upstream session, with the
// upstream prompt's name (the config's prompt) or the template's URI
// template, which publishing leaves as it is. When it declares
// resources.subscribe, its resources can be subscribed to
// (sdk.ResourceWatcher): the host watches each URI once, the adapter
// subscribes on the shared session and routes the upstream's
// notifications/resources/updated of that URI to the watch, and
// unsubscribes when the last watch of the URI ends. A session the
// upstream loses loses its subscriptions: the watch ends with an error,
// and the host's subscribers see no more updates of it.

var (
	_ sdk.Completer       = (*adapter)(nil)
	_ sdk.ResourceWatcher = (*adapter)(nil)
)

// offersCompletions and offersSubscribe report what the upstream of s
// declared beyond lists and reads.
func offersCompletions(s *gomcp.ClientSession) bool {
	ir := s.InitializeResult()
	return ir != nil && ir.Capabilities != nil && ir.Capabilities.Completions != nil
}

func offersSubscribe(s *gomcp.ClientSession) bool {
	ir := s.InitializeResult()
	return ir != nil && ir.Capabilities != nil && ir.Capabilities.Resources != nil && ir.Capabilities.Resources.Subscribe
}

// Complete implements sdk.Completer: one completion/complete on the
// upstream, answering its completion.
func (a *adapter) Complete(ctx context.Context, req *sdk.CompleteRequest) (json.RawMessage, error) {
	u, err := a.upstreamOf(&req.Operation)
	if err != nil {
		return nil, err
	}
	ref := &gomcp.CompleteReference{Type: req.RefType}
	switch req.RefType {
	case sdk.RefPrompt:
		if u.prompt == "" {
			return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label,
				Message: "config.prompt: no upstream prompt named: the config of a published prompt names it"}
		}
		ref.Name = u.prompt
	case sdk.RefResource:
		ref.URI = req.Ref
	default:
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label,
			Message: "ref.type: must be ref/prompt or ref/resource"}
	}
	params := &gomcp.CompleteParams{Ref: ref, Argument: gomcp.CompleteParamsArgument{Name: req.Argument, Value: req.Value}}
	if len(req.Arguments) > 0 {
		params.Context = &gomcp.CompleteContext{Arguments: req.Arguments}
	}
	return a.ask(ctx, u, req.Operation.Timeout, "the completion", func(ctx context.Context, s *gomcp.ClientSession) (any, error) {
		res, err := s.Complete(ctx, params)
		if err != nil {
			return nil, err
		}
		if res.Completion.Values == nil {
			res.Completion.Values = []string{}
		}
		return res.Completion, nil
	})
}

// resourceRoutes routes a connection's notifications/resources/updated
// to the watches of their URIs.
type resourceRoutes struct {
	mu      sync.Mutex
	watches map[string]map[*chan string]bool
	// ends are closed when their session ends: one waiter per session
	// however many watches it carries.
	ends map[*gomcp.ClientSession]chan struct{}
}

// ended is closed when the session s ends.
func (r *resourceRoutes) ended(s *gomcp.ClientSession) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.ends[s]; ok {
		return ch
	}
	if r.ends == nil {
		r.ends = map[*gomcp.ClientSession]chan struct{}{}
	}
	ch := make(chan struct{})
	r.ends[s] = ch
	go func() {
		_ = s.Wait()
		r.mu.Lock()
		delete(r.ends, s)
		r.mu.Unlock()
		close(ch)
	}()
	return ch
}

// add routes the updates of uri to ch until remove; last reports whether
// remove took the URI's last watch.
func (r *resourceRoutes) add(uri string, ch *chan string) (remove func() (last bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watches == nil {
		r.watches = map[string]map[*chan string]bool{}
	}
	if r.watches[uri] == nil {
		r.watches[uri] = map[*chan string]bool{}
	}
	r.watches[uri][ch] = true
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.watches[uri], ch)
		if len(r.watches[uri]) > 0 {
			return false
		}
		delete(r.watches, uri)
		return true
	}
}

// deliver hands an update of uri to the watches of uri and of the URIs
// it lies below. A watch with an update pending gets no second one: the
// host learns that the resource changed, not how often.
func (r *resourceRoutes) deliver(uri string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for w, chans := range r.watches {
		if w != uri && !strings.HasPrefix(uri, strings.TrimSuffix(w, "/")+"/") {
			continue
		}
		for ch := range chans {
			select {
			case *ch <- uri:
			default:
			}
		}
	}
}

// unsubscribeTimeout bounds the resources/unsubscribe of a watch that
// ended.
const unsubscribeTimeout = 5 * time.Second

// WatchResource implements sdk.ResourceWatcher: resources/subscribe on
// the upstream's session, its updates of the URI, and
// resources/unsubscribe when ctx ends and no other watch of the URI is
// left.
func (a *adapter) WatchResource(ctx context.Context, req *sdk.ResourceRequest, events sdk.ResourceEvents) error {
	u, err := a.upstreamOf(&req.Operation)
	if err != nil {
		return err
	}
	c := a.pool.get(u)
	ch := make(chan string, 1)
	remove := c.updates.add(req.URI, &ch)
	var session *gomcp.ClientSession
	sctx, cancel := withTimeout(ctx, req.Operation.Timeout)
	err = a.withConn(sctx, c, true, func(s *gomcp.ClientSession) error {
		session = s
		return s.Subscribe(sctx, &gomcp.SubscribeParams{URI: req.URI})
	})
	cancel()
	defer func() {
		if remove() && session != nil {
			uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			_ = session.Unsubscribe(uctx, &gomcp.UnsubscribeParams{URI: req.URI})
		}
	}()
	if err != nil {
		return a.failure(ctx, u, err)
	}
	if err := events.Subscribed(); err != nil {
		return err
	}
	done := c.updates.ended(session)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-done:
			return &sdk.UpstreamError{Kind: sdk.KindTransport, Upstream: u.label, Retryable: true,
				Message: "the upstream session ended, and with it the subscription to " + req.URI}
		case uri := <-ch:
			if err := events.Updated(uri); err != nil {
				return err
			}
		}
	}
}
