package caddymodule

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/mesh"
	"github.com/crankmcp/crank/store"
)

// An endpoint's registration as an mcp-mesh agent (host/mesh). The
// registrar belongs to the agent, not to one config: it lives in
// meshPool keyed by registry and agent id, so that a reload that keeps
// the agent keeps its registration (the new config's endpoint becomes its
// tool source) and only the agent's last config to go, or Caddy's stop,
// deregisters it. It starts with the crank app's Start, never at
// Provision, and never holds up serving.

// meshPool keeps registrars across config reloads.
var meshPool = caddy.NewUsagePool()

type pooledRegistrar struct{ *mesh.Registrar }

func (p pooledRegistrar) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return p.Stop(ctx)
}

// The store decides which replica sends a registration.
var _ mesh.Elector = (*store.Etcd)(nil)

// meshRun is a handler's hold on its registrar.
type meshRun struct {
	key    string
	reg    *mesh.Registrar
	unwire func()
}

// checkMeshAgents refuses a config in which two endpoints register as
// one mesh agent (the same registry and agent id): each would replace the
// other's tools. Handlers of one config with the same settings share an
// endpoint, and so its agent.
func (a *App) checkMeshAgents() error {
	seen := map[string]*mcpserver.Endpoint{}
	for _, h := range a.handlers {
		if !h.Mesh.Enabled() {
			continue
		}
		key := h.Mesh.Duty()
		if ep, ok := seen[key]; ok && ep != h.ep {
			return fmt.Errorf("crank: mesh.agent_id: two endpoints register as the agent %q of %s; give each its own agent_id",
				h.Mesh.AgentID, h.Mesh.Registry)
		}
		seen[key] = h.ep
	}
	return nil
}

// startMesh registers the handler's endpoint, when its mesh block names a
// registry: it takes the agent's registrar from the pool and makes this
// handler's endpoint its tool source.
func (h *Handler) startMesh(st *store.Etcd) error {
	if !h.Mesh.Enabled() || h.run.mesh != nil {
		return nil
	}
	cfg := *h.Mesh
	key := cfg.Duty()
	tools := publishedTools(h.ep)
	val, _, err := meshPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		r, err := mesh.New(mesh.Options{Config: cfg, Version: Version, Tools: tools, Elector: st, Logger: h.logger})
		if err != nil {
			return nil, fmt.Errorf("crank: %w", err)
		}
		return pooledRegistrar{r}, nil
	})
	if err != nil {
		return err
	}
	reg := val.(pooledRegistrar).Registrar
	reg.Update(cfg, tools, st)
	h.run.mesh = &meshRun{key: key, reg: reg, unwire: h.ep.OnToolsChanged(reg.Changed)}
	reg.Start()
	h.logger.Info("registering the endpoint with the mcp-mesh registry", zap.String("registry", cfg.Registry),
		zap.String("agent", cfg.AgentID), zap.String("url", cfg.URL))
	return nil
}

// stopMesh lets go of the handler's registrar: the agent's last config
// to go deregisters it.
func (h *Handler) stopMesh() {
	if h.run == nil || h.run.mesh == nil {
		return
	}
	m := h.run.mesh
	h.run.mesh = nil
	m.unwire()
	_, _ = meshPool.Delete(m.key)
}

// publishedTools is the registrar's tool source: what ep publishes.
func publishedTools(ep *mcpserver.Endpoint) func() []mesh.Tool {
	return func() []mesh.Tool {
		pub := ep.PublishedTools()
		out := make([]mesh.Tool, 0, len(pub))
		for _, t := range pub {
			out = append(out, mesh.Tool{Name: t.Name, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Meta: t.Meta})
		}
		return out
	}
}

// unmarshalMesh reads the mesh block; ok is false for any other
// subdirective. Syntax (fields of mesh.Config; tags takes several
// values, the others one):
//
//	mesh {
//	    registry           <URL>
//	    agent_id           <id>
//	    name               <name>
//	    url                <public endpoint URL, ending in /mcp>
//	    namespace          <namespace>
//	    version            <version>
//	    tags               <tag...>
//	    heartbeat_interval <duration>
//	}
func (h *Handler) unmarshalMesh(d *caddyfile.Dispenser) (bool, error) {
	if d.Val() != "mesh" {
		return false, nil
	}
	if h.Mesh != nil {
		return true, d.Err("mesh: given twice")
	}
	if d.NextArg() {
		return true, d.ArgErr()
	}
	c := &mesh.Config{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if err := c.Set(opt, d.RemainingArgs()); err != nil {
			return true, d.Errf("mesh: %v", err)
		}
	}
	if !c.HasPlaceholders() { // else checked at Provision, expanded
		if err := c.Check("mesh"); err != nil {
			return true, d.Errf("%v", err)
		}
	}
	h.Mesh = c
	return true, nil
}

// provisionMesh expands the mesh block's placeholders and checks it.
func (h *Handler) provisionMesh() error {
	if h.Mesh == nil {
		return nil
	}
	repl := caddy.NewReplacer()
	h.Mesh.Expand(func(s string) string { return repl.ReplaceKnown(s, "") })
	return h.Mesh.Check("crank: mesh")
}
