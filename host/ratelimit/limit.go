package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crankmcp/crank/host/configblock"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
)

// Limit is one rate limit as written in a handler's config (Caddyfile or
// JSON), an operations file or a catalog: the one definition of a limit.
// At most one of tool, family, toolset and upstream is set; none scopes
// the limit to every tool call of the endpoint.
type Limit struct {
	Name string `json:"name" jsonschema:"The limit's name, 1-64 characters of A-Z a-z 0-9 _ . -: refusals, metrics and the console name it, and limits of the same name and definition share one budget (across handlers, reloads and, with fleet, replicas)."`
	Rate string `json:"rate" jsonschema:"Calls allowed per period: <n>/s, <n>/m, <n>/h or <n>/<duration> (10/m, 100/s, 5/30s); n up to 1000000, the period 1ms to 24h."`
	// Burst is the bucket's size.
	Burst int    `json:"burst,omitempty" minimum:"1" maximum:"1000000" jsonschema:"Calls allowed at once after a quiet spell (the bucket's size); default the rate's n."`
	Per   string `json:"per,omitempty" enum:"workspace,user,agent,client,address" jsonschema:"Whose calls share a bucket: each workspace's, user's (a bearer token's subject, or the user an authentication handler before crank verified), agent's, client's (its user, else its agent header, else its address) or client address's; left out, every caller shares one."`
	Tool  string `json:"tool,omitempty" jsonschema:"Limits the calls of this tool: its name as the host serves it (before a view renames it), or a glob such as refund_* (path.Match)."`
	// Family limits every tool of a family.
	Family   string `json:"family,omitempty" jsonschema:"Limits the calls of every tool of this session or async_job family (start, poll, stop, status, result, cancel): the family's operation name."`
	Toolset  string `json:"toolset,omitempty" jsonschema:"Limits the calls of the tools of this toolset of the endpoint's view."`
	Upstream string `json:"upstream,omitempty" jsonschema:"Limits the calls of every tool whose entry reaches this upstream: an address rule as catalog_allow's upstreams write them (api.example.com, *.example.com, https://api.example.com/v1/, 10.0.0.0/8)."`
	Fleet    bool   `json:"fleet,omitempty" jsonschema:"The rate holds across every replica of the fleet that enforces the limit (each enforces its share, from the live replicas in etcd), instead of on each replica."`
	// Namespace, when set, is who declared the limit beyond the handler's
	// config: "catalog <name>" for a catalog's. It is part of the limit's
	// ID, so that a catalog's limit never spends the budget of the
	// handler's, or another catalog's, of the same name and definition.
	// Not written in configs: the loader sets it.
	Namespace string `json:"-"`
}

// Field is one field of Limit, as a Caddyfile subdirective.
type Field = configblock.Field

// Fields lists Limit's fields in declaration order (the Caddyfile's
// subdirectives of a rate_limit block).
func Fields() []Field { return configblock.Fields[Limit]() }

// Set sets the field named name to vs, as a Caddyfile subdirective
// writes it: the error names an unknown field or a wrong value.
func (l *Limit) Set(name string, vs []string) error { return configblock.Set(l, name, vs) }

// Scopes of a limit (the scope label of crank_rate_limited_total): what
// it limits.
const (
	ScopeEndpoint = "endpoint"
	ScopeTool     = "tool"
	ScopeFamily   = "family"
	ScopeToolset  = "toolset"
	ScopeUpstream = "upstream"
	// ScopeRequests is the built-in limit of requests without a session
	// (max_sessionless_requests_per_client): HTTP requests, not calls.
	ScopeRequests = "requests"
)

// Keys: who shares a bucket (Limit.Per).
const (
	PerWorkspace = "workspace"
	PerUser      = "user"
	PerAgent     = "agent"
	PerClient    = "client"
	PerAddress   = "address"
)

// Bounds of a limit.
const (
	maxCount  = 1_000_000
	minPeriod = time.Millisecond
	maxPeriod = 24 * time.Hour
)

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	scopeNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// schemaKeywords state what Limit's types and tags cannot.
var schemaKeywords = map[string]string{
	"":     `{"description": "A rate limit: a token bucket of a rate and a burst per key, on some or all of the endpoint's tool calls."}`,
	"name": `{"pattern": "^[A-Za-z0-9_.-]{1,64}$"}`,
	"rate": `{"pattern": "^[0-9]+(\\.[0-9]+)?/([smh]|[0-9.]+(ns|us|µs|ms|s|m|h))$"}`,
}

var schema = sync.OnceValues(func() (json.RawMessage, error) {
	return sdk.SchemaFor[Limit]("Rate limit", schemaKeywords)
})

// Schema is the JSON Schema (2020-12) of a limit, derived from Limit's
// tags: what the admin API publishes (GET /crank/schema/rate_limit), the
// console's form is built from and the reference in docs/reference/rate-limit.md is
// generated from.
func Schema() json.RawMessage {
	s, err := schema()
	if err != nil {
		panic("ratelimit: the limit's schema: " + err.Error()) // Limit's tags are wrong; a test sees it
	}
	return s
}

