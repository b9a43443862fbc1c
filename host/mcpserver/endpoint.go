package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/host/servercard"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// Options configure an Endpoint.
type Options struct {
	// Version is the server version reported to MCP clients.
	Version string
	// Workspace is the workspace id calls through the endpoint run in.
	Workspace string
	// AgentHeader names a request header carrying the calling agent's id,
	// used when the request has no authenticated user. The endpoint trusts
	// it as it is: it must be set by a proxy that removes the clients' own
	// copies. Its value is an identity of its own ("header:<value>"), never
	// an authenticated user's or a session's (caller.go).
	AgentHeader string
	// AuthenticatedUser returns the user that an authentication layer in
	// front of the endpoint verified for a request ("" for none). It is
	// the caller's identity ("user:<id>") unless a verified MCP bearer
	// token names one. A request with neither and no agent header runs as
	// its MCP session ("session:<digest of its ID>"); a stateless one has
	// no agent.
	AuthenticatedUser func(*http.Request) string
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may call the endpoint. A request with any other Origin header gets
	// 403. Loopback origins (localhost, 127.0.0.0/8, [::1]) are always
	// allowed; "*" allows every origin.
	AllowedOrigins []string
	// SessionTimeout closes MCP sessions idle for this long (0: never).
	SessionTimeout time.Duration
	// Stateless serves every request without an MCP session.
	Stateless bool
	// RefuseSessionlessLegacy answers a stateful endpoint's session-less
	// legacy requests (no Mcp-Session-Id, no 2026-07-28 version, not
	// initialize: legacy.go) 400 instead of serving them as one-shot
	// stateless calls.
	RefuseSessionlessLegacy bool
	// JSONResponse answers POSTs with application/json instead of an SSE
	// stream.
	JSONResponse bool
	// HotPathOff serves every request through go-sdk's handler, none on
	// the hot path (hotpath.go: hot_path off); the answers are the same,
	// byte for byte, the cost per call higher.
	HotPathOff bool
	// KeepaliveInterval: an SSE response silent for this long gets a
	// keep-alive comment (0: none).
	KeepaliveInterval time.Duration
	// Resumable keeps every SSE event of a stateful endpoint in the
	// store's event logs, bounded by EventLimits, so that a client whose
	// stream dropped resumes it with Last-Event-ID on any replica.
	Resumable   bool
	EventLimits store.EventLimits
	// EventQuota bounds the event logs a session and a client address
	// keep at once (eventquota.go); zero fields: no bound.
	EventQuota EventQuota
	// SessionLimits bound the MCP sessions of a stateful endpoint and what
	// each keeps (limits.go); the zero value is the defaults.
	SessionLimits SessionLimits
	// ClientAddress returns the address a request comes from, for the
	// per-client limits ("" or nil: the connection's remote address). A
	// server behind a proxy passes the address the proxy forwards.
	ClientAddress func(*http.Request) string
	// Auth, when set, makes the endpoint an OAuth resource server: every
	// MCP request needs a bearer token it accepts, whose user is the
	// caller (authz.go).
	Auth *auth.ResourceServer
	// Policy decides which tools each caller sees and may call, with
	// which arguments (policy.go); nil allows everything.
	Policy *auth.Policy
	// View curates the tools the endpoint publishes and turns on the
	// discovery meta-tools (view.go, discovery.go); nil publishes every
	// tool of the host as it is.
	View *ViewConfig
	// RateLimits are the endpoint's rate limits (the handler's), besides
	// those of the operations its host serves; all that apply to a call
	// must pass (ratelimit.go). Budgets keeps their budgets, shared with
	// the process's other endpoints (nil: the endpoint's own).
	RateLimits []ratelimit.Limit
	Budgets    *ratelimit.Budgets
	// ServerCard, when set, serves the endpoint's server card at
	// <endpoint path>/server-card to anyone (servercard.go); nil serves
	// none.
	ServerCard *servercard.Config
	Logger     *zap.Logger
}

