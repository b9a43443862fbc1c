package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
)

// handlerRun is what a provisioned handler runs: the host it serves now
// and, for a handler with a catalog, the follower that builds a new host
// for every version of it.
type handlerRun struct {
	mu       sync.Mutex
	hst      *host.Host
	follower *catalog.Follower
	held     bool // the endpoint is held (holdEndpoint)
	// withdraw ends the offer of the handler's host to take over orphaned
	// jobs (host.Adopters.Offer).
	withdraw func()
	// mesh is the handler's hold on its mcp-mesh registrar (mesh.go).
	mesh *meshRun

	// adaptersMu guards Handler.adapters; unloaded: Cleanup released
	// them, and no host may take new ones.
	adaptersMu sync.Mutex
	unloaded   bool
}

// validateCatalog checks the handler's catalog settings (Provision).
func (h *Handler) validateCatalog() error {
	if h.Catalog != "" && !store.ValidCatalogName(h.Catalog) {
		return fmt.Errorf("crank: catalog: %q is not a catalog name: 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit", h.Catalog)
	}
	if len(h.Operations) == 0 && h.Catalog == "" {
		return errors.New("crank: operations: at least one operations file or a catalog is required")
	}
	if h.CatalogAllow == nil {
		h.CatalogAllow = &opsfile.CatalogAllow{}
	} else if h.Catalog == "" {
		return errors.New("crank: catalog_allow: set only with catalog")
	}
	if err := h.CatalogAllow.Check(); err != nil {
		return fmt.Errorf("crank: catalog_allow.%w", err)
	}
	return nil
}

// unmarshalCatalog reads the catalog subdirective:
//
//	catalog <name> {
//	    placeholders <name>...   # env.PAYMENTS_KEY env.PAYMENTS_*
//	    upstreams    <rule>...   # https://api.example.com/v1/ *.example.com 127.0.0.1:9000
//	    files        <dir>...    # /srv/crank/specs
//	}
func (h *Handler) unmarshalCatalog(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	h.Catalog = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if h.CatalogAllow == nil {
			h.CatalogAllow = &opsfile.CatalogAllow{}
		}
		var dst *[]string
		switch d.Val() {
		case "placeholders":
			dst = &h.CatalogAllow.Placeholders
		case "upstreams":
			dst = &h.CatalogAllow.Upstreams
		case "files":
			dst = &h.CatalogAllow.Files
		default:
			return d.Errf("catalog: unknown subdirective %q (placeholders, upstreams, files)", d.Val())
		}
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		*dst = append(*dst, args...)
	}
	return nil
}

// build builds the host the handler serves for a version of its catalog
// (doc nil: none) with its operations files when files is set, without
// serving it, an entry that cannot load as policy says. A tool name both a
// file and the catalog define is an error naming both.
func (h *Handler) build(ctx context.Context, st *store.Etcd, doc *catalog.Document, files bool, policy host.LoadPolicy) (*host.Host, error) {
	cat := h.cat
	if !files {
		cat, _ = opsfile.Merge()
	}
	if doc != nil {
		repl := caddy.NewReplacer()
		dc, err := doc.Compile("catalog "+h.Catalog, opsfile.LoadOptions{Expand: func(s string) string { return repl.ReplaceKnown(s, "") },
			Allow: h.CatalogAllow})
		if err != nil {
			return nil, err
		}
		if cat, err = opsfile.Merge(cat, dc); err != nil {
			return nil, err
		}
	}
	hst, err := host.New(ctx, host.Options{File: cat, Logger: h.logger, Store: st, Quotas: h.Quotas.host(),
		Audit: h.logger.Named("audit"), Adapter: h.adapter, Endpoint: h.endpointName(), OnLoadError: policy})
	if err != nil {
		return nil, err
	}
	if err := h.ep.CheckView(hst); files && err != nil { // view.go: the view must fit every version
		return nil, err
	}
	return hst, nil
}