// Decode decodes one limit written as JSON with its tags' decoding:
// every unknown field, wrong type and value out of its tags' bounds, and
// Check's problems of the other fields.
func Decode(raw json.RawMessage) (Limit, []Problem) {
	var l Limit
	_, diags := sdk.Decode(raw, &l)
	var out []Problem
	seen := map[string]bool{}
	for _, d := range diags {
		out = append(out, Problem{Field: d.Field, Message: d.Message})
		seen[d.Field] = true
	}
	for _, p := range l.Check() {
		if !seen[p.Field] {
			out = append(out, p)
		}
	}
	return l, out
}

// Problem is what is wrong with one field of a limit.
type Problem struct {
	Field   string // its JSON name (a dotted path for a nested one)
	Message string
}

func (p Problem) Error() string { return p.Field + ": " + p.Message }

// Rate is a parsed rate: Count calls per Period.
type Rate struct {
	Count  float64
	Period time.Duration
}

// PerSecond is the rate in calls a second.
func (r Rate) PerSecond() float64 { return r.Count / r.Period.Seconds() }

// String is the rate as a person reads it: "10 calls a minute".
func (r Rate) String() string {
	n := strconv.FormatFloat(r.Count, 'f', -1, 64)
	calls := "calls"
	if r.Count == 1 {
		calls = "call"
	}
	switch r.Period {
	case time.Second:
		return n + " " + calls + " a second"
	case time.Minute:
		return n + " " + calls + " a minute"
	case time.Hour:
		return n + " " + calls + " an hour"
	}
	return n + " " + calls + " every " + r.Period.String()
}

// ParseRate reads a rate as written: <n>/s, <n>/m, <n>/h or
// <n>/<Go duration>.
func ParseRate(s string) (Rate, error) {
	n, p, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("must be <n>/<period>, such as 10/m, 100/s or 5/30s, got %q", truncate(s))
	}
	count, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsNaN(count) || count <= 0 || count > maxCount {
		return Rate{}, fmt.Errorf("the count must be a number over 0 and at most %d, got %q", maxCount, truncate(n))
	}
	var period time.Duration
	switch p {
	case "s":
		period = time.Second
	case "m":
		period = time.Minute
	case "h":
		period = time.Hour
	default:
		if period, err = time.ParseDuration(p); err != nil {
			return Rate{}, fmt.Errorf("the period must be s, m, h or a duration such as 30s, got %q", truncate(p))
		}
	}
	if period < minPeriod || period > maxPeriod {
		return Rate{}, fmt.Errorf("the period must be from %s to %s, got %s", minPeriod, maxPeriod, period)
	}
	return Rate{Count: count, Period: period}, nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return strings.ToValidUTF8(s[:32], "") + "..."
	}
	return s
}