// Store is what an endpoint keeps in the shared store (*store.Etcd is
// one).
type Store interface {
	// The records of its MCP sessions, so that any replica can serve a
	// session another one opened (sessions.go).
	PutMCPSession(ctx context.Context, s store.MCPSession) error
	GetMCPSession(ctx context.Context, id string) (*store.MCPSession, error)
	TouchMCPSession(ctx context.Context, id string) error
	DeleteMCPSession(ctx context.Context, id string) error
	// The event logs of their SSE streams, for resumption (events.go).
	AppendStreams(ctx context.Context, streams []store.StreamEvents, lim store.EventLimits) []error
	EventsAfter(ctx context.Context, session, stream string, index int64) ([][]byte, error)
	EventStream(ctx context.Context, session, stream string) (store.EventStreamInfo, error)
	DeleteEventStream(ctx context.Context, session, stream string) error
}

var _ Store = (*store.Etcd)(nil)

// Endpoint is one MCP server with its transport. It can outlive the hosts
// that serve its tools: they are attached and detached (across config
// reloads, say) and the most recently attached live host serves the calls.
type Endpoint struct {
	server *mcp.Server
	http   *mcp.StreamableHTTPHandler
	logger *zap.Logger

	mu        sync.Mutex
	hosts     []*host.Host
	tools     []string
	published published // published.go
	// toolWatchers are told when the tools are published again
	// (toolwatch.go).
	toolWatchers toolWatchers
	active       atomic.Pointer[host.Host]
	store        atomic.Pointer[Store]
	// attached is closed by the first Attach; closed by Close.
	attached, closed chan struct{}
	closeOnce        sync.Once

	workspace, agentHeader string
	authenticatedUser      func(*http.Request) string
	clientAddress          func(*http.Request) string
	sessionTTL             time.Duration
	origins                originPolicy
	limits                 SessionLimits
	sessions               sessionCounter    // limits.go
	unknown                unknownSessions   // unknown.go
	sessionless            *ratelimit.Budget // ratelimit.go: nil for no limit
	waits                  resultWaits       // taskwait.go

	auth   *auth.ResourceServer // authz.go
	policy *auth.Policy         // policy.go
	view   *view                // view.go

	// rateLimits are the endpoint's own limits, budgets the budgets of
	// all, limitTab those that calls meet now (ratelimit.go).
	rateLimits []ratelimit.Limit
	budgets    *ratelimit.Budgets
	limitTab   atomic.Pointer[limitTable]

	card    *servercard.Config // servercard.go
	version string
	watches watches // complete.go

	// replicas are the sessions recorded in the store (sessions.go);
	// eventStore is the SDK handler's EventStore, given to restored
	// sessions too.
	replicas   replicaSessions
	eventStore mcp.EventStore
	transport  transport // transport.go

	// impl is the server's implementation (results of 2026-07-28 name it
	// in _meta); stages are the receiving middlewares of both paths,
	// innermost first (middlewares); hot serves the calls of the hot path
	// (hotpath.go).
	impl   *mcp.Implementation
	stages []stage
	hot    mcp.MethodHandler
	// noHotPath sends every request to the SDK (hot_path off, and tests
	// that compare the paths); hotCalls counts the calls the hot path
	// served, resolves the plans resolved (plan.go); plans are the plans
	// of calls the hot path declined, for go-sdk's path (plan.go).
	noHotPath atomic.Bool
	hotCalls  atomic.Int64
	resolves  atomic.Int64
	plans     declinedPlans
}

