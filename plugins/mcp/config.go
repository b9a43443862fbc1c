package mcp

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// config is an operation's config.
type config struct {
	URL     string            `reach:"upstream" json:"url,omitempty" jsonschema:"The upstream's Streamable HTTP endpoint, e.g. http://tools:3001/mcp. Either url or command."`
	Headers json.RawMessage   `json:"headers,omitempty" jsonschema:"HTTP headers sent to a url upstream {Header-Name: value}; values may use placeholders, e.g. Bearer {env.TOKEN}."`
	TLS     *sdk.ClientTLS    `json:"tls,omitempty" jsonschema:"TLS settings of an https url upstream."`
	Command string            `reach:"command" json:"command,omitempty" jsonschema:"A server to start and speak to over stdio: a path with a slash is relative to the operations file, a bare name is found on PATH. Either url or command."`
	Args    []string          `reach:"command" json:"args,omitempty" jsonschema:"Arguments of command."`
	Env     map[string]string `reach:"command" json:"env,omitempty" jsonschema:"Environment variables of command, besides PATH, HOME, TMPDIR, TZ and the locale; taken literally."`
	Prefix  string            `json:"prefix,omitempty" jsonschema:"Put before the name of every tool of the upstream, e.g. files_."`
	Include []string          `json:"include,omitempty" jsonschema:"Glob patterns of the upstream tool names to serve; all when absent."`
	Exclude []string          `json:"exclude,omitempty" jsonschema:"Glob patterns of the upstream tool names not to serve; wins over include."`
	Rename  map[string]string `json:"rename,omitempty" jsonschema:"Upstream tool name to the name Crank serves it under (before prefix)."`
	Tool    string            `json:"tool,omitempty" jsonschema:"One upstream tool: the entry stands for it alone, under the entry's name."`
	Task    bool              `json:"task,omitempty" jsonschema:"Call the upstream tools as MCP Tasks (a task-augmented tools/call, then tasks/get until it ends, then tasks/result; tasks/cancel when the call is cancelled). Each tool must support tasks (execution.taskSupport optional or required) on an upstream with the tasks capability for tools/call. Set by itself for the tools whose taskSupport is required."`
	// Resources, Prompts and Prompt: publish.go.
	Resources bool   `json:"resources,omitempty" jsonschema:"Also serve the upstream's resources and resource templates, under their own URIs; names get prefix."`
	Prompts   bool   `json:"prompts,omitempty" jsonschema:"Also serve the upstream's prompts, named with prefix."`
	Prompt    string `json:"prompt,omitempty" jsonschema:"One upstream prompt, by its upstream name: set by the adapter in the config of each prompt it publishes, not in an entry."`
	// MaxMessageBytes bounds one message from the upstream; at most 48 MiB,
	// so that a result fits in one message of the adapter protocol (64
	// MiB) with room to spare.
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty" default:"8388608" zero:"default" minimum:"0" maximum:"50331648" jsonschema:"Largest message accepted from the upstream (a tool result, a progress notification), in bytes; 0 means the default, 8 MiB. A larger one fails the call."`
}

// upstream is a prepared config: how to reach the server and which of its
// tools to serve.
type upstream struct {
	// key identifies the connection (a hash of its fields): calls with
	// the same key share one upstream session.
	key string
	// label names the upstream in errors: "mcp host:port" or "mcp stdio
	// <command base name>".
	label string

	url     string
	headers http.Header
	tls     *tls.Config
	// egress are the rules the url's connections are held to.
	egress *egress.Rules

	command string
	args    []string
	env     []string

	prefix           string
	include, exclude []string
	rename           map[string]string
	tool             string
	// task: the upstream tool is called as an MCP Task (tasks.go).
	task bool
	// resources and prompts: what the entry publishes; prompt: the
	// upstream prompt a published prompt's config names (publish.go).
	resources, prompts bool
	prompt             string
	// maxMessage bounds one message from the upstream.
	maxMessage int64
	// connFields is the config without the tool selection and what the
	// entry publishes, for the configs of derived tools, resources and
	// prompts.
	connFields map[string]json.RawMessage
}

// managedHeaders are set by the MCP transport itself.
var managedHeaders = []string{"Mcp-Session-Id", "Mcp-Protocol-Version", "Content-Type", "Accept", "Last-Event-Id"}

