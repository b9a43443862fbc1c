package opsfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
)

// What a catalog entry may reach.
//
// Whoever may write an operations catalog (the admin API, the console) is
// trusted less than the operator who writes operations files on disk. An
// entry of a catalog never starts a process, and reaches placeholders,
// local files and upstreams only as far as its handler's CatalogAllow
// says: nothing by default. Adapters say which config fields reach what
// with `reach` tags (sdk.Reach, published in the config schema as
// sdk.ReachKeyword); the runtime checks an entry's config against them
// (Operation.CheckReach) before any adapter sees it, and again every tool
// config an expansion derives from it (Operation.DerivedReach). Every path a catalog reaches a host goes through here:
// writes, validation, test runs, the console, rollbacks and a replica
// following a catalog written elsewhere.

// CatalogAllow is what the entries of an operations catalog may reach
// (docs/security.md, "Who can do what"). The zero value allows nothing.
type CatalogAllow struct {
	// Placeholders are the gateway placeholders entries may use, without
	// braces: a name (env.PAYMENTS_KEY, file./run/secrets/payments,
	// system.hostname), a prefix ending in * (env.PAYMENTS_*), or * for
	// every one. A file placeholder must name an absolute, clean path.
	Placeholders []string `json:"placeholders,omitempty"`
	// Upstreams are the addresses entries may connect to: a URL prefix
	// (https://api.example.com/v1/: scheme, host, port and whole path
	// segments), a host with or without a port (api.example.com,
	// 10.0.0.5:8443), every subdomain of one (*.example.com), an address
	// range (10.0.0.0/8), a unix socket (unix:///run/api.sock,
	// unix-abstract:name), or * for any host that is not local. They are
	// checked on the address as written and again on every address
	// dialled, after DNS resolution (package egress): a name, a wildcard
	// or * never reaches a loopback, private, link-local, carrier-grade
	// NAT, unspecified or metadata address; only a rule naming the
	// address itself (an IP, a range, localhost, a socket) does.
	Upstreams []string `json:"upstreams,omitempty"`
	// Files are the directories (absolute) whose files entries may read;
	// an entry's relative paths resolve against the first.
	Files []string `json:"files,omitempty"`

	egressOnce sync.Once
	egress     *egress.Rules
}

// gatewayPlaceholders are the namespaces of the placeholders the gateway
// expands (Caddy's global ones); a catalog entry may use one only when
// allowed. Other brace expressions ({id} in a URL path) are text.
var gatewayPlaceholders = []string{"env.", "file.", "system.", "time."}

// Check reports the first problem of the settings, naming the field.
func (a *CatalogAllow) Check() error {
	for _, p := range a.Placeholders {
		if p == "*" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, "{"), "}")
		if name != p || !slices.ContainsFunc(gatewayPlaceholders, func(ns string) bool { return strings.HasPrefix(p, ns) }) {
			return fmt.Errorf("placeholders: %q is not a placeholder name such as env.API_KEY or env.PAYMENTS_* (no braces; namespaces env, file, system, time)", p)
		}
		if strings.Contains(strings.TrimSuffix(p, "*"), "*") {
			return fmt.Errorf("placeholders: %q: * may only end a name", p)
		}
	}
	for _, u := range a.Upstreams {
		if err := egress.Check(u); err != nil {
			return fmt.Errorf("upstreams: %q: %v", u, err)
		}
	}
	for _, d := range a.Files {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return fmt.Errorf("files: %q must be an absolute, clean directory path", d)
		}
	}
	return nil
}

// Dir is the directory an entry's relative paths resolve against: the
// first allowed one, or else dir.
func (a *CatalogAllow) Dir(dir string) string {
	if len(a.Files) > 0 {
		return a.Files[0]
	}
	return dir
}

// placeholder reports whether an entry may use the placeholder ph
// ("{env.NAME}").
func (a *CatalogAllow) placeholder(ph string) bool {
	name := strings.TrimSuffix(strings.TrimPrefix(ph, "{"), "}")
	if path, ok := strings.CutPrefix(name, "file."); ok && (!filepath.IsAbs(path) || filepath.Clean(path) != path) {
		return false
	}
	for _, p := range a.Placeholders {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// isGatewayPlaceholder reports whether ph ("{env.NAME}") is one the
// gateway expands.
func isGatewayPlaceholder(ph string) bool {
	return slices.ContainsFunc(gatewayPlaceholders, func(ns string) bool { return strings.HasPrefix(ph, "{"+ns) })
}

// expander is expand limited to the placeholders the entries may use:
// any other is left as written (and Parse reports it), so that a refused
// placeholder is never evaluated.
func (a *CatalogAllow) expander(expand func(string) string) func(string) string {
	return func(s string) string {
		return placeholderRE.ReplaceAllStringFunc(s, func(ph string) string {
			if isGatewayPlaceholder(ph) && a.placeholder(ph) {
				return expand(ph)
			}
			return ph
		})
	}
}

// refusedPlaceholder is the first gateway placeholder in s an entry may
// not use, "" when none.
func (a *CatalogAllow) refusedPlaceholder(s string) string {
	for _, ph := range placeholderRE.FindAllString(s, -1) {
		if isGatewayPlaceholder(ph) && !a.placeholder(ph) {
			return ph
		}
	}
	return ""
}

func (a *CatalogAllow) placeholderRule() string {
	if len(a.Placeholders) == 0 {
		return "the handler allows its catalog no placeholders (catalog <name> { placeholders env.NAME … })"
	}
	return "the handler allows its catalog only " + strings.Join(a.Placeholders, ", ")
}

// checkPlaceholders reports, through fail, every string of a config (raw,
// as written) that uses a placeholder the entries may not use.
func (a *CatalogAllow) checkPlaceholders(raw json.RawMessage, fail func(field, format string, args ...any)) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	walkStrings(v, "/config", func(path, s string) {
		if ph := a.refusedPlaceholder(s); ph != "" {
			fail(path, "placeholder %s is not allowed in a catalog entry: %s", ph, a.placeholderRule())
		}
	})
}

func walkStrings(v any, path string, f func(path, s string)) {
	switch t := v.(type) {
	case string:
		f(path, t)
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			walkStrings(t[k], path+"/"+pointer.Key(k), f)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, fmt.Sprintf("%s/%d", path, i), f)
		}
	}
}