// New returns an endpoint without a host. It serves requests once a host
// is attached; an error means an option is invalid.
func New(opts Options) (*Endpoint, error) {
	origins, err := newOriginPolicy(opts.AllowedOrigins)
	if err != nil {
		return nil, fmt.Errorf("allowed_origins: %w", err)
	}
	limits := opts.SessionLimits.withDefaults()
	if err := limits.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", optMaxSessionState, err)
	}
	v, err := compileView(opts.View)
	if err != nil {
		return nil, err
	}
	for i := range opts.RateLimits {
		if err := opts.RateLimits[i].Err(fmt.Sprintf("rate_limits[%d]", i)); err != nil {
			return nil, err
		}
	}
	if opts.Budgets == nil {
		opts.Budgets = ratelimit.NewBudgets()
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	ep := &Endpoint{
		logger: opts.Logger, workspace: opts.Workspace, agentHeader: opts.AgentHeader,
		authenticatedUser: opts.AuthenticatedUser, clientAddress: opts.ClientAddress,
		sessionTTL: opts.SessionTimeout, origins: origins, limits: limits,
		sessions: sessionCounter{max: limits.MaxSessions, perClient: limits.MaxSessionsPerClient},
		waits:    resultWaits{grace: resultGrace(opts)},
		auth:     opts.Auth, policy: opts.Policy, view: v, card: opts.ServerCard, version: opts.Version,
		rateLimits: opts.RateLimits, budgets: opts.Budgets,
		attached: make(chan struct{}), closed: make(chan struct{}),
	}
	ep.sessionless = sessionlessBudget(limits.MaxSessionlessRequestsPerClient) // ratelimit.go
	slogger := slogFromZap(opts.Logger)
	ep.impl = &mcp.Implementation{Name: "crank", Title: "Crank MCP gateway", Version: opts.Version}
	ep.server = mcp.NewServer(ep.impl, &mcp.ServerOptions{
		Logger: slogger,
		// The SDK's default, made explicit: unknown.go refuses an ID of
		// any other form without a store read.
		GetSessionID:       rand.Text,
		InitializedHandler: ep.recordSession,
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		SetCacheable:       ep.setCacheable, // results.go
		// complete.go: offered only while the host has them
		CompletionHandler: ep.complete, SubscribeHandler: ep.subscribe, UnsubscribeHandler: ep.unsubscribe,
	})
	tasks := ep.addTasks() // tasks.go: MCP Tasks' methods
	ep.addDiscovery()      // discovery.go
	// One list of receiving middlewares for both paths (middlewares).
	ep.stages = ep.middlewares(tasks)
	for _, s := range ep.stages {
		ep.server.AddReceivingMiddleware(s.m)
	}
	ep.hot = ep.hotHandler() // hotpath.go
	ep.noHotPath.Store(opts.HotPathOff)
	sdkOpts := mcp.StreamableHTTPOptions{
		Stateless:    opts.Stateless,
		JSONResponse: opts.JSONResponse,
		// No SessionTimeout: the endpoint times out its sessions itself
		// (sessions.go idleTimeout), the POSTs the hot path serves too.
		Logger: slogger,
		// The Host decision is refuseHost's alone (origin.go), made
		// before either path: the SDK's own check reads localhost case-
		// sensitively, and two checks would give two answers.
		DisableLocalhostProtection: true,
	}
	ep.streamableOptions(opts, &sdkOpts)
	ep.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server }, &sdkOpts)
	return ep, nil
}

// stage is one of the endpoint's receiving middlewares.
type stage struct {
	name string
	m    mcp.Middleware
}

// stagePlan names the plan's middleware: the hot path resolves the plan
// itself (serveHot), so its chain is every stage but that one.
const stagePlan = "plan"

// middlewares are the endpoint's receiving middlewares, innermost first.
// go-sdk runs them all around every request it serves; the hot path runs
// them all but the plan's around every call it serves (hotHandler). One
// list, declared here: a middleware added to it applies to both paths.
func (ep *Endpoint) middlewares(tasks bool) []stage {
	list := []stage{
		{"session", ep.sessionMiddleware},
		{"published capabilities", ep.publishedCapsMiddleware}, // complete.go
	}
	if tasks {
		// tasks.go: MCP Tasks, around the session middleware, which reads
		// the initialize result before tasks' wraps it.
		list = append(list, stage{"tasks", ep.tasksMiddleware})
	}
	return append(list,
		stage{"rate limits", ep.limitMiddleware},   // ratelimit.go: around tasks, inside the policy
		stage{"policy", ep.policyMiddleware},       // policy.go: the per-tool policy, around tasks
		stage{"view", ep.viewMiddleware},           // view.go: the published names, outside the policy
		stage{"telemetry", ep.telemetryMiddleware}, // telemetry.go: metrics and the span of every request
		stage{stagePlan, ep.planMiddleware},        // plan.go: what each request is about, resolved once
		stage{"in flight", ep.flightMiddleware},    // inflight.go: a session's call held while it runs
		// results.go: no field of 2026-07-28 in an earlier protocol's
		// results, outermost.
		stage{"generation", generationMiddleware},
	)
}

