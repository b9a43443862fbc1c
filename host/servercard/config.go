// Package servercard holds what a client can learn of an MCP endpoint
// before it connects, Caddy-free: the endpoint's server card (served at
// <endpoint>/server-card, SEP-2127), its entry in the domain's AI catalog
// (/.well-known/ai-catalog.json), and its MCP registry server.json (the
// crank server-json command). Every document says who the server is and
// how to reach it — name, version, the endpoint URL, the protocol
// versions, what authorization it needs — and never what it serves:
// tools, resources and prompts stay for the protocol's own list methods,
// and no upstream, secret or internal address appears.
//
// The endpoint's config is declared once, as Config: its json tags name
// the fields of the JSON config and the Caddyfile subdirectives, its
// jsonschema tags document them (Fields), and Check reports what is wrong
// with a field named.
package servercard

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/crankmcp/crank/host/configblock"
	"github.com/crankmcp/crank/plugins/sdk/loopback"
)

// Config is an endpoint's server card config (the handler's server_card
// block). Every field is a string, so the Caddyfile's subdirectives take
// one value each.
type Config struct {
	Name        string `json:"name" jsonschema:"The server's name in reverse-DNS form, namespace/name (e.g. com.example/weather), 3 to 200 characters. Required."`
	Description string `json:"description" jsonschema:"What the server offers, 1 to 100 characters. Required."`
	Title       string `json:"title,omitempty" jsonschema:"A display name, at most 100 characters."`
	Version     string `json:"version,omitempty" jsonschema:"The server's version; default Crank's, which clients see as serverInfo.version."`
	URL         string `json:"url,omitempty" jsonschema:"The endpoint's public URL, as clients reach it (https, or http on loopback); default the auth block's resource, else the URL the request for the card came to. Required for the AI catalog and server.json."`
	WebsiteURL  string `json:"website_url,omitempty" jsonschema:"A page about the server (https or http)."`
	Identifier  string `json:"identifier,omitempty" jsonschema:"The server's identifier in the AI catalog; default urn:air:<host of url>:mcp:<the part of name after the slash>."`
	AICatalog   string `json:"ai_catalog,omitempty" enum:"on,off" default:"on" jsonschema:"on lists the endpoint in /.well-known/ai-catalog.json (when it has a url), off leaves it out; its card is served either way."`
}

// Field is one field of Config.
type Field = configblock.Field

// Fields lists Config's fields in declaration order.
func Fields() []Field { return configblock.Fields[Config]() }

// Set sets the field named name to v, reporting whether Config has such
// a field.
func (c *Config) Set(name, v string) bool { return configblock.Set(c, name, []string{v}) == nil }

// FieldNames lists the fields' names, for a message about an unknown one.
func FieldNames() string { return configblock.Names[Config]() }

// namePattern is the server name's form in the server card and
// server.json schemas.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)

// Check reports every problem of the config, each naming its field as
// prefix.<field>; nil when it has none.
func (c *Config) Check(prefix string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", prefix, field, fmt.Sprintf(format, args...)))
	}
	length := func(field, v string, lo, hi int) {
		if n := utf8.RuneCountInString(v); n < lo || n > hi {
			if lo > 0 && n == 0 {
				bad(field, "required")
				return
			}
			bad(field, "must be %d to %d characters, got %d", lo, hi, n)
		}
	}
	length("name", c.Name, 3, 200)
	if c.Name != "" && !namePattern.MatchString(c.Name) {
		bad("name", "must be namespace/name in reverse-DNS form, such as com.example/weather (letters, digits, '.', '-' before the slash, and '_' after it)")
	}
	length("description", c.Description, 1, 100)
	length("title", c.Title, 0, 100)
	length("version", c.Version, 0, 255)
	if strings.ContainsAny(c.Version, " ^~<>=*") || strings.HasSuffix(c.Version, ".x") {
		bad("version", "must be one version (such as 1.2.0), not a range")
	}
	if c.URL != "" {
		if err := endpointURL(c.URL); err != nil {
			bad("url", "%v", err)
		}
	}
	if c.WebsiteURL != "" {
		if u, err := url.Parse(c.WebsiteURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("website_url", "must be an absolute http or https URL")
		}
	}
	if c.Identifier != "" && (strings.ContainsAny(c.Identifier, " \t\r\n") || !strings.Contains(c.Identifier, ":")) {
		bad("identifier", "must be a URI or URN without spaces, such as urn:air:example.com:mcp:weather")
	}
	switch c.AICatalog {
	case "", "on", "off":
	default:
		bad("ai_catalog", "must be on or off")
	}
	return errors.Join(errs...)
}

// endpointURL checks an endpoint's public URL: absolute, https (http only
// on loopback), no credentials, query or fragment, not the card's own.
func endpointURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("must be an absolute https URL, such as https://mcp.example.com/mcp")
	}
	if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		return errors.New("must be https (http only on loopback)")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must have no credentials, query or fragment")
	}
	if strings.HasSuffix(u.Path, CardSuffix) {
		return fmt.Errorf("is the endpoint's URL, not its card's: leave out %s", CardSuffix)
	}
	return nil
}

// listed reports whether the config lists its endpoint in the AI catalog.
func (c *Config) listed() bool { return c.AICatalog != "off" }
