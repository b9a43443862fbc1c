package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/crankmcp/crank/host/console"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

func init() {
	caddy.RegisterModule(Console{})
	httpcaddyfile.RegisterHandlerDirective("crank_console", parseConsole)
	httpcaddyfile.RegisterDirectiveOrder("crank_console", httpcaddyfile.Before, "respond")
}

// Console serves the operator console (package host/console) on a site:
// the page, and the admin API's routes under {prefix}/api/, called in
// process. It answers the users an authentication handler before it
// verified ({http.auth.user.id}, or the user forward_auth's service
// named), and, with loopback_without_login, loopback clients that reach
// a loopback listener directly; see docs/security.md, "The operator
// console".
type Console struct {
	// Prefix is the path the console is served under. Default "/console".
	Prefix string `json:"prefix,omitempty"`
	// LoopbackWithoutLogin lets a loopback client in without a user, as
	// long as it reached a loopback listener directly (no Forwarded,
	// X-Forwarded-*, Via or X-Real-IP header) and asked for a loopback
	// Host. Off by default: every request needs a user an authentication
	// handler before the console verified. With it, every local process
	// (a reverse proxy on the machine included) is an operator.
	LoopbackWithoutLogin bool `json:"loopback_without_login,omitempty"`
	// ForwardAuthUserHeader names the header of the auth service's 2xx
	// answer to Caddy's forward_auth that carries the user (such as
	// oauth2-proxy's X-Auth-Request-User). It is read from that answer
	// ({http.reverse_proxy.header.*}), never from the client's request,
	// so a client cannot name itself. Used when no authentication handler
	// set {http.auth.user.id}.
	ForwardAuthUserHeader string `json:"forward_auth_user_header,omitempty"`

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
		Prefix:               c.Prefix,
		API:                  http.HandlerFunc(serveConsoleAPI),
		User:                 c.user,
		LoopbackWithoutLogin: c.LoopbackWithoutLogin,
	}
	return nil
}

// user is Caddy's authenticated user ({http.auth.user.id}), else, with
// forward_auth_user_header, the user the auth service named in that
// header of its 2xx answer to forward_auth: reverse_proxy keeps the
// answer's headers as {http.reverse_proxy.header.*}, which no client
// can set.
func (c *Console) user(r *http.Request) string {
	if id := authenticatedUser(r); id != "" || c.ForwardAuthUserHeader == "" {
		return id
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return ""
	}
	status, _ := repl.Get("http.reverse_proxy.status_code")
	if code, ok := status.(int); !ok || code/100 != 2 {
		return ""
	}
	user, _ := repl.GetString("http.reverse_proxy.header." + http.CanonicalHeaderKey(c.ForwardAuthUserHeader))
	return user
}

// Validate checks the prefix and the header name.
func (c *Console) Validate() error {
	if !strings.HasPrefix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "?#*") || c.Prefix == "/" {
		return errors.New(`crank_console: prefix: must be a path such as "/console" (not "/", no ?, # or *)`)
	}
	if c.ForwardAuthUserHeader != "" && !httpadapter.ValidHeaderName(c.ForwardAuthUserHeader) {
		return fmt.Errorf("crank_console: forward_auth_user_header: %q is not a header name", c.ForwardAuthUserHeader)
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
//	    loopback_without_login
//	    forward_auth_user_header <header>
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
		case "loopback_without_login":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.LoopbackWithoutLogin = true
		case "forward_auth_user_header":
			if !d.AllArgs(&c.ForwardAuthUserHeader) {
				return d.ArgErr()
			}
		default:
			return d.Errf("crank_console: unknown subdirective %q (prefix, loopback_without_login, forward_auth_user_header)", d.Val())
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