// ServeHTTP serves MCP Streamable HTTP. It checks the Host and the Origin
// first; a request that arrives before the first Attach waits for it, for
// as long as the request's context allows.
func (ep *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stripInternal(r.Header)  // caller.go: internal headers are the endpoint's own
	if ep.refuseHost(w, r) { // origin.go: a loopback listener serves loopback names
		return
	}
	if ep.serveMetadata(w, r) { // authz.go: protected resource metadata, for any origin
		return
	}
	if ep.serveCard(w, r) { // servercard.go: the server card, for any origin
		return
	}
	if ep.serveConsent(w, r) { // consent.go: a consent's callback, a browser's navigation
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !ep.origins.allows(origin) {
		ep.logger.Warn("request from a disallowed origin refused", zap.String("origin", origin))
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
			"code": -32600, "message": "origin " + strings.ToValidUTF8(origin, "\uFFFD") + " is not allowed (allowed_origins)",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(body)
		return
	}
	if ep.auth != nil {
		ep.authorized(w, r, ep.serve) // authz.go: bearer tokens
		return
	}
	ep.serve(w, r)
}

// serve serves a request that passed the Host, Origin and token checks.
func (ep *Endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if !ep.awaitHost(w, r) {
		return
	}
	ep.markIdentity(r)      // caller.go
	p := peek(r)            // peek.go: the body, read once before the SDK reads it
	ep.sessionRequest(r, p) // generation.go: a session's request in its generation
	ep.markClient(r)        // ratelimit.go: the client's address, for what counts per client
	if ep.refuseGeneration(w, r, p) || ep.checkRequest(w, r, p) || ep.admitSession(w, r, p) {
		return
	}
	if ep.throttled(w, r, p) { // ratelimit.go: requests without a session, per client (max_sessionless_requests_per_client)
		return
	}
	ep.markTasks(r, p)   // taskheader.go: what the SDK cannot take of MCP Tasks
	r = withCallID(r, p) // events.go: the call a POST's stream answers
	if ended := ep.linkResult(r, p); ended != nil {
		defer ended() // taskwait.go: a tasks/result wait sees its POST end
	}
	release, refused := ep.claimCall(w, r, p) // inflight.go: one in-flight table for both paths
	if refused {
		return
	}
	if release != nil {
		defer release()
	}
	w, stopKeepalive := ep.wrap(w)
	defer stopKeepalive()
	r = ep.settlePrime(w, r)  // primeflush.go
	if ep.serveHot(w, r, p) { // hotpath.go: a plain unary tools/call
		return
	}
	defer ep.plans.take(&mcp.RequestExtra{Header: r.Header}) // plan.go: a declined call's plan, if go-sdk did not take it
	ep.handler(r, p)(w, r)
}

// awaitHost waits until a host is attached and reports whether one is. A
// request whose context ends first gets no answer; one still waiting when
// the endpoint closes gets 503 with Retry-After.
func (ep *Endpoint) awaitHost(w http.ResponseWriter, r *http.Request) bool {
	if ep.active.Load() != nil {
		return true
	}
	select {
	case <-ep.attached:
		return true
	case <-ep.closed:
		w.Header().Set("Retry-After", "1")
		writeJSONRPCError(w, http.StatusServiceUnavailable, -32000,
			"the MCP endpoint closed before it started serving; retry shortly", map[string]any{"retryable": true})
		return false
	case <-r.Context().Done():
		return false
	}
}

// Attach makes h the host that serves the endpoint's calls, publishing its
// tools (clients get notifications/tools/list_changed), and st the store
// of its MCP sessions and event logs (nil keeps the current one).
func (ep *Endpoint) Attach(h *host.Host, st Store) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.hosts = append(ep.hosts, h)
	if st != nil {
		ep.store.Store(&st)
	}
	ep.syncLocked()
	ep.watchHost(h) // reexpand.go
	select {
	case <-ep.attached:
	default:
		close(ep.attached)
	}
}

