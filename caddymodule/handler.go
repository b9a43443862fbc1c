package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/configblock"
	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/mesh"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/host/servercard"
	"github.com/crankmcp/crank/store"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Version is the Crank version reported to MCP clients and adapters.
var Version = "0.1.0-dev"

// Handler serves MCP Streamable HTTP for the operations of its operations
// files. Module ID: http.handlers.crank.
type Handler struct {
	// Operations are the paths of the operations files (YAML or JSON)
	// whose tools this endpoint serves.
	Operations []string `json:"operations,omitempty"`
	// Catalog names an operations catalog in etcd whose operations this
	// endpoint serves beside those of its files; every replica applies a
	// new version of it without a reload (catalog.go).
	Catalog string `json:"catalog,omitempty"`
	// CatalogAllow is what the catalog's entries may reach: placeholders,
	// upstreams and local directories; nothing when absent. Whoever
	// writes a catalog never starts a process (docs/security.md).
	CatalogAllow *opsfile.CatalogAllow `json:"catalog_allow,omitempty"`
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may call this endpoint. A request with any other Origin header gets
	// 403. Loopback origins (localhost, 127.0.0.0/8, [::1]) are always
	// allowed; "*" allows every origin.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// SessionTimeout closes MCP sessions idle for this long. Default 30m.
	SessionTimeout caddy.Duration `json:"session_timeout,omitempty"`
	// Stateless serves every request without an MCP session (for fleets
	// behind a load balancer without affinity); without it the endpoint
	// serves sessions (2025-11-25 and earlier) and the sessionless
	// 2026-07-28 protocol side by side.
	Stateless bool `json:"stateless,omitempty"`
	// JSONResponse answers POSTs with application/json instead of an SSE
	// stream.
	JSONResponse bool `json:"json_response,omitempty"`
	// Workspace is the workspace id calls through this endpoint run in.
	// Default "default".
	Workspace string `json:"workspace,omitempty"`
	// AgentHeader names a request header carrying the calling agent's id
	// (used when Caddy authenticated no user). It is trusted as it is: set
	// it at a proxy that removes the clients' own copies. Without an
	// authenticated user or this header, a caller is its MCP session.
	AgentHeader string `json:"agent_header,omitempty"`
	// Quotas bound the sessions and jobs open at once per workspace and
	// per agent.
	Quotas *Quotas `json:"quotas,omitempty"`
	// LoadConfig: what the endpoint does with an entry that cannot load,
	// on_load_error (load.go; the field is host's LoadConfig).
	host.LoadConfig
	// TransportConfig: mode, SSE keep-alives, the resumability event
	// store (transport.go).
	TransportConfig
	// SessionLimits: how many MCP sessions clients can open and what each
	// keeps (sessionlimits.go).
	SessionLimits
	// Auth makes the endpoint an OAuth 2.1 resource server (MCP
	// authorization, auth.go); Policy decides per caller which tools it
	// sees and calls with which arguments.
	Auth   *AuthConfig   `json:"auth,omitempty"`
	Policy *PolicyConfig `json:"policy,omitempty"`
	// View curates the tools this endpoint publishes and turns on the
	// discovery meta-tools (view.go).
	View *mcpserver.ViewConfig `json:"view,omitempty"`
	// ServerCard describes the endpoint to clients before they connect:
	// its server card at <endpoint>/server-card, its entry in
	// /.well-known/ai-catalog.json and its registry server.json
	// (servercard.go; the fields are host/servercard's Config).
	ServerCard *servercard.Config `json:"server_card,omitempty"`
	// RateLimits are the endpoint's rate limits (the fields are
	// host/ratelimit's Limit; ratelimits.go), besides those of its
	// operations files and catalog: all that apply to a call must pass.
	RateLimits []ratelimit.Limit `json:"rate_limits,omitempty"`
	// Mesh registers the endpoint as an agent of an mcp-mesh registry
	// (mesh.go; the fields are host/mesh's Config). Placeholders such as
	// {env.CRANK_MESH_REGISTRY} are expanded; an empty registry registers
	// nothing.
	Mesh *mesh.Config `json:"mesh,omitempty"`

	ctx      caddy.Context
	logger   *zap.Logger
	cat      *opsfile.File
	ep       *mcpserver.Endpoint
	epKey    string
	run      *handlerRun // the host it serves, from the app's Start on (catalog.go)
	adapters []string    // adapterPool keys this handler holds
	authz    authz       // auth.go
	app      *App        // the config's app, whose handlers the AI catalog lists
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

type pooledEndpoint struct{ *mcpserver.Endpoint }

func (p pooledEndpoint) Destruct() error { return p.Close() }

// Provision checks the config, loads and checks the operations files and
// takes the MCP endpoint from its pool. It starts nothing: the crank app's
// Start runs the operations (see start).
func (h *Handler) Provision(ctx caddy.Context) error {
	h.ctx = ctx
	h.logger = ctx.Logger()
	h.run = &handlerRun{}
	if err := h.validateCatalog(); err != nil {
		return err
	}
	if h.SessionTimeout < 0 {
		return fmt.Errorf("crank: session_timeout: must be positive (got %s)", time.Duration(h.SessionTimeout))
	}
	if err := h.Quotas.validate(h.EventMaxBytes); err != nil {
		return err
	}
	if h.Workspace == "" {
		h.Workspace = "default"
	}
	if h.SessionTimeout == 0 {
		h.SessionTimeout = caddy.Duration(30 * time.Minute)
	}
	if err := h.provisionTransport(); err != nil {
		return err
	}
	if err := h.SessionLimits.validate(); err != nil {
		return err
	}
	if err := h.validateRateLimits(); err != nil { // ratelimits.go
		return err
	}
	if err := h.provisionAuthz(); err != nil { // auth.go
		return err
	}
	if h.ServerCard != nil {
		if err := h.ServerCard.Check("crank: server_card"); err != nil { // servercard.go
			return err
		}
	}
	if err := h.provisionMesh(); err != nil { // mesh.go
		return err
	}
	if err := configblock.CheckEnums(&h.LoadConfig); err != nil { // load.go
		return fmt.Errorf("crank: %w", err)
	}
	key, _ := json.Marshal(h)
	h.epKey = string(key)
	val, _, err := endpointPool.LoadOrNew(h.epKey, func() (caddy.Destructor, error) {
		ep, err := mcpserver.New(h.endpointOptions())
		if err != nil {
			return nil, fmt.Errorf("crank: %w", err)
		}
		return pooledEndpoint{ep}, nil
	})
	if err != nil {
		return err
	}
	h.ep = val.(pooledEndpoint).Endpoint
	appVal, err := ctx.App("crank")
	if err != nil {
		return err
	}
	if h.cat, err = h.loadOperations(); err != nil {
		return err
	}
	if validating() { // load.go: `crank validate` runs the load
		if err := h.checkLoad(); err != nil {
			return err
		}
	}
	h.app = appVal.(*App)
	h.app.register(h)
	return nil
}

// loadOperations reads and checks the operations files, and that every
// operation names an adapter this handler can run. What only the adapters
// can check waits for start.
func (h *Handler) loadOperations() (*opsfile.File, error) {
	repl := caddy.NewReplacer()
	var cats []*opsfile.File
	var errs []error
	for _, path := range h.Operations {
		cat, err := opsfile.LoadFile(repl.ReplaceKnown(path, ""), opsfile.LoadOptions{
			Expand: func(s string) string { return repl.ReplaceKnown(s, "") },
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cats = append(cats, cat)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cat, err := opsfile.Merge(cats...)
	if err != nil {
		return nil, err
	}
	for _, op := range cat.Operations {
		if _, err := host.AdapterSpecOf(cat, op.Adapter, builtinSpec); err != nil {
			errs = append(errs, op.Problem("/adapter", err.Error()))
		}
	}
	return cat, errors.Join(errs...)
}

// start runs the handler's operations on the store st: it starts their
// adapters, which validate and expand the operations, and attaches the
// resulting host to the MCP endpoint, which then serves.
func (h *Handler) start(st *store.Etcd, adopters *host.Adopters) error {
	h.holdEndpoint()
	if h.run.withdraw == nil {
		h.run.withdraw = adopters.Offer(h.currentHost)
	}
	if h.Catalog != "" {
		if err := h.followCatalog(st); err != nil {
			return err
		}
		h.logger.Info("crank endpoint ready", zap.Strings("operations", h.Operations), zap.String("catalog", h.Catalog),
			zap.Int("tools", len(h.currentHost().Operations())), zap.Bool("stateless", h.Stateless))
		return h.startMesh(st) // mesh.go
	}
	hst, err := host.New(h.ctx, host.Options{File: h.cat, Logger: h.logger, Store: st, Quotas: h.Quotas.host(),
		Audit: h.logger.Named("audit"), Adapter: h.adapter, Endpoint: h.endpointName(), OnLoadError: h.LoadConfig.Policy()})
	if err != nil {
		return err
	}
	if err := h.ep.CheckView(hst); err != nil { // view.go
		return err
	}
	h.setHost(hst)
	h.ep.Attach(hst, st)
	h.logger.Info("crank endpoint ready", zap.Strings("operations", h.Operations),
		zap.Int("tools", len(hst.Operations())), zap.Bool("stateless", h.Stateless))
	return h.startMesh(st) // mesh.go
}

// adapter returns the pooled supervisor of the named adapter, holding one
// reference to it for this handler.
func (h *Handler) adapter(name string) (*host.Supervisor, error) {
	spec, err := host.AdapterSpecOf(h.cat, name, builtinSpec)
	if err != nil {
		return nil, err
	}
	// Catalog versions and admin requests build hosts concurrently.
	h.run.adaptersMu.Lock()
	defer h.run.adaptersMu.Unlock()
	if h.run.unloaded {
		return nil, errors.New("the handler's config was unloaded")
	}
	sup, err := pooledAdapter(spec)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(h.adapters, spec.Key()) {
		h.adapters = append(h.adapters, spec.Key())
	} else {
		_, _ = adapterPool.Delete(spec.Key()) // one reference per handler
	}
	return sup, nil
}

// Cleanup releases this config's references to the endpoint and adapters.
func (h *Handler) Cleanup() error {
	h.stopMesh() // mesh.go
	h.stopCatalog()
	if h.ep != nil {
		h.ep.Detach(h.currentHost())
		_, _ = endpointPool.Delete(h.epKey)
	}
	if h.run != nil && h.run.withdraw != nil {
		h.run.withdraw()
	}
	h.releaseEndpoint() // before the adapters: an upstream job is cancelled through them
	if h.run != nil {
		h.run.adaptersMu.Lock()
		defer h.run.adaptersMu.Unlock()
		h.run.unloaded = true
	}
	for _, k := range h.adapters {
		_, _ = adapterPool.Delete(k)
	}
	return nil
}

// endpointName names the handler's endpoint for its hosts' runners
// (host.Options.Endpoint): its workspace and the operations it serves. A
// reload that keeps a handler with both keeps the runners, whatever else
// it changes; one that leaves none ends them (host.ReleaseEndpoint).
func (h *Handler) endpointName() string {
	b, _ := json.Marshal([]any{h.Workspace, h.Operations, h.Catalog})
	return string(b)
}

// holdEndpoint and releaseEndpoint hold the handler's endpoint from its
// start until its config is unloaded.
func (h *Handler) holdEndpoint() {
	h.run.mu.Lock()
	defer h.run.mu.Unlock()
	if !h.run.held {
		h.run.held = true
		host.HoldEndpoint(h.endpointName())
	}
}

func (h *Handler) releaseEndpoint() {
	if h.run == nil || !h.run.letGo() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := host.ReleaseEndpoint(ctx, h.endpointName()); err != nil {
		h.logger.Warn("sessions and jobs of the removed endpoint still running; they end as orphans", zap.Error(err))
	}
}

// letGo reports whether the endpoint was held, and holds it no more.
func (r *handlerRun) letGo() (held bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held, r.held = r.held, false
	return held
}

// ServeHTTP hands the request to the MCP endpoint. Caddy starts its apps
// in no fixed order, so a request may arrive before the crank app has
// started any handler of the endpoint: it waits for that, bounded by the
// request's context. After a reload, the previous config's host serves
// until the new one is started.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if h.serveCatalog(w, r) { // servercard.go
		return nil
	}
	h.ep.ServeHTTP(w, r)
	return nil
}

// authenticatedUser is Caddy's authenticated user of a request: the
// {http.auth.user.id} of an authentication handler before crank.
func authenticatedUser(r *http.Request) string {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		id, _ := repl.GetString("http.auth.user.id")
		return id
	}
	return ""
}

// endpointOptions are the MCP endpoint's options of the handler's config.
func (h *Handler) endpointOptions() mcpserver.Options {
	t := &h.TransportConfig
	opts := mcpserver.Options{
		Version: Version, Workspace: h.Workspace, AgentHeader: h.AgentHeader, AuthenticatedUser: authenticatedUser,
		AllowedOrigins: h.AllowedOrigins, SessionTimeout: time.Duration(h.SessionTimeout),
		Stateless: h.Stateless, RefuseSessionlessLegacy: t.SessionlessLegacy == sessionlessRefuse,
		HotPathOff:   t.HotPath == "off",
		JSONResponse: h.JSONResponse, KeepaliveInterval: t.keepalive(),
		Resumable: !h.Stateless && t.EventStore != "off", Logger: h.logger,
		SessionLimits: h.SessionLimits.endpoint(), ClientAddress: clientIP,
		Auth: h.authz.rs, Policy: h.authz.policy, View: h.View, ServerCard: h.ServerCard,
		RateLimits: h.RateLimits, Budgets: budgets,
	}
	if opts.Resumable {
		ttl := time.Duration(t.EventTTL)
		if ttl == 0 {
			ttl = DefaultEventTTL
		}
		if h.SessionTimeout > 0 {
			ttl = min(ttl, time.Duration(h.SessionTimeout))
		}
		opts.EventLimits = store.EventLimits{MaxEvents: t.EventMaxEvents, MaxBytes: t.EventMaxBytes, TTL: ttl}
		opts.EventQuota = h.Quotas.events(t.EventMaxBytes)
	}
	return opts
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