// followCatalog serves the handler's catalog: the current version now
// (its failure fails the config's load), every later one as it is
// written, on any replica.
func (h *Handler) followCatalog(st *store.Etcd) error {
	f, err := catalog.Follow(h.ctx, catalog.FollowOptions{
		Catalog: h.Catalog, Store: st, Logger: h.logger,
		Build: func(ctx context.Context, doc *catalog.Document, _ int64) (*host.Host, error) {
			return h.build(ctx, st, doc, true, h.LoadConfig.Policy())
		},
		Serve: func(hst *host.Host, version int64) {
			h.ep.Attach(hst, st)
			old := h.setHost(hst)
			if old != nil {
				h.ep.Detach(old)
			}
		},
	})
	if err != nil {
		return err
	}
	h.run.mu.Lock()
	h.run.follower = f
	h.run.mu.Unlock()
	return nil
}

// stopCatalog stops following the catalog (Cleanup).
func (h *Handler) stopCatalog() {
	if h.run == nil {
		return
	}
	h.run.mu.Lock()
	f := h.run.follower
	h.run.follower = nil
	h.run.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// currentHost is the host the handler serves now.
func (h *Handler) currentHost() *host.Host {
	if h.run == nil {
		return nil
	}
	h.run.mu.Lock()
	defer h.run.mu.Unlock()
	return h.run.hst
}

// setHost makes hst the host the handler serves and returns the previous
// one.
func (h *Handler) setHost(hst *host.Host) *host.Host {
	h.run.mu.Lock()
	defer h.run.mu.Unlock()
	old := h.run.hst
	h.run.hst = hst
	return old
}

// adminEndpoint is a handler as the admin API sees it.
type adminEndpoint struct {
	h  *Handler
	id int
	st *store.Etcd
}

func (e adminEndpoint) Info() admin.EndpointInfo {
	info := admin.EndpointInfo{ID: strconv.Itoa(e.id), Workspace: e.h.Workspace, Files: e.h.Operations, Catalog: e.h.Catalog,
		View: e.h.viewInfo()} // view.go
	e.h.run.mu.Lock()
	if f := e.h.run.follower; f != nil {
		s := f.Status()
		info.Serving = &s
	}
	e.h.run.mu.Unlock()
	if hst := e.h.currentHost(); hst != nil {
		info.Tools = len(hst.Operations())
	}
	return info
}

// Serving is the host the handler serves now.
func (e adminEndpoint) Serving() *host.Host { return e.h.currentHost() }

// Build builds a host for the admin API's checks and test runs: an entry
// that cannot load fails it (a draft that does not load is refused).
func (e adminEndpoint) Build(ctx context.Context, doc *catalog.Document, files bool) (*host.Host, error) {
	return e.h.build(ctx, e.st, doc, files, host.LoadFail)
}

// runningApp is the crank app of the running config, from its Start on;
// the admin API reads it.
var runningApp atomic.Pointer[App]

// adminGateway is the admin API's view of the running config.
func adminGateway() *admin.Gateway {
	a := runningApp.Load()
	g := &admin.Gateway{Audit: caddy.Log().Named("admin.api.crank.audit"), RateLimits: budgets.States}
	if a == nil || a.store == nil {
		return g
	}
	st := a.store.Etcd
	g.Store, g.History = st, a.CatalogHistory
	for i, h := range a.handlers {
		g.Endpoints = append(g.Endpoints, adminEndpoint{h: h, id: i, st: st})
	}
	return g
}

// pooledAdapter returns the pooled supervisor of an adapter, holding one
// more reference to it (released with adapterPool.Delete).
func pooledAdapter(spec host.AdapterSpec) (*host.Supervisor, error) {
	val, _, err := adapterPool.LoadOrNew(spec.Key(), func() (caddy.Destructor, error) {
		return pooledSupervisor{host.NewSupervisor(spec, host.SupervisorOptions{
			Logger: caddy.Log().Named("crank.adapter"), HostVersion: Version,
		})}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(pooledSupervisor).Supervisor, nil
}

// serveCatalogAdmin serves the admin API's catalog, endpoint and live
// state routes (docs/admin-api.md).
func serveCatalogAdmin(w http.ResponseWriter, r *http.Request) error {
	if err := adminGateway().ServeHTTP(w, r); err != nil {
		var e *admin.Error
		if errors.As(err, &e) {
			admin.WriteError(w, e)
			return nil
		}
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return nil
}