// Detach removes h; the most recently attached host left serves the calls.
func (ep *Endpoint) Detach(h *host.Host) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.hosts = slices.DeleteFunc(ep.hosts, func(x *host.Host) bool { return x == h })
	if h != nil && !slices.Contains(ep.hosts, h) {
		h.Unwatch()
	}
	ep.syncLocked()
}

// syncLocked makes the newest attached host the active one and publishes
// its tools.
func (ep *Endpoint) syncLocked() {
	if len(ep.hosts) == 0 {
		return
	}
	h := ep.hosts[len(ep.hosts)-1]
	if ep.active.Swap(h) == h {
		return
	}
	ep.publishLocked(h)
}

// publishLocked publishes the tools of h, the active host: the SDK sends
// its sessions notifications/tools/list_changed.
func (ep *Endpoint) publishLocked(h *host.Host) {
	var names []string
	for _, op := range h.Operations() {
		names = append(names, op.Name)
		ep.server.AddTool(mcpTool(op), ep.callTool)
	}
	var stale []string
	for _, n := range ep.tools {
		if !slices.Contains(names, n) {
			stale = append(stale, n)
		}
	}
	if len(stale) > 0 {
		ep.server.RemoveTools(stale...)
	}
	ep.tools = names
	ep.setLimits(h)                 // ratelimit.go: the limits of h's tools
	ep.publishPublicationsLocked(h) // published.go
	ep.toolsChanged()               // toolwatch.go
}

func mcpTool(op *opsfile.Operation) *mcp.Tool {
	t := &mcp.Tool{
		Name:        op.Name,
		Title:       op.Title,
		Description: op.Description,
		InputSchema: op.InputSchema,
	}
	if len(op.OutputSchema) > 0 {
		t.OutputSchema = op.OutputSchema
	}
	if m := op.ToolMeta(); m != nil {
		t.Meta = m // a window tool says it streams: mode, limits, progress kind
	}
	if a := op.Annotations; a != nil {
		t.Annotations = &mcp.ToolAnnotations{
			DestructiveHint: a.Destructive,
			OpenWorldHint:   a.OpenWorld,
			ReadOnlyHint:    a.ReadOnly != nil && *a.ReadOnly,
			IdempotentHint:  a.Idempotent != nil && *a.Idempotent,
		}
	}
	return t
}

// callTool is the SDK's handler of the host's tools: the call of its
// plan.
func (ep *Endpoint) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return ep.call(ctx, planOf(ctx), req)
}

// call translates an MCP tools/call into the host call of p and back.
func (ep *Endpoint) call(ctx context.Context, p *plan, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cr := p.callRequest(req.Params.Arguments)
	if res := needsAgent(cr.Tool, cr.AgentID); res != nil {
		return res, nil
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// A window's chunks become progress notifications (the streaming
		// wire contract): progress counts 0, 1, 2, ..., total is omitted,
		// message is the chunk, the token is echoed with its JSON type.
		// They are sent from the call's goroutine, so none follows the
		// result.
		// An upstream's own progress of a unary call is relayed with its
		// progress and total.
		next := 0
		cr.Progress = func(ctx context.Context, c host.ProgressChunk) {
			n := &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(next), Message: c.Message}
			if c.Relayed {
				n.Progress, n.Total = c.Progress, c.Total
			}
			err := req.Session.NotifyProgress(ctx, n)
			if err != nil {
				ep.logger.Debug("progress notification not sent", zap.String("tool", cr.Tool.Name()), zap.Error(err))
			}
			telemetry.ProgressNotification(cr.Tool.Name(), err == nil)
			next++
		}
	}
	ep.relayLogs(req, &cr)           // logging.go
	ep.relayClientRequests(req, &cr) // clientrequests.go
	res, err := p.h.Call(ctx, cr)
	if err != nil {
		return nil, requestStateError(err) // clientrequests.go
	}
	if res.InputRequests != nil {
		return inputRequiredResult(res) // clientrequests.go
	}
	if pe := res.Protocol; pe != nil {
		// The upstream answered with a JSON-RPC error: so does the
		// gateway (go-sdk sets the HTTP status 2026-07-28 gives it).
		ep.logger.Debug("the upstream answered the call with a JSON-RPC error", zap.String("tool", cr.Tool.Name()),
			zap.Int64("code", pe.Code), zap.String("error", res.Text))
		return nil, &jsonrpc.Error{Code: pe.Code, Message: pe.Message, Data: pe.Data}
	}
	return toolResult(res), nil
}

