package mcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// maxConns bounds the upstream connections the adapter keeps: the least
// recently used one is closed beyond it (headers that differ per caller,
// such as an exchanged token, make a connection each).
const maxConns = 64

// newPool returns an empty pool.
func newPool() *pool {
	return &pool{conns: lru.New(maxConns, func(_ string, c *conn) { c.drop(nil) })}
}

// pool holds one upstream session per connection key.
type pool struct {
	conns *lru.Cache[string, *conn]
	// progress routes the sessions' progress notifications to the calls.
	progress progressRoutes
	// watch tells the hosts when upstreams' tools change (watch.go).
	watch watchHub
}

// conn is the session of one upstream, opened lazily and again after it
// is lost.
type conn struct {
	up     *upstream
	routes *progressRoutes
	// mu serialises opening the session; calls share an open one.
	mu      sync.Mutex
	session *gomcp.ClientSession
	// tooLarge is set when the upstream sent a message beyond
	// max_message_bytes (bounds.go); the session then breaks.
	tooLarge atomic.Bool
	// logs routes the upstream's log messages to the calls (logs.go),
	// updates its resource updates to the watches (complete.go).
	logs    logRoutes
	updates resourceRoutes
	// hs watches the handshake of a session being opened (handshake.go).
	hs handshake
	// watch hears of changed tools; opened counts the sessions opened.
	watch  *watchHub
	opened int
	// level is the logging level set on the session levelOf (c.mu).
	level   string
	levelOf *gomcp.ClientSession
	// raw is the raw channel of the session rawOf (c.mu; raw.go), and
	// taskCalls whether that upstream runs tools/call as MCP Tasks.
	raw       rawChannel
	rawOf     *gomcp.ClientSession
	taskCalls bool
	// pinned is the protocol version the session asks for ("" for the
	// latest): a session of an older generation for the calls of its
	// clients (ask.go, callConn).
	pinned string
	// caps are the client capabilities the session declares, nil for all
	// the gateway relays (ask.go, callConn).
	caps *gomcp.ClientCapabilities
	// listening is closed once the session being opened over Streamable
	// HTTP got the answer to its standalone GET (c.mu; nil over stdio): a
	// server without an event store drops what it sends there before.
	listening chan struct{}
}

// listenWait bounds how long a new session over Streamable HTTP waits
// for its standalone stream before its first use.
const listenWait = 2 * time.Second

func (p *pool) get(u *upstream) *conn {
	c, _ := p.conns.GetOrPut(u.key, func() *conn { return &conn{up: u, routes: &p.progress, watch: &p.watch} })
	return c
}

// tooLarge reports, once, whether the connection of u broke on a message
// beyond max_message_bytes.
func (p *pool) tooLarge(u *upstream) bool {
	c, ok := p.conns.Get(u.key)
	return ok && c.tooLarge.CompareAndSwap(true, false)
}

// closeAll ends every upstream session (and child process).
func (p *pool) closeAll() {
	var conns []*conn
	p.conns.DeleteFunc(func(_ string, c *conn) bool {
		conns = append(conns, c)
		return true
	})
	for _, c := range conns {
		c.mu.Lock()
		s := c.session
		c.session = nil
		c.mu.Unlock()
		if s != nil {
			s.Close()
		}
	}
}

// open returns the open session, opening one when there is none.
func (c *conn) open(ctx context.Context) (*gomcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		return c.session, nil
	}
	opts := &gomcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *gomcp.ProgressNotificationClientRequest) {
			c.routes.deliver(req.Params)
		},
		LoggingMessageHandler: func(_ context.Context, req *gomcp.LoggingMessageRequest) {
			c.logs.deliver(req.Params)
		},
		ToolListChangedHandler: func(context.Context, *gomcp.ToolListChangedRequest) {
			c.watch.changed(c.up.key) // watch.go
		},
		ResourceListChangedHandler: func(context.Context, *gomcp.ResourceListChangedRequest) {
			c.watch.listChanged(c.up.key, listResources)
		},
		PromptListChangedHandler: func(context.Context, *gomcp.PromptListChangedRequest) {
			c.watch.listChanged(c.up.key, listPrompts)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *gomcp.ResourceUpdatedNotificationRequest) {
			c.updates.deliver(req.Params.URI) // complete.go
		}}
	c.askHandlers(opts) // ask.go
	client := gomcp.NewClient(&gomcp.Implementation{Name: "crank", Version: version}, opts)
	client.AddReceivingMiddleware(c.rootsMiddleware)
	client.AddSendingMiddleware(c.inputMiddleware)
	t, err := c.transport()
	if err != nil {
		return nil, &connectError{err}
	}
	// The session outlives the call that opens it: its standalone stream
	// (whose GET keeps the values of this context) must not read as that
	// call's stream, nor its requests find that call's asker.
	ctx = context.WithValue(context.WithValue(ctx, callTagKey{}, ""), askerKey{}, (*asker)(nil))
	hctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	c.hs.start(fail)
	s, err := client.Connect(hctx, t, &gomcp.ClientSessionOptions{ProtocolVersion: c.pinned})
	caps := c.hs.stop()
	if err != nil {
		if cause := context.Cause(hctx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause // the handshake watch failed it
		}
		return nil, &connectError{err}
	}
	if c.listening != nil {
		// An upstream may send a request of the session (one that names no
		// call: TypeScript's server.createMessage) on the standalone
		// stream only; a session opened for a call must listen on it
		// before the call goes out, or the request finds no one.
		select {
		case <-c.listening:
		case <-time.After(listenWait):
		case <-ctx.Done():
		}
	}
	c.session = s
	c.raw, c.rawOf, c.taskCalls = rawOf(t, s), s, taskCallsIn(caps)
	if c.opened++; c.opened > 1 {
		// A new session after a lost one: the upstream may have
		// restarted with other tools.
		c.watch.changed(c.up.key)
	}
	// A session that ends by itself (the upstream closed its stream or
	// exited) is forgotten at once, so the next call opens a new one
	// rather than failing on the dead one.
	go func() {
		_ = s.Wait()
		c.drop(s)
	}()
	return s, nil
}

