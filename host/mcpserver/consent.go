package mcpserver

import (
	"html/template"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
)

// A consent's callback (upstream_auth authorization_code, host
// upstream_grant.go): the upstream's provider sends the user's browser
// back to <path>/oauth/callback with the authorization code and the state
// the host sealed. The endpoint serves it before the Origin and token
// checks (a browser's top-level navigation carries neither), on any
// replica: the host checks the state against the consent's record in
// the store and the browser's authenticated user (Options.
// AuthenticatedUser, from an authentication handler before crank on the
// route) against the consent's user, exchanges the code and stores the
// user's tokens. The page it answers names the upstream and the outcome,
// never a token or the code.

// consentRedirect is the redirect URI a consent uses when its config
// names none: the endpoint's auth resource followed by /oauth/callback
// ("" without auth: then a consent needs upstream_auth.redirect_uri).
func (ep *Endpoint) consentRedirect() string {
	if ep.auth == nil {
		return ""
	}
	return strings.TrimSuffix(ep.auth.Resource(), "/") + auth.CallbackSuffix
}

var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>{{if .OK}}Connected{{else}}Not connected{{end}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem}</style></head>
<body><h1 id="outcome">{{if .OK}}Connected{{else}}Not connected{{end}}</h1>
<p id="message">{{.Message}}</p></body></html>
`))

// serveConsent answers a consent's callback and reports whether r was
// one.
func (ep *Endpoint) serveConsent(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasSuffix(r.URL.Path, auth.CallbackSuffix) || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	h := ep.active.Load()
	if h == nil || len(h.UpstreamGrants()) == 0 {
		return false
	}
	q := r.URL.Query()
	cb := host.ConsentCallback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), ErrorDescription: q.Get("error_description")}
	if ep.authenticatedUser != nil {
		cb.BrowserUser = ep.authenticatedUser(r)
	}
	out := h.CompleteConsent(r.Context(), cb)
	if !out.OK {
		ep.logger.Info("consent callback refused", zap.String("upstream", out.Upstream), zap.Int("status", out.Status), zap.String("reason", out.Message))
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(out.Status)
	if r.Method == http.MethodGet {
		_ = consentPage.Execute(w, out)
	}
	return true
}