// metaUpstream, in the _meta of a failed result that is the upstream's
// own, names the upstream that answered it.
const metaUpstream = "io.crank/upstream"

// toolResult is the CallToolResult of a host result.
func toolResult(res *host.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: contentBlocks(res), IsError: res.IsError}
	if res.Structured != nil {
		out.StructuredContent = res.Structured
	}
	if res.Upstream != "" {
		out.Meta = mcp.Meta{metaUpstream: res.Upstream}
	}
	return out
}

// recordSession records in the store that the client of a new MCP session
// sent notifications/initialized (sessions.go keeps the record: negotiated
// version, client info and capabilities, workspace and agent).
func (ep *Endpoint) recordSession(ctx context.Context, req *mcp.InitializedRequest) {
	if req.Session != nil && req.Session.ID() != "" {
		ep.sessionInitialized(ctx, req.Session)
	}
}

// Close ends the endpoint's sessions on this replica (their store records
// stay, so other replicas may go on serving them) and answers requests
// still waiting for a host with 503.
func (ep *Endpoint) Close() error {
	ep.closeOnce.Do(func() { close(ep.closed) })
	ep.releaseLimits() // ratelimit.go
	for ss := range ep.server.Sessions() {
		_ = ss.Close()
	}
	return nil
}

// slogFromZap is the SDK's logger: l's core under l's name plus ".sdk",
// with the SDK's session_id attributes naming the session as
// sessionField does and its lines about each connection at debug.
func slogFromZap(l *zap.Logger) *slog.Logger {
	name := "sdk"
	if n := l.Name(); n != "" {
		name = n + ".sdk"
	}
	return slog.New(sdkLogHandler{zapslog.NewHandler(l.Core(), zapslog.WithName(name))})
}

// sdkConnectionLines are the SDK's info lines about each connection: a
// sessionless request opens and closes one, so at info they would say
// three things per request about nothing an operator acts on.
var sdkConnectionLines = map[string]bool{
	"server connecting": true, "server session connected": true, "server session disconnected": true,
	"server session ended": true, "server run start": true, "session initialized": true,
}

// sdkLogHandler replaces the MCP session IDs the SDK logs (attribute
// session_id: "server session connected", "resource subscribed", …) by
// their digest, and writes its connection lines at debug.
type sdkLogHandler struct{ slog.Handler }

func (h sdkLogHandler) Handle(ctx context.Context, r slog.Record) error {
	level := r.Level
	if level == slog.LevelInfo && sdkConnectionLines[r.Message] {
		level = slog.LevelDebug
	}
	out := slog.NewRecord(r.Time, level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(sdkLogAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h sdkLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = sdkLogAttr(a)
	}
	return sdkLogHandler{h.Handler.WithAttrs(out)}
}

func (h sdkLogHandler) WithGroup(name string) slog.Handler {
	return sdkLogHandler{h.Handler.WithGroup(name)}
}

func sdkLogAttr(a slog.Attr) slog.Attr {
	if a.Key != "session_id" {
		return a
	}
	f := sessionField(a.Value.String())
	return slog.String(f.Key, f.String)
}

// Interface guard.
var _ http.Handler = (*Endpoint)(nil)
