package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/crankmcp/crank/host"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Version is the Crank version reported to MCP clients and adapters.
var Version = "0.1.0-dev"

// Handler serves MCP Streamable HTTP for the operations of one operations
// file. Module ID: http.handlers.crank.
type Handler struct {
	// Operations are the paths of the operations files (YAML or JSON)
	// whose tools this endpoint serves.
	Operations []string `json:"operations"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may call this endpoint. A request with any other Origin header gets
	// 403. Loopback origins (localhost, 127.0.0.0/8, [::1]) are always
	// allowed; "*" allows every origin.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// SessionTimeout closes MCP sessions idle for this long. Default 30m.
	SessionTimeout caddy.Duration `json:"session_timeout,omitempty"`
	// Stateless serves every request without an MCP session (for fleets
	// behind a load balancer without affinity).
	Stateless bool `json:"stateless,omitempty"`
	// JSONResponse answers POSTs with application/json instead of an SSE
	// stream.
	JSONResponse bool `json:"json_response,omitempty"`
	// Workspace is the workspace id calls through this endpoint run in.
	// Default "default".
	Workspace string `json:"workspace,omitempty"`
	// AgentHeader names a request header carrying the calling agent's id
	// (used when Caddy authenticated no user).
	AgentHeader string `json:"agent_header,omitempty"`
	// Quotas bound the sessions and jobs open at once per workspace and
	// per agent.
	Quotas *Quotas `json:"quotas,omitempty"`
	// TransportConfig: mode, SSE keep-alives, the resumability event
	// store (transport.go).
	TransportConfig

	logger   *zap.Logger
	app      *App
	hst      *host.Host
	ep       *endpoint
	epKey    string
	adapters []string // adapterPool keys this handler holds
	origins  originPolicy
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank", New: func() caddy.Module { return new(Handler) }}
}

// adapterPool keeps adapter processes alive across config reloads: a
// reload that still uses an adapter reuses its process.
var adapterPool = caddy.NewUsagePool()

type pooledSupervisor struct{ *host.Supervisor }

func (p pooledSupervisor) Destruct() error { return p.Close() }

// endpointPool keeps MCP endpoints (and so their sessions) alive across
// config reloads, keyed by the handler's config.
var endpointPool = caddy.NewUsagePool()

// Provision loads the operations, starts their adapters and builds the MCP
// endpoint.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if len(h.Operations) == 0 {
		return errors.New("crank: operations: at least one operations file is required")
	}
	if h.SessionTimeout < 0 {
		return fmt.Errorf("crank: session_timeout: must be positive (got %s)", time.Duration(h.SessionTimeout))
	}
	if err := h.Quotas.validate(); err != nil {
		return err
	}
	if h.Workspace == "" {
		h.Workspace = "default"
	}
	if h.SessionTimeout == 0 {
		h.SessionTimeout = caddy.Duration(30 * time.Minute)
	}
	var err error
	if h.origins, err = newOriginPolicy(h.AllowedOrigins); err != nil {
		return fmt.Errorf("crank: allowed_origins: %w", err)
	}
	if err := h.provisionTransport(); err != nil {
		return err
	}
	appVal, err := ctx.App("crank")
	if err != nil {
		return err
	}
	h.app = appVal.(*App)

	repl := caddy.NewReplacer()
	var cats []*host.Catalog
	var loadErrs []error
	for _, path := range h.Operations {
		cat, err := host.LoadFile(repl.ReplaceKnown(path, ""), host.LoadOptions{
			Expand: func(s string) string { return repl.ReplaceKnown(s, "") },
		})
		if err != nil {
			loadErrs = append(loadErrs, err)
			continue
		}
		cats = append(cats, cat)
	}
	if len(loadErrs) > 0 {
		return errors.Join(loadErrs...)
	}
	cat, err := host.Merge(cats...)
	if err != nil {
		return err
	}
	hst, err := host.New(ctx, host.Options{Catalog: cat, Logger: h.logger, Store: h.app.Store(), Quotas: h.Quotas.host(),
		Audit: h.logger.Named("audit"), Adapter: func(name string) (*host.Supervisor, error) {
			spec, err := cat.AdapterSpec(name, builtinSpec)
			if err != nil {
				return nil, err
			}
			val, _, err := adapterPool.LoadOrNew(spec.Key(), func() (caddy.Destructor, error) {
				return pooledSupervisor{host.NewSupervisor(spec, host.SupervisorOptions{
					Logger: caddy.Log().Named("crank.adapter"), HostVersion: Version,
				})}, nil
			})
			if err != nil {
				return nil, err
			}
			if !slices.Contains(h.adapters, spec.Key()) {
				h.adapters = append(h.adapters, spec.Key())
			} else {
				_, _ = adapterPool.Delete(spec.Key()) // one reference per handler
			}
			return val.(pooledSupervisor).Supervisor, nil
		}})
	if err != nil {
		return err
	}
	h.hst = hst

	key, _ := json.Marshal(h)
	h.epKey = string(key)
	val, _, err := endpointPool.LoadOrNew(h.epKey, func() (caddy.Destructor, error) {
		return newEndpoint(h), nil
	})
	if err != nil {
		return err
	}
	h.ep = val.(*endpoint)
	h.ep.attach(hst, h.app.Store())
	h.logger.Info("crank endpoint ready", zap.Strings("operations", h.Operations),
		zap.Int("tools", len(hst.Operations())), zap.Bool("stateless", h.Stateless))
	return nil
}

// Cleanup releases this config's references to the endpoint and adapters.
func (h *Handler) Cleanup() error {
	if h.ep != nil {
		h.ep.detach(h.hst)
		_, _ = endpointPool.Delete(h.epKey)
	}
	for _, k := range h.adapters {
		_, _ = adapterPool.Delete(k)
	}
	return nil
}

// ServeHTTP checks the Origin and hands the request to the MCP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if origin := r.Header.Get("Origin"); origin != "" && !h.origins.allows(origin) {
		h.logger.Warn("request from a disallowed origin refused", zap.String("origin", origin))
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
			"code": -32600, "message": "origin " + strings.ToValidUTF8(origin, "\uFFFD") + " is not allowed (allowed_origins)",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(body)
		return nil
	}
	markIdentity(r)
	if h.ep.checkRequest(w, r) {
		return nil
	}
	h.ep.markTasks(r) // tasks.go: what the SDK cannot take of MCP Tasks
	w, stopKeepalive := h.ep.wrap(w)
	defer stopKeepalive()
	h.ep.serveMCP(w, r)
	return nil
}

// endpointStore is what an endpoint keeps in the shared store: the records
// of its MCP sessions and the event logs of their response streams.
type endpointStore interface {
	mcpSessionStore
	eventLogStore
}

// endpoint is one MCP server with its transport. It outlives handler
// instances across reloads; the handlers attach their hosts to it and the
// most recently attached live host serves the calls.
type endpoint struct {
	server *mcp.Server
	http   *mcp.StreamableHTTPHandler
	logger *zap.Logger

	mu     sync.Mutex
	hosts  []*host.Host
	tools  []string
	active atomic.Pointer[host.Host]
	store  atomic.Pointer[endpointStore]

	workspace, agentHeader string
	sessionTTL             time.Duration

	// replicas are the sessions recorded in the store (replica.go);
	// eventStore is the SDK handler's EventStore, given to restored
	// sessions too.
	replicas   replicaSessions
	eventStore mcp.EventStore
	transport  transport // transport.go
}

func newEndpoint(h *Handler) *endpoint {
	ep := &endpoint{
		logger: h.logger, workspace: h.Workspace, agentHeader: h.AgentHeader,
		sessionTTL: time.Duration(h.SessionTimeout),
	}
	slogger := slogFromZap(h.logger)
	ep.server = mcp.NewServer(&mcp.Implementation{Name: "crank", Title: "Crank MCP gateway", Version: Version}, &mcp.ServerOptions{
		Logger:             slogger,
		InitializedHandler: ep.recordSession,
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	ep.server.AddReceivingMiddleware(ep.sessionMiddleware)
	ep.addTasks() // tasks.go: MCP Tasks, around the session middleware
	opts := mcp.StreamableHTTPOptions{
		Stateless:      h.Stateless,
		JSONResponse:   h.JSONResponse,
		SessionTimeout: time.Duration(h.SessionTimeout),
		Logger:         slogger,
	}
	ep.streamableOptions(h, &opts)
	ep.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ep.server }, &opts)
	return ep
}

func (ep *endpoint) attach(h *host.Host, st endpointStore) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.hosts = append(ep.hosts, h)
	if st != nil {
		ep.store.Store(&st)
	}
	ep.syncLocked()
}

func (ep *endpoint) detach(h *host.Host) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.hosts = slices.DeleteFunc(ep.hosts, func(x *host.Host) bool { return x == h })
	ep.syncLocked()
}

// syncLocked makes the newest attached host the active one and publishes
// its tools.
func (ep *endpoint) syncLocked() {
	if len(ep.hosts) == 0 {
		return
	}
	h := ep.hosts[len(ep.hosts)-1]
	if ep.active.Swap(h) == h {
		return
	}
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
}

func mcpTool(op *host.Operation) *mcp.Tool {
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

// callTool translates an MCP tools/call into a host call and back.
func (ep *endpoint) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	h := ep.active.Load()
	cr := host.CallRequest{
		Tool:        req.Params.Name,
		Arguments:   req.Params.Arguments,
		WorkspaceID: ep.workspace,
	}
	if hdr := req.GetExtra().Header; hdr != nil {
		cr.TraceParent = hdr.Get("Traceparent")
		cr.TraceState = hdr.Get("Tracestate")
	}
	cr.AgentID = ep.callerAgent(req.GetExtra(), req.Session)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		// A window's chunks become progress notifications (the streaming
		// wire contract): progress counts 0, 1, 2, ..., total is omitted,
		// message is the chunk, the token is echoed with its JSON type.
		// They are sent from the call's goroutine, so none follows the
		// result.
		next := 0
		cr.Progress = func(ctx context.Context, c host.ProgressChunk) {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok, Progress: float64(next), Message: c.Message,
			})
			if err != nil {
				ep.logger.Debug("progress notification not sent", zap.String("tool", cr.Tool), zap.Error(err))
			}
			next++
		}
	}
	res, err := h.Call(ctx, cr)
	if err != nil {
		return nil, err
	}
	return toolResult(res), nil
}

// recordSession records in the store that the client of a new MCP session
// sent notifications/initialized (replica.go keeps the record: negotiated
// version, client info and capabilities, workspace and agent).
func (ep *endpoint) recordSession(ctx context.Context, req *mcp.InitializedRequest) {
	if req.Session != nil && req.Session.ID() != "" {
		ep.sessionInitialized(ctx, req.Session)
	}
}

// Destruct closes the endpoint's sessions when no config uses it anymore.
func (ep *endpoint) Destruct() error {
	for ss := range ep.server.Sessions() {
		_ = ss.Close()
	}
	return nil
}

func slogFromZap(l *zap.Logger) *slog.Logger { return slog.New(zapslog.NewHandler(l.Core())) }

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddy.Destructor            = (*endpoint)(nil)
)
