package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/crankmcp/crank/host/console"
)

func init() {
	caddy.RegisterModule(Console{})
	httpcaddyfile.RegisterHandlerDirective("crank_console", parseConsole)
	httpcaddyfile.RegisterDirectiveOrder("crank_console", httpcaddyfile.Before, "respond")
}

// Console serves the operator console (package host/console) on a site:
// the page, and the admin API's routes under {prefix}/api/, called in
// process. It answers loopback clients asking for a loopback Host, or
// the users an authentication handler before it verified
// ({http.auth.user.id}); see docs/security.md, "The operator console".
type Console struct {
	// Prefix is the path the console is served under. Default "/console".
	Prefix string `json:"prefix,omitempty"`

	h *console.Handler
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_console", New: func() caddy.Module { return new(Console) }}
}

// Provision builds the handler; it starts nothing.
func (c *Console) Provision(caddy.Context) error {
	if c.Prefix == "" {
		c.Prefix = "/console"
	}
	c.h = &console.Handler{
		Prefix: c.Prefix,
		API:    http.HandlerFunc(serveConsoleAPI),
		User: func(r *http.Request) string {
			repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			if repl == nil {
				return ""
			}
			user, _ := repl.GetString("http.auth.user.id")
			return user
		},
	}
	return nil
}

// Validate checks the prefix.
func (c *Console) Validate() error {
	if !strings.HasPrefix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "?#*") || c.Prefix == "/" {
		return errors.New(`crank_console: prefix: must be a path such as "/console" (not "/", no ?, # or *)`)
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler: the console answers
// every request it is routed.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	c.h.ServeHTTP(w, r)
	return nil
}

// serveConsoleAPI serves the admin API's /crank/… routes for the console,
// writing Caddy admin errors as the admin endpoint would.
func serveConsoleAPI(w http.ResponseWriter, r *http.Request) {
	var err error
	if r.URL.Path == "/crank/adapters" {
		err = serveAdapters(w, r)
	} else {
		err = serveCatalogAdmin(w, r)
	}
	if err == nil {
		return
	}
	status := http.StatusInternalServerError
	var ae caddy.APIError
	if errors.As(err, &ae) && ae.HTTPStatus != 0 {
		status = ae.HTTPStatus
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func parseConsole(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Console)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile sets up the console from Caddyfile tokens. Syntax:
//
//	crank_console [<matcher>] {
//	    prefix <path>
//	}
//
// for example `crank_console /console*`.
func (c *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "prefix":
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.Prefix = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("crank_console: unknown subdirective %q (prefix)", d.Val())
		}
	}
	return nil
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddy.Validator             = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddyfile.Unmarshaler       = (*Console)(nil)
)
