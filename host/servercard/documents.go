package servercard

import (
	"encoding/json"
	"net/url"
	"strings"
)

// The drafts these documents follow (docs/architecture/before-connecting.md
// cites them):
//
//   - the server card of SEP-2127 ("MCP Server Cards", the
//     experimental-ext-server-card schema): $schema, name, version,
//     description, title, websiteUrl, remotes (type, url, headers,
//     supportedProtocolVersions) and _meta; served at
//     <streamable-http-url>/server-card as application/mcp-server-card+json
//     with CORS for any origin and caching headers;
//   - the AI Catalog (Agent-Card/ai-catalog, specVersion 1.0): entries of
//     identifier, displayName, type and url, served at
//     /.well-known/ai-catalog.json as application/ai-catalog+json;
//   - the MCP registry's server.json (schema 2025-12-11): name,
//     description, version, title, websiteUrl and remotes.

// Media types and locations.
const (
	// CardMediaType is the server card's media type.
	CardMediaType = "application/mcp-server-card+json"
	// CatalogMediaType is the AI catalog's media type.
	CatalogMediaType = "application/ai-catalog+json"
	// CardSuffix follows an endpoint's path to make its card's.
	CardSuffix = "/server-card"
	// CatalogPath is the domain's AI catalog.
	CatalogPath = "/.well-known/ai-catalog.json"
	// CardSchema and ServerJSONSchema are the documents' $schema.
	CardSchema       = "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"
	ServerJSONSchema = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
	// CatalogSpecVersion is the AI catalog's specVersion.
	CatalogSpecVersion = "1.0"
	// AuthMetaKey is the _meta member of a card that says how its endpoint
	// authorizes requests.
	AuthMetaKey = "io.github.crankmcp/authorization"
)

// Endpoint is what the running endpoint says of itself, beside its
// config: where it is and what it speaks.
type Endpoint struct {
	// URL is the endpoint's public URL: the config's, else the auth
	// resource, else the one the request came to.
	URL string
	// Version is the server's version when the config gives none.
	Version string
	// ProtocolVersions are the MCP protocol versions it serves, newest
	// first.
	ProtocolVersions []string
	// Auth is its authorization, nil when it needs none of its own.
	Auth *Auth
}

// Auth is an endpoint's OAuth 2.1 authorization as a client learns it
// before connecting: all of it is public (the protected resource
// metadata and the WWW-Authenticate challenge say the same).
type Auth struct {
	// MetadataURL is its protected resource metadata (RFC 9728).
	MetadataURL string
	// Scopes are the scopes every token needs.
	Scopes []string
}

// URLOf is the endpoint's public URL: the config's, else the auth
// resource, else fallback (the URL a request came to); "" when none is
// known.
func (c *Config) URLOf(resource, fallback string) string {
	switch {
	case c.URL != "":
		return c.URL
	case resource != "":
		return resource
	}
	return fallback
}

// The documents' shapes, in the drafts' member order.
type (
	card struct {
		Schema      string         `json:"$schema"`
		Name        string         `json:"name"`
		Version     string         `json:"version"`
		Description string         `json:"description"`
		Title       string         `json:"title,omitempty"`
		WebsiteURL  string         `json:"websiteUrl,omitempty"`
		Remotes     []remote       `json:"remotes"`
		Meta        map[string]any `json:"_meta,omitempty"`
	}
	remote struct {
		Type                      string   `json:"type"`
		URL                       string   `json:"url"`
		Headers                   []header `json:"headers,omitempty"`
		SupportedProtocolVersions []string `json:"supportedProtocolVersions,omitempty"`
	}
	header struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		IsRequired  bool   `json:"isRequired,omitempty"`
		IsSecret    bool   `json:"isSecret,omitempty"`
	}
	authMeta struct {
		Scheme                    string   `json:"scheme"`
		ProtectedResourceMetadata string   `json:"protectedResourceMetadata"`
		Scopes                    []string `json:"scopes,omitempty"`
	}
	catalog struct {
		SpecVersion string  `json:"specVersion"`
		Entries     []Entry `json:"entries"`
	}
)

// Entry is an endpoint's entry in the AI catalog.
type Entry struct {
	Identifier  string `json:"identifier"`
	DisplayName string `json:"displayName,omitempty"`
	Type        string `json:"type"`
	URL         string `json:"url"`
}

func (c *Config) version(ep Endpoint) string {
	if c.Version != "" {
		return c.Version
	}
	return ep.Version
}

// remote is the endpoint as a remote of a card or server.json; versions
// only in a card, whose schema has them.
func (c *Config) remote(ep Endpoint, versions bool) remote {
	r := remote{Type: "streamable-http", URL: ep.URL}
	if versions {
		r.SupportedProtocolVersions = ep.ProtocolVersions
	}
	if ep.Auth != nil {
		r.Headers = []header{{Name: "Authorization", IsRequired: true, IsSecret: true,
			Description: "Bearer <access token> from an authorization server of the protected resource metadata at " + ep.Auth.MetadataURL}}
	}
	return r
}

// Card is the endpoint's server card.
func (c *Config) Card(ep Endpoint) []byte {
	d := card{Schema: CardSchema, Name: c.Name, Version: c.version(ep), Description: c.Description, Title: c.Title,
		WebsiteURL: c.WebsiteURL, Remotes: []remote{c.remote(ep, true)}}
	if ep.Auth != nil {
		d.Meta = map[string]any{AuthMetaKey: authMeta{Scheme: "oauth2", ProtectedResourceMetadata: ep.Auth.MetadataURL, Scopes: ep.Auth.Scopes}}
	}
	return marshal(d)
}

// ServerJSON is the endpoint's MCP registry server.json.
func (c *Config) ServerJSON(ep Endpoint) []byte {
	d := card{Schema: ServerJSONSchema, Name: c.Name, Version: c.version(ep), Description: c.Description, Title: c.Title,
		WebsiteURL: c.WebsiteURL, Remotes: []remote{c.remote(ep, false)}}
	return marshal(d)
}

// Entry is the endpoint's AI catalog entry; ok is false when the config
// leaves it out of the catalog.
func (c *Config) Entry(endpointURL string) (e Entry, ok bool) {
	if !c.listed() || endpointURL == "" {
		return Entry{}, false
	}
	id := c.Identifier
	if id == "" {
		u, _ := url.Parse(endpointURL)
		_, name, _ := strings.Cut(c.Name, "/")
		id = "urn:air:" + strings.ToLower(u.Hostname()) + ":mcp:" + name
	}
	display := c.Title
	if display == "" {
		display = c.Name
	}
	return Entry{Identifier: id, DisplayName: display, Type: CardMediaType, URL: strings.TrimSuffix(endpointURL, "/") + CardSuffix}, true
}

// Catalog is the AI catalog of the entries, in their order.
func Catalog(entries []Entry) []byte {
	if entries == nil {
		entries = []Entry{}
	}
	return marshal(catalog{SpecVersion: CatalogSpecVersion, Entries: entries})
}

func marshal(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}
