package mcpserver

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/servercard"
)

// What a client learns before connecting (host/servercard): with
// Options.ServerCard the endpoint serves its server card at <endpoint
// path>/server-card (GET, HEAD, and the CORS preflight) to any origin,
// without a token, as it serves its protected resource metadata; the
// Host check still applies (a loopback listener answers loopback names
// only). The card names the endpoint, its URL, the protocol versions it
// serves and its authorization, never a tool, resource or prompt, an
// upstream or a secret. ServeCatalog serves the domain's AI catalog of
// the entries the caller gathered (CatalogEntry of each endpoint).

// CardEndpoint is what an endpoint says of itself in its documents: its
// public URL (the card's url, else the auth resource, else fallback), its
// version, the protocol versions of both generations and its
// authorization (rs nil: none).
func CardEndpoint(card *servercard.Config, rs *auth.ResourceServer, version, fallback string) servercard.Endpoint {
	e := servercard.Endpoint{Version: version, ProtocolVersions: mcp.SupportedProtocolVersions()}
	resource := ""
	if rs != nil {
		resource = rs.Resource()
		e.Auth = &servercard.Auth{MetadataURL: rs.MetadataURL(), Scopes: rs.Scopes()}
	}
	e.URL = card.URLOf(resource, fallback)
	return e
}

// serveCard answers a request for the server card and reports whether r
// asked for it.
func (ep *Endpoint) serveCard(w http.ResponseWriter, r *http.Request) bool {
	if ep.card == nil || !strings.HasSuffix(r.URL.Path, servercard.CardSuffix) {
		return false
	}
	e := CardEndpoint(ep.card, ep.auth, ep.version, requestURL(r, strings.TrimSuffix(r.URL.Path, servercard.CardSuffix)))
	servercard.Serve(w, r, ep.card.Card(e), servercard.CardMediaType)
	return true
}

// requestURL is the URL a request came to with the path p, as the client
// wrote it: its Host, https when it came over TLS. Behind a proxy that
// changes either, the card's url says the public one.
func requestURL(r *http.Request, p string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: p}).String()
}

// CatalogEntry is the endpoint's entry in the domain's AI catalog; ok is
// false without a server card, with ai_catalog off, or when its public
// URL is not configured (the card's url or the auth resource).
func (ep *Endpoint) CatalogEntry() (servercard.Entry, bool) {
	if ep.card == nil {
		return servercard.Entry{}, false
	}
	return ep.card.Entry(CardEndpoint(ep.card, ep.auth, ep.version, "").URL)
}

// ServesCard reports whether the endpoint has a server card.
func (ep *Endpoint) ServesCard() bool { return ep.card != nil }

// ServeCatalog serves the AI catalog of the entries whose cards are on
// the request's host, once r passed the endpoint's Host check.
func (ep *Endpoint) ServeCatalog(w http.ResponseWriter, r *http.Request, entries []servercard.Entry) {
	if ep.refuseHost(w, r) { // origin.go
		return
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	var on []servercard.Entry
	for _, e := range entries {
		if u, err := url.Parse(e.URL); err == nil && strings.EqualFold(u.Hostname(), strings.Trim(host, "[]")) {
			on = append(on, e)
		}
	}
	servercard.Serve(w, r, servercard.Catalog(on), servercard.CatalogMediaType)
}
