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
// driven by hand with /crank/tools/{tool}/call) and Live (/crank/adapters
// and /crank/live).
//
// # Access
//
// Every request is refused (403, with the reason) unless one of these holds:
//
//   - an authentication handler before the console named a user (User
//     returns it): the request is the user's;
//   - the client is on loopback (127.0.0.0/8, ::1) and the Host it asked
//     for is a loopback name (localhost, 127.x.y.z, [::1]), which keeps a
//     page of another site that rebinds its DNS name to 127.0.0.1 out.
//
// A request that changes anything (any method but GET and HEAD) must also
// come from the console's own page: its Origin must be the request's own
// scheme and host, and a `Sec-Fetch-Site` other than same-origin is
// refused, so another site's page cannot post to it (CSRF).
//
// Changes are attributed to `console:<user>` (or `console:loopback`) in
// the catalog's version records and the admin audit log.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"net/url"
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
	if user != "" {
		who = "console:" + user
	} else {
		if !loopback.HostPort(r.RemoteAddr) {
			return "", "the console answers only loopback clients unless an authentication handler (basic_auth, forward_auth, …) runs before it"
		}
		if !loopback.HostPort(r.Host) {
			return "", "the console answers only Host names on loopback (localhost, 127.0.0.1, [::1]) unless an authentication handler runs before it"
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
