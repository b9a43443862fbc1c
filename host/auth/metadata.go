package auth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// WellKnownPrefix is where protected resource metadata lives (RFC 9728).
const WellKnownPrefix = "/.well-known/oauth-protected-resource"

// protectedResourceMetadata is the RFC 9728 document.
type protectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

func (rs *ResourceServer) metadataJSON() []byte {
	m := protectedResourceMetadata{Resource: rs.cfg.Resource, ScopesSupported: rs.cfg.ScopesSupported,
		BearerMethodsSupported: []string{"header"}, ResourceName: "Crank MCP gateway"}
	for _, is := range rs.cfg.Issuers {
		m.AuthorizationServers = append(m.AuthorizationServers, is.Issuer)
	}
	b, _ := json.Marshal(m)
	return b
}

// MetadataURL is the URL of the resource's metadata: the well-known
// prefix inserted before the resource's path (RFC 9728 §3.1).
func (rs *ResourceServer) MetadataURL() string {
	u, _ := url.Parse(rs.cfg.Resource)
	u.Path = WellKnownPrefix + strings.TrimSuffix(u.Path, "/")
	u.RawPath, u.RawQuery = "", ""
	return u.String()
}

// MetadataPaths are the request paths the metadata is served at: the
// path-scoped form and, for clients that look there first, the root.
func (rs *ResourceServer) MetadataPaths() []string {
	u, _ := url.Parse(rs.cfg.Resource)
	p := strings.TrimSuffix(u.Path, "/")
	if p == "" {
		return []string{WellKnownPrefix}
	}
	return []string{WellKnownPrefix + p, WellKnownPrefix}
}

// ServeMetadata answers a request for the metadata document and reports
// whether r asked for it (GET, HEAD or OPTIONS at one of MetadataPaths).
// The document is public: any origin may read it.
func (rs *ResourceServer) ServeMetadata(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, WellKnownPrefix) {
		return false
	}
	found := false
	for _, p := range rs.MetadataPaths() {
		if r.URL.Path == p || r.URL.Path == p+"/" {
			found = true
		}
	}
	if !found {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, MCP-Protocol-Version")
	switch r.Method {
	case http.MethodOptions:
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet, http.MethodHead:
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "max-age=300")
		h.Set("Content-Length", strconv.Itoa(len(rs.meta)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(rs.meta)
		}
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
	return true
}

// Challenge is the WWW-Authenticate value for a refusal (RFC 6750 §3,
// RFC 9728 §5.1): the metadata URL, the scopes the resource needs, and
// the error code and description when the request had a token.
func (rs *ResourceServer) Challenge(e *Error) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata=`)
	b.WriteString(quote(rs.MetadataURL()))
	if len(rs.cfg.Scopes) > 0 {
		b.WriteString(`, scope=`)
		b.WriteString(quote(strings.Join(rs.cfg.Scopes, " ")))
	}
	if e != nil && e.Code != "" {
		b.WriteString(`, error=`)
		b.WriteString(quote(e.Code))
		if e.Description != "" {
			b.WriteString(`, error_description=`)
			b.WriteString(quote(e.Description))
		}
	}
	return b.String()
}

// quote makes a quoted-string of s; RFC 6750 allows only printable ASCII
// but '"' and '\' in error_description, so others become '?'.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\'')
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