// Check reports every problem of the limit, each naming its field; nil
// when it has none.
func (l *Limit) Check() []Problem {
	var out []Problem
	bad := func(field, format string, args ...any) {
		out = append(out, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !nameRE.MatchString(l.Name) {
		if l.Name == "" {
			bad("name", "is required: 1-64 characters of A-Z a-z 0-9 _ . -")
		} else {
			bad("name", "must be 1-64 characters of A-Z a-z 0-9 _ . - (got %q)", truncate(l.Name))
		}
	}
	if l.Rate == "" {
		bad("rate", "is required: <n>/<period>, such as 10/m or 100/s")
	} else if _, err := ParseRate(l.Rate); err != nil {
		bad("rate", "%v", err)
	}
	if l.Burst < 0 || l.Burst > maxCount {
		bad("burst", "must be from 1 to %d, got %d", maxCount, l.Burst)
	}
	switch l.Per {
	case "", PerWorkspace, PerUser, PerAgent, PerClient, PerAddress:
	default:
		bad("per", "must be one of workspace, user, agent, client, address (got %q)", truncate(l.Per))
	}
	var set []string
	for _, f := range [][2]string{{"tool", l.Tool}, {"family", l.Family}, {"toolset", l.Toolset}, {"upstream", l.Upstream}} {
		if f[1] != "" {
			set = append(set, f[0])
		}
	}
	if len(set) > 1 {
		bad(set[1], "a limit has one scope: it sets %s already (write one limit per scope; all that apply to a call must pass)", set[0])
	}
	if l.Tool != "" {
		if _, err := path.Match(l.Tool, ""); err != nil || len(l.Tool) > 128 {
			bad("tool", "must be a tool name or a glob such as refund_* of at most 128 characters")
		}
	}
	for _, f := range [][2]string{{"family", l.Family}, {"toolset", l.Toolset}} {
		if f[1] != "" && !scopeNameRE.MatchString(f[1]) {
			bad(f[0], "must be a name of 1-128 characters of A-Z a-z 0-9 _ . - (got %q)", truncate(f[1]))
		}
	}
	if l.Upstream != "" {
		if err := egress.Check(l.Upstream); err != nil {
			bad("upstream", "%v", err)
		}
	}
	return out
}

// Err is Check's problems as one error, nil when none; prefix names the
// limit's place ("rate_limits[0]").
func (l *Limit) Err(prefix string) error {
	ps := l.Check()
	if len(ps) == 0 {
		return nil
	}
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s.%s: %s", prefix, p.Field, p.Message)
	}
	return fmt.Errorf("%s", b.String())
}

// Scope is what the limit limits: ScopeEndpoint, ScopeTool, ScopeFamily,
// ScopeToolset or ScopeUpstream.
func (l *Limit) Scope() string {
	switch {
	case l.Tool != "":
		return ScopeTool
	case l.Family != "":
		return ScopeFamily
	case l.Toolset != "":
		return ScopeToolset
	case l.Upstream != "":
		return ScopeUpstream
	}
	return ScopeEndpoint
}

// rate is the limit's checked rate; burst its bucket's size.
func (l *Limit) rate() (Rate, float64) {
	r, err := ParseRate(l.Rate)
	if err != nil {
		r = Rate{Count: 1, Period: time.Second} // Check refuses it first
	}
	burst := float64(l.Burst)
	if burst <= 0 {
		burst = max(1, math.Ceil(r.Count))
	}
	return r, burst
}

// ID identifies the limit's budget: its name and definition. Limits of
// the same ID share one budget; a fleet-wide limit's replicas find each
// other by it.
func (l *Limit) ID() string {
	r, burst := l.rate()
	b, _ := json.Marshal([]any{l.Name, r.Count, r.Period, burst, l.Per, l.Tool, l.Family, l.Toolset, l.Upstream, l.Fleet, l.Namespace})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Describe says what the limit allows, for a refusal: "10 calls a minute
// per user, for tool create_refund, across the fleet".
func (l *Limit) Describe() string {
	r, _ := l.rate()
	s := r.String()
	if l.Per != "" {
		s += " per " + l.Per
	}
	switch l.Scope() {
	case ScopeTool:
		s += ", for tool " + l.Tool
	case ScopeFamily:
		s += ", for the tools of family " + l.Family
	case ScopeToolset:
		s += ", for the tools of toolset " + l.Toolset
	case ScopeUpstream:
		s += ", for the tools of upstream " + l.Upstream
	}
	if l.Fleet {
		s += ", across the fleet"
	} else {
		s += ", on each replica"
	}
	return s
}

// Tool is what a limit's scope matches a tool by.
type Tool struct {
	// Name is the tool's name as the host serves it.
	Name string
	// Family is the operation name of the family the tool belongs to, ""
	// for a tool of none.
	Family string
	// InToolset reports whether the endpoint's view puts the tool in a
	// toolset; nil for an endpoint without a view.
	InToolset func(toolset string) bool
	// Upstreams are the addresses the tool's entry reaches, as written.
	Upstreams []string
}

// Applies reports whether the limit limits the calls of t.
func (l *Limit) Applies(t Tool) bool {
	switch l.Scope() {
	case ScopeTool:
		ok, _ := path.Match(l.Tool, t.Name)
		return ok
	case ScopeFamily:
		return t.Family != "" && t.Family == l.Family
	case ScopeToolset:
		return t.InToolset != nil && t.InToolset(l.Toolset)
	case ScopeUpstream:
		rules, err := egress.New([]string{l.Upstream})
		if err != nil {
			return false
		}
		for _, u := range t.Upstreams {
			if tg, err := egress.ParseTarget(u); err == nil && rules.Target(tg) {
				return true
			}
		}
		return false
	}
	return true
}

// Caller is who calls, as the keys of limits read it.
type Caller struct {
	Workspace string
	// User is the verified user ("" for none), Agent the agent the call
	// runs as, Client the client (ClientOf), Address the client's address.
	User, Agent, Client, Address string
}

// ClientOf is the client of a caller: its user ("user:<id>"), else its
// agent header ("header:<value>"), else its address ("addr:<address>").
// agent is the caller's agent when it names the caller by its user or
// agent header (the prefixes say), "" or a session agent otherwise.
func ClientOf(agent, address string) string {
	if strings.HasPrefix(agent, "user:") || strings.HasPrefix(agent, "header:") {
		return agent
	}
	return "addr:" + address
}

// key is the bucket key of c under the limit.
func (l *Limit) key(c *Caller) string {
	switch l.Per {
	case PerWorkspace:
		return c.Workspace
	case PerUser:
		return c.User
	case PerAgent:
		return c.Agent
	case PerClient:
		return c.Client
	case PerAddress:
		return c.Address
	}
	return ""
}
