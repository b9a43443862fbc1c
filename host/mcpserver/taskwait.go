package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

// Bounded tasks/result waits. tasks/result blocks until its task is final,
// which can take as long as the job's timeout. The SDK runs it on the
// session, not on the POST that carried it: in a stateful session a client
// that drops the POST does not end the wait (it may resume the stream with
// Last-Event-ID). So the endpoint ties each wait to its POST: when the POST
// ends before the result, the wait goes on for as long as the client could
// resume the stream (the event TTL of a resumable SSE endpoint; not at all
// otherwise) and then ends with an error saying to ask again. And a session
// has at most maxResultWaits of them at once.

// maxResultWaits bounds the tasks/result requests waiting in one session.
const maxResultWaits = 16

// requestHeader carries the token of a tasks/result POST from ServeHTTP to
// the tasks middleware, which finds the POST's end by it.
const requestHeader = internalHeaderPrefix + "Request"

// resultWaits tracks the POSTs of tasks/result requests and the waits of
// each session.
type resultWaits struct {
	seq   atomic.Uint64
	posts sync.Map // token → chan struct{}, closed when the POST ends
	mu    sync.Mutex
	n     map[string]int // waits by session ID
	// grace is how long a wait outlives its POST.
	grace time.Duration
}

// linkResult marks a tasks/result POST so that its wait can see the POST
// end, and returns what ServeHTTP calls when it does (nil for another
// request).
func (ep *Endpoint) linkResult(r *http.Request, p *peeked) func() {
	if p.body == nil || !bytes.Contains(p.body, []byte(methodTasksResult)) || p.message().method != methodTasksResult {
		return nil
	}
	token := strconv.FormatUint(ep.waits.seq.Add(1), 36)
	done := make(chan struct{})
	ep.waits.posts.Store(token, done)
	r.Header.Set(requestHeader, token)
	return func() {
		ep.waits.posts.Delete(token)
		close(done)
	}
}

// postKey is the context key of the end of a task request's POST.
type postKey struct{}

// closedPost stands for a POST that ended before its request was served.
var closedPost = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// withPost adds the end of the request's POST to ctx, when ServeHTTP
// linked it (a token whose POST is gone ended already).
func (ep *Endpoint) withPost(ctx context.Context, extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.Header.Get(requestHeader) == "" {
		return ctx
	}
	done := closedPost
	if c, ok := ep.waits.posts.Load(extra.Header.Get(requestHeader)); ok {
		done = c.(chan struct{})
	}
	return context.WithValue(ctx, postKey{}, (<-chan struct{})(done))
}

// errClientGone ends a wait whose client went away.
var errClientGone = errors.New("the client went away")

// resultWait returns the context a tasks/result waits in: ctx, ended
// errClientGone after the request's POST ended and the grace passed. It
// counts the wait against its session; release ends it.
func (ep *Endpoint) resultWait(ctx context.Context, ss *mcp.ServerSession) (context.Context, func(), error) {
	session := ""
	if ss != nil {
		session = ss.ID()
	}
	w := &ep.waits
	if session != "" {
		w.mu.Lock()
		if w.n[session] >= maxResultWaits {
			w.mu.Unlock()
			return nil, nil, &jsonrpc.Error{Code: -32000, Message: fmt.Sprintf(
				"too many tasks/result requests waiting in this session (at most %d): wait for one to return, or poll tasks/get", maxResultWaits)}
		}
		if w.n == nil {
			w.n = map[string]int{}
		}
		w.n[session]++
		w.mu.Unlock()
	}
	wctx, cancel := context.WithCancelCause(ctx)
	if done, ok := ctx.Value(postKey{}).(<-chan struct{}); ok {
		go func() {
			select {
			case <-done:
			case <-wctx.Done():
				return
			}
			if w.grace > 0 {
				t := time.NewTimer(w.grace)
				defer t.Stop()
				select {
				case <-t.C:
				case <-wctx.Done():
					return
				}
			}
			cancel(errClientGone)
		}()
	}
	release := func() {
		cancel(nil)
		if session == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[session]--; w.n[session] <= 0 {
			delete(w.n, session)
		}
	}
	return wctx, release, nil
}

// waiting returns the number of tasks/result requests waiting in session.
func (w *resultWaits) waiting(session string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[session]
}

// resultGrace is how long a tasks/result wait outlives its POST: as long
// as the client can resume the stream (the event TTL) on a resumable SSE
// endpoint, not at all where it cannot.
func resultGrace(o Options) time.Duration {
	if o.Stateless || !o.Resumable || o.JSONResponse {
		return 0
	}
	if o.EventLimits.TTL > 0 {
		return o.EventLimits.TTL
	}
	return store.DefaultEventTTL
}

// clientGoneError is the answer of a tasks/result whose client went away.
func (ep *Endpoint) clientGoneError(id string) error {
	ep.logger.Debug("tasks/result stopped waiting: its client went away", zap.String("task", id))
	return &jsonrpc.Error{Code: -32000, Message: fmt.Sprintf(
		"tasks/result of task %q stopped waiting: the request's stream was gone for %s; call tasks/result again or poll tasks/get",
		id, ep.waits.grace)}
}
