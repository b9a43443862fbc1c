// Package mesh registers an MCP endpoint as an agent of an mcp-mesh
// registry (dhyansraj/mcp-mesh), Caddy-free: mesh agents then find the
// endpoint's tools there and call them at the endpoint's public URL (a
// bare tools/call to <url>, which the endpoint serves without a session:
// host/mcpserver's session-less legacy calls).
//
// The endpoint's config is declared once, as Config: its json tags name
// the fields of the JSON config and the Caddyfile subdirectives, its
// jsonschema tags document them (Fields), and Check reports what is wrong
// with a field named.
//
// A Registrar speaks the registry's HTTP API (api/mcp-mesh-registry.
// openapi.yaml of mcp-mesh, as its registry binary 3.7 serves it): POST
// /heartbeat with the whole registration (the registry registers an agent
// it does not know, and replaces the tools of one it knows), HEAD
// /heartbeat/<agent id> between changes (200: nothing to do; 202: the
// topology changed, send the whole registration; 410: the registry does
// not know the agent — it restarted or evicted it — register again) and
// DELETE /agents/<agent id> on a clean stop. It sends one capability per
// tool the endpoint publishes (after its view), and the whole
// registration again when the tool list changes. The registry is never
// on the serving path: when it is down the registrar warns once, counts
// the failure (crank_mesh_registry_requests_total), and retries with
// backoff, and the endpoint serves on.
//
// In a fleet every replica runs a registrar for the endpoint, but only the
// one that holds the endpoint's duty (an Elector: store.HoldDuty, one
// lock per registry and agent id on the replica's owner lease) sends
// anything; when it stops or dies another replica takes the duty at its
// next heartbeat and sends the registration, so the registry has one
// agent per endpoint, at the URL of the fleet's load balancer.
package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/loopback"

	"github.com/crankmcp/crank/host/configblock"
)

// Config is an endpoint's mesh block.
type Config struct {
	Registry          string   `json:"registry,omitempty" jsonschema:"The mcp-mesh registry's URL, such as http://127.0.0.1:8000. Empty turns registration off (so that a Caddyfile can name it from an environment variable that may be unset)."`
	AgentID           string   `json:"agent_id,omitempty" jsonschema:"The agent's id in the registry: 1 to 64 letters, digits, '-' or '_'. Required with a registry; every replica of a fleet uses the same."`
	Name              string   `json:"name,omitempty" jsonschema:"The agent's name as meshctl lists it, at most 64 characters; default agent_id."`
	URL               string   `json:"url,omitempty" jsonschema:"The endpoint's public URL as mesh agents reach it (a fleet's: its load balancer's), http or https, ending in /mcp: mesh consumers POST to <host:port>/mcp. Required with a registry."`
	Namespace         string   `json:"namespace,omitempty" default:"default" jsonschema:"The agent's namespace in the registry."`
	Version           string   `json:"version,omitempty" jsonschema:"The version of the agent and of each capability; default Crank's."`
	Tags              []string `json:"tags,omitempty" jsonschema:"Tags added to every capability (besides the ones that mark streaming and family tools)."`
	HeartbeatInterval string   `json:"heartbeat_interval,omitempty" default:"5s" jsonschema:"How often the registration is confirmed (a Go duration, 1s to 1m), well inside the registry's 20s timeout."`
}

// Field is one field of Config.
type Field = configblock.Field

// Fields lists Config's fields in declaration order.
func Fields() []Field { return configblock.Fields[Config]() }

// Set sets the field named name to vs (one value, or several for tags),
// reporting what is wrong: an unknown field or a wrong number of values.
func (c *Config) Set(name string, vs []string) error { return configblock.Set(c, name, vs) }

// HasPlaceholders reports whether a field holds a placeholder ({...}),
// which the config's loader expands before Check.
func (c *Config) HasPlaceholders() bool {
	found := false
	cp := *c
	cp.Tags = slices.Clone(c.Tags)
	configblock.Expand(&cp, func(s string) string {
		found = found || strings.Contains(s, "{")
		return s
	})
	return found
}

// Expand replaces every field's value v with expand(v).
func (c *Config) Expand(expand func(string) string) { configblock.Expand(c, expand) }

// Enabled reports whether the config registers anything: it names a
// registry.
func (c *Config) Enabled() bool { return c != nil && c.Registry != "" }

// agentID is the registry's form of an agent id.
var agentID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Check reports every problem of the config, each naming its field as
// prefix.<field>; nil when it has none (or when it registers nothing).
func (c *Config) Check(prefix string) error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", prefix, field, fmt.Sprintf(format, args...)))
	}
	if u, err := url.Parse(c.Registry); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		bad("registry", "must be an absolute http or https URL without credentials, query or fragment, such as http://127.0.0.1:8000")
	} else if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		// The registration carries every tool's schemas, and anyone on
		// the path of plain http could answer in the registry's name.
		bad("registry", "must be https off loopback (plain http only to 127.0.0.1, ::1 or localhost)")
	}
	if !agentID.MatchString(c.AgentID) {
		if c.AgentID == "" {
			bad("agent_id", "required")
		} else {
			bad("agent_id", "must be 1 to 64 letters, digits, '-' or '_', got %q", c.AgentID)
		}
	}
	if len(c.Name) > 64 {
		bad("name", "must be at most 64 characters")
	}
	if _, _, err := c.hostPort(); err != nil {
		bad("url", "%v", err)
	}
	for i, tag := range c.Tags {
		if tag == "" || len(tag) > 128 || strings.ContainsAny(tag, " \t\r\n") {
			bad(fmt.Sprintf("tags[%d]", i), "must be 1 to 128 characters without spaces")
		}
	}
	if c.HeartbeatInterval != "" {
		if d, err := time.ParseDuration(c.HeartbeatInterval); err != nil || d < time.Second || d > time.Minute {
			bad("heartbeat_interval", "must be a duration of 1s to 1m, got %q", c.HeartbeatInterval)
		}
	}
	return errors.Join(errs...)
}

// hostPort is where the registry says the agent is: the public URL's
// host and port (the registry records those, and mesh consumers call
// http(s)://<host>:<port>/mcp).
func (c *Config) hostPort() (string, int, error) {
	if c.URL == "" {
		return "", 0, errors.New("required: the endpoint's public URL, such as http://127.0.0.1:8080/mcp")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", 0, errors.New("must be an absolute http or https URL, such as http://127.0.0.1:8080/mcp")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", 0, errors.New("must have no credentials, query or fragment")
	}
	if u.Path != "/mcp" {
		return "", 0, fmt.Errorf("must end in /mcp (mesh consumers POST to <host:port>/mcp), got path %q", u.Path)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		if _, err := fmt.Sscan(p, &port); err != nil || port <= 0 || port > 65535 {
			return "", 0, fmt.Errorf("bad port %q", p)
		}
	}
	return u.Hostname(), port, nil
}

// interval is the heartbeat interval in effect (Check took it).
func (c Config) interval() time.Duration {
	d, _ := time.ParseDuration(configblock.Value(&c, "heartbeat_interval"))
	return d
}

// Duty is the name of the fleet-wide duty of sending the config's
// registration (an Elector's): one per registry and agent id.
func (c Config) Duty() string {
	sum := sha256.Sum256([]byte(strings.TrimSuffix(c.Registry, "/")))
	return "mesh:" + hex.EncodeToString(sum[:8]) + ":" + c.AgentID
}
