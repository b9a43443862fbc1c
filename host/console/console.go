// Package console is Crank's operator console: a web page, embedded in
// the binary, to browse, edit, validate and try the operations of the
// catalogs kept in etcd, over the admin API (docs/admin-api.md).
//
// # Design
//
// The console is an HTTP handler of a site (the Caddy module
// `crank_console`, Caddyfile directive `crank_console`), not a route of
// Caddy's admin endpoint. The admin endpoint refuses what a browser sends
// when an operator types its address: a navigation carries
// `Sec-Fetch-Mode` without `Origin` or `Referer`, and Caddy answers 403
// (client not allowed from an empty origin). A site handler sits
// instead behind the site's own access controls — Caddy's authentication
// handlers (`basic_auth`, `forward_auth`, …) placed before it — and Crank
// adds no password scheme of its own.
//
// Handler serves:
//
//	{prefix}/          the page (index.html, app.js, form.js, style.css), from go:embed
//	{prefix}/api/…     the admin API's /crank/… routes, called in process
//
// The page is plain HTML, CSS and two ES modules with no dependency and
// no build step: it works offline, and `make run` needs no network. Its
// screens are Tools (GET /crank/tools), Catalogs (the operation form,
// history, test runs streamed with ?stream=true, sessions and jobs
// driven by hand with /crank/tools/{tool}/call, the catalog's rate limits
// with a form from /crank/schema/rate_limit) and Live (/crank/adapters,
// /crank/rate-limits and /crank/live).
//
// # Access
//
// Every request is refused (403, with the reason) unless one of these holds:
//
//   - an authentication handler before the console named a user (User
//     returns it): the request is the user's, from wherever it came,
//     proxies included;
//   - the operator opted into loopback access without a user
//     (LoopbackWithoutLogin, the Caddyfile's loopback_without_login) and
//     the request is a loopback client's own: it arrived on a loopback
//     listener (the connection's local address, http.LocalAddrContextKey)
//     from a loopback peer (127.0.0.0/8, ::1), asked for a loopback Host
//     (localhost, 127.x.y.z, [::1]; a page of another site that rebinds
//     its DNS name to 127.0.0.1 sends its own name), and carries no proxy
//     header (Forwarded, X-Forwarded-*, Via, X-Real-IP). A reverse proxy
//     on the same machine that rewrites the Host to a loopback name makes
//     every remote request look local; the proxy headers are how those
//     that announce themselves (Caddy's reverse_proxy always does) are
//     told apart. One that sends none cannot be, so with the option every
//     local process is an operator.
//
// Without a user, nothing is answered otherwise: no Origin a client sends
// stands for a user, since any program can send one.
//
// A request that changes anything (any method but GET and HEAD) must also
// come from the console's own page: its Origin must be the request's own
// scheme and host, and a `Sec-Fetch-Site` other than same-origin is
// refused, so another site's page cannot post to it (CSRF).
//
// The same rules cover the admin API's routes under {prefix}/api/: they
// are served only through this check.
//
// Changes are attributed to `console:<user>` (or `console:loopback`) in
// the catalog's version records and the admin audit log.
package console

import (
	"embed"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/plugins/sdk/loopback"
)

//go:embed assets
var assets embed.FS

// Assets are the page's files (index.html, app.js, form.js, style.css).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	return sub
}

// Handler serves the console under Prefix.
type Handler struct {
	// Prefix is the path the console is served under ("/console" when
	// empty); the page uses relative addresses, so any prefix works.
	Prefix string
	// API serves the admin API's /crank/… paths; the caller is in the
	// request's context (admin.WithCaller).
	API http.Handler
	// User returns the user an authentication handler before the console
	// verified, or "".
	User func(*http.Request) string
	// LoopbackWithoutLogin opens the console to loopback clients without
	// a user (see Access in the package doc); off, every request needs one.
	LoopbackWithoutLogin bool
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, reason := h.access(r)
	if reason != "" {
		writeError(w, http.StatusForbidden, reason)
		return
	}
	prefix := strings.TrimSuffix(h.Prefix, "/")
	if prefix == "" {
		prefix = "/console"
	}
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		writeError(w, http.StatusNotFound, "the console is served under "+prefix+"/")
		return
	}
	if rest == "" {
		http.Redirect(w, r, prefix+"/", http.StatusFound)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	if api, ok := strings.CutPrefix(rest, "/api/"); ok {
		r2 := r.Clone(admin.WithCaller(r.Context(), who))
		r2.URL.Path = "/crank/" + api
		r2.URL.RawPath = ""
		r2.RequestURI = r2.URL.RequestURI()
		h.API.ServeHTTP(w, r2)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on the console's page")
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-cache")
	r2 := r.Clone(r.Context())
	r2.URL.Path = rest
	http.FileServerFS(Assets()).ServeHTTP(w, r2)
}

// access says who the request is, or why it is refused.
func (h *Handler) access(r *http.Request) (who, reason string) {
	user := ""
	if h.User != nil {
		user = h.User(r)
	}
	switch {
	case user != "":
		who = "console:" + user
	case !h.LoopbackWithoutLogin:
		return "", "the console needs a user: put an authentication handler (basic_auth, forward_auth, …) before it, " +
			"or set loopback_without_login to let loopback clients in without one"
	default:
		if reason := directLoopback(r); reason != "" {
			return "", reason + " (loopback_without_login admits only loopback clients that reach a loopback listener directly; " +
				"authenticate anything else)"
		}
		who = "console:loopback"
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return who, ""
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "", "a change must come from the console's own page (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if origin == "" || err != nil || !strings.EqualFold(u.Host, r.Host) || u.Scheme != scheme(r) {
		return "", "a change must come from the console's own page (Origin " + quoteOrNone(origin) + " is not " + scheme(r) + "://" + r.Host + ")"
	}
	return who, ""
}

// proxyHeaders are the request headers a proxy adds (X-Forwarded-* by
// prefix): a request carrying one came through a proxy, which may have
// rewritten the Host to a loopback name.
var proxyHeaders = []string{"Forwarded", "Via", "X-Real-Ip"}

// directLoopback says why r is not a loopback client's own request to a
// loopback listener naming a loopback Host, or "" when it is one.
func directLoopback(r *http.Request) string {
	var seen []string
	for name := range r.Header {
		if strings.HasPrefix(name, "X-Forwarded-") || slices.Contains(proxyHeaders, name) {
			seen = append(seen, name)
		}
	}
	if len(seen) > 0 {
		slices.Sort(seen)
		return "the request came through a proxy (it carries " + strings.Join(seen, ", ") + ")"
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return "the listener the request arrived on is unknown"
	}
	if _, tcp := local.(*net.TCPAddr); !tcp || !loopback.HostPort(local.String()) {
		return "the listener " + local.String() + " is not on loopback"
	}
	if !loopback.HostPort(r.RemoteAddr) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		return "the client " + host + " is not on loopback"
	}
	if !loopback.HostPort(r.Host) {
		return fmt.Sprintf("the Host %q is not a loopback name (localhost, 127.0.0.1, [::1])", r.Host)
	}
	return ""
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func quoteOrNone(s string) string {
	if s == "" {
		return "missing"
	}
	return `"` + s + `"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	b, _ := jsonString(msg)
	_, _ = w.Write([]byte(`{"error":` + b + "}\n"))
}