// reachProblem is a config field that reaches what a catalog may not.
type reachProblem struct{ field, reason string }

// checkConfig checks an entry's config (placeholders expanded) against
// what its adapter's config schema says each field reaches; dir resolves
// relative paths.
func (a *CatalogAllow) checkConfig(adapter string, cfg, schema json.RawMessage, dir string) []reachProblem {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil || !declaresReach(s) {
		return []reachProblem{{"/adapter", fmt.Sprintf("adapter %q does not say what its config reaches (no %s in its config schema), so catalog entries cannot use it: use it from an operations file", adapter, sdk.ReachKeyword)}}
	}
	var v any
	if json.Unmarshal(cfg, &v) != nil {
		return nil // the adapter reports a config that is not JSON
	}
	var out []reachProblem
	walkReach(v, s, s, "/config", func(r sdk.Reach, v any, path string) { a.value(r, v, path, dir, &out) })
	return out
}

// Upstreams are the addresses a config (placeholders expanded) connects
// to, by what its adapter's config schema says each field reaches: the
// values of its upstream fields, and the http(s) URLs of its location
// fields. They are the upstreams a rate limit's scope matches (an entry's
// target).
func Upstreams(cfg, schema json.RawMessage) []string {
	var s map[string]any
	var v any
	if json.Unmarshal(schema, &s) != nil || json.Unmarshal(cfg, &v) != nil {
		return nil
	}
	var out []string
	var add func(r sdk.Reach, v any)
	add = func(r sdk.Reach, v any) {
		switch t := v.(type) {
		case []any:
			for _, e := range t {
				add(r, e)
			}
		case string:
			if u, err := url.Parse(t); r == sdk.ReachUpstream && t != "" ||
				r == sdk.ReachLocation && err == nil && (u.Scheme == "http" || u.Scheme == "https") {
				out = append(out, t)
			}
		}
	}
	walkReach(v, s, s, "", func(r sdk.Reach, v any, _ string) { add(r, v) })
	return out
}

// declaresReach reports whether a schema states its fields' reach.
func declaresReach(s any) bool {
	switch t := s.(type) {
	case map[string]any:
		if _, ok := t[sdk.ReachKeyword]; ok {
			return true
		}
		for _, e := range t {
			if declaresReach(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(t, declaresReach)
	}
	return false
}

// walkReach calls visit with every value of v whose field's schema (in
// s; root resolves $refs) says what it reaches.
func walkReach(v any, s, root map[string]any, path string, visit func(r sdk.Reach, v any, path string)) {
	if ref, ok := s["$ref"].(string); ok {
		if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
			if defs, ok := root["$defs"].(map[string]any); ok {
				if d, ok := defs[name].(map[string]any); ok {
					s = d
				}
			}
		}
	}
	if r, ok := s[sdk.ReachKeyword].(string); ok && sdk.Reach(r) != sdk.ReachNone {
		visit(sdk.Reach(r), v, path)
	}
	switch t := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		extra, _ := s["additionalProperties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(t)) {
			sub, ok := props[k].(map[string]any)
			if !ok {
				sub = extra
			}
			if sub != nil {
				walkReach(t[k], sub, root, path+"/"+pointer.Key(k), visit)
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range t {
				walkReach(e, items, root, fmt.Sprintf("%s/%d", path, i), visit)
			}
		}
	}
}

// value checks one value of a field that reaches r (a list's items each).
func (a *CatalogAllow) value(r sdk.Reach, v any, path, dir string, out *[]reachProblem) {
	fail := func(format string, args ...any) {
		*out = append(*out, reachProblem{path, fmt.Sprintf(format, args...)})
	}
	switch t := v.(type) {
	case nil:
		return
	case []any:
		for i, e := range t {
			a.value(r, e, fmt.Sprintf("%s/%d", path, i), dir, out)
		}
		return
	case map[string]any:
		if r == sdk.ReachCommand && len(t) > 0 {
			fail("a catalog entry cannot start a process: commands come only from operations files on disk")
		}
		return // an object's members carry their own reach
	case bool:
		if t && r != sdk.ReachUpstream {
			fail("a catalog entry cannot set it: it lets the adapter reach files or addresses of its own choosing; set it in an operations file")
		}
		return
	case string:
		if t == "" {
			return
		}
		switch r {
		case sdk.ReachCommand:
			fail("a catalog entry cannot start a process: commands come only from operations files on disk")
		case sdk.ReachFile:
			if msg := a.file(t, dir); msg != "" {
				fail("%s", msg)
			}
		case sdk.ReachUpstream:
			if msg := a.upstream(t); msg != "" {
				fail("%s", msg)
			}
		case sdk.ReachLocation:
			if u, err := url.Parse(t); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
				if msg := a.upstream(t); msg != "" {
					fail("%s", msg)
				}
			} else if msg := a.file(t, dir); msg != "" {
				fail("%s", msg)
			}
		}
	default:
		if r == sdk.ReachCommand {
			fail("a catalog entry cannot start a process: commands come only from operations files on disk")
		}
	}
}