func prepare(op *sdk.Operation, c *config, d *sdk.Diagnostics) *upstream {
	u := &upstream{egress: op.Egress, prefix: c.Prefix, include: c.Include, exclude: c.Exclude, rename: c.Rename, tool: c.Tool,
		task: c.Task, resources: c.Resources, prompts: c.Prompts, prompt: c.Prompt, maxMessage: c.MaxMessageBytes}
	switch {
	case c.URL == "" && c.Command == "":
		d.Errorf("url", "is required: the upstream's Streamable HTTP endpoint (or command, for a server over stdio)")
	case c.URL != "" && c.Command != "":
		d.Errorf("command", "cannot be set with url: an upstream is either a url or a command")
	case c.URL != "":
		pu, err := url.Parse(c.URL)
		if err != nil || pu.Scheme != "http" && pu.Scheme != "https" || pu.Host == "" {
			d.Errorf("url", "must be an http:// or https:// URL")
			break
		}
		u.url, u.label = c.URL, "mcp "+pu.Host
		if len(c.Headers) > 0 {
			h, host, diags := httpadapter.StaticHeaders(c.Headers, managedHeaders...)
			d.Add(diags...)
			if host != "" {
				d.Errorf("headers.Host", "cannot be set: the url names the host")
			}
			u.headers = h
		}
		if c.TLS != nil {
			if pu.Scheme != "https" {
				d.Errorf("tls", "needs an https:// url")
			}
			u.tls, _ = c.TLS.Load(op, "tls", d)
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"args", len(c.Args) > 0}, {"env", len(c.Env) > 0}} {
			if f.set {
				d.Errorf(f.name, "is for a command upstream, not a url")
			}
		}
	default:
		u.command = c.Command
		if strings.ContainsRune(c.Command, '/') {
			u.command = op.ResolvePath(c.Command)
		}
		u.label = "mcp stdio " + filepath.Base(c.Command)
		u.args = c.Args
		u.env = childEnv(c.Env)
		for k := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				d.Errorf("env", "has an invalid variable name")
			}
		}
		if len(c.Headers) > 0 {
			d.Errorf("headers", "is for a url upstream, not a command")
		}
		if c.TLS != nil {
			d.Errorf("tls", "is for a url upstream, not a command")
		}
	}
	for i, p := range c.Include {
		if _, err := path.Match(p, ""); err != nil {
			d.Errorf("include["+itoa(i)+"]", "is not a valid glob pattern")
		}
	}
	for i, p := range c.Exclude {
		if _, err := path.Match(p, ""); err != nil {
			d.Errorf("exclude["+itoa(i)+"]", "is not a valid glob pattern")
		}
	}
	for from, to := range c.Rename {
		if to == "" {
			d.KeyErrorf("rename", from, "must name the tool")
		}
	}
	if c.Tool != "" && (c.Prefix != "" || len(c.Include) > 0 || len(c.Exclude) > 0 || len(c.Rename) > 0) {
		d.Errorf("tool", "selects one tool under the entry's name: prefix, include, exclude and rename do not apply")
	}
	checkPublishing(c, d) // publish.go
	u.key = connKey(c, op.Egress)
	var all map[string]json.RawMessage
	if json.Unmarshal(op.Config, &all) == nil {
		for _, k := range []string{"prefix", "include", "exclude", "rename", "tool", "task", "resources", "prompts", "prompt"} {
			delete(all, k)
		}
		u.connFields = all
	}
	return u
}

// connKey hashes the fields that make a connection, and the egress rules
// it is held to (an entry's connection is never another's under other
// rules).
func connKey(c *config, rs *egress.Rules) string {
	fields := []any{c.URL, c.Headers, c.TLS, c.Command, c.Args, c.Env, c.MaxMessageBytes}
	if rs != nil {
		fields = append(fields, rs.List())
	}
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// childEnv is the environment of a command upstream: the few variables a
// process needs to run, plus the configured ones.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, kv := range baseEnv() {
		if _, over := extra[strings.SplitN(kv, "=", 2)[0]]; !over {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

var keptEnv = []string{"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LANGUAGE"}

func baseEnv() []string {
	var env []string
	for _, kv := range osEnviron() {
		name := strings.SplitN(kv, "=", 2)[0]
		if slices.Contains(keptEnv, name) || strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

// selects reports whether the upstream tool name is served.
func (u *upstream) selects(name string) bool {
	if u.tool != "" {
		return name == u.tool
	}
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	if len(u.include) > 0 && !match(u.include) {
		return false
	}
	return !match(u.exclude)
}

// crankName is the name Crank serves the upstream tool under.
func (u *upstream) crankName(name string) string {
	if r, ok := u.rename[name]; ok {
		name = r
	}
	return u.prefix + name
}

// toolConfig is the config of a derived tool: the connection fields, the
// upstream tool's name and whether it is called as a task.
func (u *upstream) toolConfig(name string, task bool) (json.RawMessage, error) {
	extra := map[string]json.RawMessage{}
	if task {
		extra["task"] = json.RawMessage("true")
	}
	return u.derivedConfig("tool", name, extra)
}

// derivedConfig is the connection fields, plus field set to name unless
// field is "", plus extra.
func (u *upstream) derivedConfig(field, name string, extra map[string]json.RawMessage) (json.RawMessage, error) {
	m := make(map[string]json.RawMessage, len(u.connFields)+1+len(extra))
	for k, v := range u.connFields {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	if field != "" {
		n, _ := json.Marshal(name)
		m[field] = n
	}
	return json.Marshal(m)
}

// connField is the config field that names the upstream: url or command.
func (u *upstream) connField() string {
	if u.command != "" {
		return "command"
	}
	return "url"
}
