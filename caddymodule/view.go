package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/opsfile"
)

// The view of an endpoint (Handler.View, a "virtual server"): which of
// its tools it publishes, how, and the discovery meta-tools
// (host/mcpserver/view.go). Its own errors fail Provision, naming the
// field; an override of a tool the operations do not have, or two tools
// published under one name, fail the start (or the catalog version).

// unmarshalView parses the view block. Syntax:
//
//	view {
//	    toolset   <name> <selector...>
//	    include   <selector...>
//	    exclude   <selector...>
//	    tool <name> {
//	        name        <new name>
//	        title       <text>
//	        description <text>
//	        read_only|destructive|idempotent|open_world true|false
//	    }
//	    discovery off|beside|only
//	}
//
// A selector is a name glob, toolset:<name>, annotation:[!]<hint> or
// mode:<mode>.
func (h *Handler) unmarshalView(d *caddyfile.Dispenser) (bool, error) {
	if d.Val() != "view" {
		return false, nil
	}
	if h.View != nil {
		return true, d.Err("view: given twice")
	}
	if d.NextArg() {
		return true, d.ArgErr()
	}
	v := &mcpserver.ViewConfig{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "toolset":
			args := d.RemainingArgs()
			if len(args) < 2 {
				return true, d.Errf("view: toolset: want a name and its selectors (toolset <name> <selector...>)")
			}
			if _, dup := v.Toolsets[args[0]]; dup {
				return true, d.Errf("view: toolset %q given twice", args[0])
			}
			if v.Toolsets == nil {
				v.Toolsets = map[string][]string{}
			}
			v.Toolsets[args[0]] = args[1:]
		case "include", "exclude":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return true, d.Errf("view: %s: want one or more selectors", opt)
			}
			if opt == "include" {
				v.Include = append(v.Include, args...)
			} else {
				v.Exclude = append(v.Exclude, args...)
			}
		case "discovery":
			if !d.AllArgs(&v.Discovery) {
				return true, d.Errf("view: discovery: want one of off, beside, only")
			}
		case "tool":
			var name string
			if !d.NextArg() {
				return true, d.Errf("view: tool: want the tool's name (tool <name> { ... })")
			}
			name = d.Val()
			if d.NextArg() {
				return true, d.ArgErr()
			}
			if _, dup := v.Tools[name]; dup {
				return true, d.Errf("view: tool %q given twice", name)
			}
			o, err := unmarshalToolOverride(d, name)
			if err != nil {
				return true, err
			}
			if v.Tools == nil {
				v.Tools = map[string]mcpserver.ToolOverride{}
			}
			v.Tools[name] = o
		default:
			return true, d.Errf("view: unrecognized option %q (toolset, include, exclude, tool, discovery)", opt)
		}
	}
	h.View = v
	return true, nil
}

func unmarshalToolOverride(d *caddyfile.Dispenser, tool string) (mcpserver.ToolOverride, error) {
	var o mcpserver.ToolOverride
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var arg string
		if !d.AllArgs(&arg) {
			return o, d.Errf("view: tool %s: %s: want one value", tool, opt)
		}
		switch opt {
		case "name":
			o.Name = arg
		case "title":
			o.Title = arg
		case "description":
			o.Description = arg
		case "read_only", "destructive", "idempotent", "open_world":
			b, err := strconv.ParseBool(arg)
			if err != nil {
				return o, d.Errf("view: tool %s: %s: want true or false, got %q", tool, opt, arg)
			}
			if o.Annotations == nil {
				o.Annotations = &opsfile.Annotations{}
			}
			dst := map[string]**bool{"read_only": &o.Annotations.ReadOnly, "destructive": &o.Annotations.Destructive,
				"idempotent": &o.Annotations.Idempotent, "open_world": &o.Annotations.OpenWorld}[opt]
			*dst = &b
		default:
			return o, d.Errf("view: tool %s: unrecognized option %q (name, title, description, read_only, destructive, idempotent, open_world)", tool, opt)
		}
	}
	return o, nil
}

// viewInfo is what the handler's view publishes of the host it serves
// now, for the admin API; nil without a view.
func (h *Handler) viewInfo() *admin.EndpointView {
	if h.View == nil || h.ep == nil {
		return nil
	}
	discovery, tools := h.ep.ViewTools(h.currentHost())
	out := &admin.EndpointView{Discovery: discovery, Tools: []admin.ViewTool{}}
	for _, t := range tools {
		out.Tools = append(out.Tools, admin.ViewTool(t))
	}
	return out
}
