package caddymodule

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/crankmcp/crank/host/mcpserver"
	"github.com/crankmcp/crank/host/servercard"
)

// What a client learns of an endpoint before it connects
// (host/servercard): its server card at <endpoint>/server-card, its
// entry in the AI catalog at /.well-known/ai-catalog.json (of every
// endpoint of the config on the request's host), and its registry
// server.json (crank server-json). Caddy must route those paths to the
// handler.

// ServerJSONCommand prints an endpoint's MCP registry server.json.
const ServerJSONCommand = "server-json"

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  ServerJSONCommand,
		Usage: "--config <file> [--adapter <name>] [--name <server name>]",
		Short: "Prints the MCP registry server.json of a Crank endpoint",
		Long: `Prints the MCP registry server.json (schema 2025-12-11) of the crank
endpoint of a config (a Caddyfile or JSON) that has a server_card block:
its name, title, description, version and website, and the endpoint as a
streamable-http remote with the Authorization header it needs. It reads
the config only: nothing is started or fetched. The endpoint's public URL
comes from server_card's url, else from its auth block's resource. With
several endpoints of different names, --name picks one.`,
		Func:  runServerJSON,
		Flags: serverJSONFlags(),
	})
}

func serverJSONFlags() *flag.FlagSet {
	flags := flag.NewFlagSet(ServerJSONCommand, flag.ContinueOnError)
	flags.String("config", "", "the config file (Caddyfile or JSON)")
	flags.String("adapter", "", "the config adapter (default: caddyfile for a Caddyfile, else JSON)")
	flags.String("name", "", "the server_card name of the endpoint to print, when the config has several")
	return flags
}

func runServerJSON(fl caddycmd.Flags) (int, error) {
	file := fl.String("config")
	if file == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--config is required")
	}
	cfg, _, _, err := caddycmd.LoadConfig(file, fl.String("adapter"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	doc, err := serverJSON(cfg, fl.String("name"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	_, err = os.Stdout.Write(doc)
	return caddy.ExitCodeSuccess, err
}

// serverJSON is the server.json of the endpoint named name (any, when
// the config's cards all have one name) of a Caddy JSON config.
func serverJSON(cfg []byte, name string) ([]byte, error) {
	var root any
	if err := json.Unmarshal(cfg, &root); err != nil {
		return nil, err
	}
	var found []*Handler
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "crank" && v["server_card"] != nil {
				raw, _ := json.Marshal(v)
				if h := new(Handler); json.Unmarshal(raw, h) == nil {
					if name == "" || h.ServerCard.Name == name {
						found = append(found, h)
					}
					if !slices.Contains(names, h.ServerCard.Name) {
						names = append(names, h.ServerCard.Name)
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(root)
	switch {
	case len(found) == 0 && name != "":
		return nil, fmt.Errorf("no crank endpoint's server_card is named %q (the config has: %s)", name, strings.Join(names, ", "))
	case len(found) == 0:
		return nil, errors.New("no crank endpoint of the config has a server_card block")
	}
	slices.Sort(names)
	if name == "" && len(names) > 1 {
		return nil, fmt.Errorf("the config has endpoints of several names (%s): pick one with --name", strings.Join(names, ", "))
	}
	h := found[0]
	if err := h.ServerCard.Check("server_card"); err != nil {
		return nil, err
	}
	rs, err := h.Auth.resourceServer(nil) // checks the block; no I/O
	if err != nil {
		return nil, err
	}
	ep := mcpserver.CardEndpoint(h.ServerCard, rs, Version, "")
	if ep.URL == "" {
		return nil, errors.New("server_card.url is required (or an auth block's resource): server.json names the endpoint's public URL")
	}
	return h.ServerCard.ServerJSON(ep), nil
}

// unmarshalServerCard reads the server_card block; ok is false for any
// other subdirective. Syntax (one value each, fields of servercard.Config):
//
//	server_card {
//	    name        <namespace/name>
//	    description <text>
//	    title       <text>
//	    version     <version>
//	    url         <endpoint URL>
//	    website_url <URL>
//	    identifier  <URN>
//	    ai_catalog  on|off
//	}
func (h *Handler) unmarshalServerCard(d *caddyfile.Dispenser) (bool, error) {
	if d.Val() != "server_card" {
		return false, nil
	}
	if h.ServerCard != nil {
		return true, d.Err("server_card: given twice")
	}
	if d.NextArg() {
		return true, d.ArgErr()
	}
	c := &servercard.Config{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return true, d.Errf("server_card: %s: want one value", opt)
		}
		if !c.Set(opt, v) {
			return true, d.Errf("server_card: unrecognized option %q (%s)", opt, servercard.FieldNames())
		}
	}
	if err := c.Check("server_card"); err != nil {
		return true, d.Errf("%v", err)
	}
	h.ServerCard = c
	return true, nil
}

// serveCatalog serves the AI catalog when r asks for it and the handler
// has a server card, and reports whether it did.
func (h *Handler) serveCatalog(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != servercard.CatalogPath || h.ServerCard == nil || h.app == nil {
		return false
	}
	var entries []servercard.Entry
	for _, o := range h.app.handlers {
		if e, ok := o.ep.CatalogEntry(); ok && !slices.ContainsFunc(entries, func(x servercard.Entry) bool { return x.URL == e.URL }) {
			entries = append(entries, e)
		}
	}
	h.ep.ServeCatalog(w, r, entries)
	return true
}