// drop forgets the session s (any session when s is nil) and closes it.
func (c *conn) drop(s *gomcp.ClientSession) {
	c.mu.Lock()
	if s == nil {
		s = c.session
	}
	if c.session == s {
		c.session = nil
	}
	c.mu.Unlock()
	if s != nil {
		go s.Close() // a child process may take a while to exit
	}
}

func (c *conn) transport() (gomcp.Transport, error) {
	u := c.up
	if u.command != "" {
		return c.stdioTransport() // bounds.go
	}
	// Concurrent calls over one upstream session are concurrent POSTs,
	// on the pool of connections NewClient keeps per upstream. Redirects
	// stay within the url's origin: the configured headers are added to
	// every request, so they must never reach another host.
	client := httpadapter.NewClient(httpadapter.ClientOptions{TLS: u.tls, Egress: u.egress})
	listening := make(chan struct{})
	c.listening = listening
	client.Transport = limitTransport{base: client.Transport, max: u.maxMessage, marked: &c.tooLarge, logs: &c.logs, hs: &c.hs,
		listened: sync.OnceFunc(func() { close(listening) })}
	if len(u.headers) > 0 {
		client.Transport = headerTransport{base: client.Transport, headers: u.headers}
	}
	return &gomcp.StreamableClientTransport{Endpoint: u.url, HTTPClient: client, MaxRetries: 2}, nil
}

// rawOf is the raw channel of the session s, opened over t (raw.go).
func rawOf(t gomcp.Transport, s *gomcp.ClientSession) rawChannel {
	switch t := t.(type) {
	case *rawTransport:
		return t.conn
	case *gomcp.StreamableClientTransport:
		return &rawHTTP{client: t.HTTPClient, url: t.Endpoint, session: s}
	}
	return nil
}

// rawFor is the raw channel of the session s and whether its upstream
// runs tools/call as MCP Tasks; nil when s is no longer the open session.
func (c *conn) rawFor(s *gomcp.ClientSession) (rawChannel, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rawOf != s {
		return nil, false
	}
	return c.raw, c.taskCalls
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header[k] = v
	}
	return t.base.RoundTrip(req)
}

// lost reports whether err means the session is gone: the next call must
// open a new one.
func lost(err error) bool {
	return errors.Is(err, gomcp.ErrSessionMissing) || errors.Is(err, gomcp.ErrConnectionClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// codeNotSent is the go-sdk's JSON-RPC code for a request its transport
// could not send (jsonrpc2.ErrRejected, "rejected by transport"): the
// upstream never saw it, so sending it again is safe.
const codeNotSent = -32005

// notSent reports whether err means the request never reached the
// upstream.
func notSent(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == codeNotSent
}

// connectError is a failure to open a session: the upstream is down, is
// not an MCP server, or did not complete the handshake.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// setLevel asks the upstream for log messages at level and above on the
// session s, unless it was asked for as much already, when the upstream
// has the logging capability. The level of the shared session only goes
// down; the adapter passes on to each call the levels its client asked
// for.
func (c *conn) setLevel(ctx context.Context, s *gomcp.ClientSession, level string) {
	if ir := s.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
		return
	}
	c.mu.Lock()
	cur := c.level
	if c.levelOf != s {
		cur = ""
	}
	c.mu.Unlock()
	want := lowerLevel(cur, level)
	if want == cur {
		return
	}
	//nolint:staticcheck // logging is deprecated as of 2026-07-28, and still served before it
	if err := s.SetLoggingLevel(ctx, &gomcp.SetLoggingLevelParams{Level: gomcp.LoggingLevel(want)}); err != nil {
		return // the call goes on without the upstream's log messages
	}
	c.mu.Lock()
	if c.levelOf != s || lowerLevel(c.level, want) == want {
		c.level, c.levelOf = want, s
	}
	c.mu.Unlock()
}