// file says why an entry may not read path (relative to dir), "" when it
// may.
func (a *CatalogAllow) file(path, dir string) string {
	if len(a.Files) == 0 {
		return "a catalog entry cannot read local files: the handler allows its catalog no directories (catalog <name> { files <dir> })"
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	real, err := filepath.EvalSymlinks(p)
	for _, d := range a.Files {
		if within(p, d) && (err != nil || within(real, evalSymlinks(d))) {
			return ""
		}
	}
	return fmt.Sprintf("%q is outside the directories the handler allows its catalog (%s)", path, strings.Join(a.Files, ", "))
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func evalSymlinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// upstream says why an entry may not connect to addr, "" when it may.
// Messages name the address by scheme, host and port only. What the
// address resolves to is checked again where it is dialled (Egress).
func (a *CatalogAllow) upstream(addr string) string {
	t, err := egress.ParseTarget(addr)
	if err != nil {
		return fmt.Sprintf("not an address a catalog entry may use: %v", err)
	}
	if a.Egress().Target(t) {
		return ""
	}
	rule := "the handler allows its catalog no upstreams (catalog <name> { upstreams https://api.example.com/ … })"
	if len(a.Upstreams) > 0 {
		rule = "the handler allows its catalog only " + strings.Join(a.Upstreams, ", ")
		if t.Local() {
			rule += "; a local address must be listed itself"
		}
	}
	return fmt.Sprintf("upstream %s is not allowed for catalog entries: %s", t, rule)
}

// Egress are the rules the entries' connections are held to where they
// are dialled (sdk.Operation.Egress): the upstreams allowed.
func (a *CatalogAllow) Egress() *egress.Rules {
	a.egressOnce.Do(func() {
		var err error
		if a.egress, err = egress.New(a.Upstreams); err != nil {
			a.egress, _ = egress.New(nil) // Check refuses such rules at load
		}
	})
	return a.egress
}

// Egress are the rules the operation's connections are held to where
// they are dialled: a catalog's entry's upstreams, nil (none) for an
// operations file's entry.
func (op *Operation) Egress() *egress.Rules {
	if op.allow == nil {
		return nil
	}
	return op.allow.Egress()
}

// CheckReach checks a catalog's entry as written (placeholders
// expanded) before its adapter sees it: its config against what the
// adapter's config schema says each field reaches, and its
// upstream_auth's token endpoint. It reports every problem through fail,
// at a pointer within the entry, and whether there was one; an
// operations file's entry may reach anything.
func (op *Operation) CheckReach(schema json.RawMessage, fail func(ptr, reason string)) bool {
	if op.allow == nil {
		return false
	}
	ps := op.allow.checkConfig(op.Adapter, op.Config, schema, op.Dir)
	if ua := op.UpstreamAuth; ua != nil {
		for _, f := range []struct{ field, v string }{{"token_endpoint", ua.TokenEndpoint}, {"metadata_url", ua.MetadataURL},
			{"revocation_endpoint", ua.RevocationEndpoint}} {
			if f.v == "" {
				continue
			}
			if msg := op.allow.upstream(f.v); msg != "" {
				ps = append(ps, reachProblem{"/upstream_auth/" + f.field, msg})
			}
		}
	}
	for _, p := range ps {
		fail(p.field, p.reason)
	}
	return len(ps) > 0
}

// DerivedReach checks a config an adapter derived from a catalog entry (a
// tool's or a publication's, such as an OpenAPI operation's URL) against
// the adapter's config schema: it reaches no further than its entry may.
func (op *Operation) DerivedReach(cfg, schema json.RawMessage) error {
	if op.allow == nil || len(cfg) == 0 {
		return nil
	}
	if ps := op.allow.checkConfig(op.Adapter, cfg, schema, op.Dir); len(ps) > 0 {
		return fmt.Errorf("%s: %s", ps[0].field, ps[0].reason)
	}
	return nil
}
