package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
)

// A view curates what an endpoint publishes of its host's tools (a
// "virtual server"): which tools (include/exclude selectors), under which
// names, titles, descriptions and annotations, grouped in named toolsets,
// and whether it offers the discovery meta-tools (discovery.go). Several
// endpoints over the same operations serve different views.
//
// The view is a translation at the edge of the endpoint, a receiving
// middleware outside the policy one: tools/list leaves out what the view
// hides and publishes the rest as the view says; a tools/call of a
// published name is handed on under the host's name, so the policy,
// tasks and the host see the operation itself (a policy is written
// against the operations' own names and annotations, whatever the view
// renames or overrides). A tool the view hides is unknown to its
// clients. A family (session, async_job) is selected as a unit, by its
// operation's name or any of its tools' names, and renaming its operation
// renames its tools {new name}_{role}.

// ViewConfig is the view of an endpoint, as configured.
type ViewConfig struct {
	// Toolsets are named groups of tools, each a list of selectors (a
	// name glob, annotation:<hint>, mode:<mode>). They are the tags of
	// the view: include and exclude select them with toolset:<name>, and
	// the search meta-tool filters on them.
	Toolsets map[string][]string `json:"toolsets,omitempty"`
	// Include, when set, publishes only the tools matching one of its
	// selectors; Exclude leaves out the tools matching one of its own.
	// A selector is a name glob (path.Match syntax: get_*, *_user),
	// toolset:<name>, annotation:<hint> or annotation:!<hint> (hints
	// read_only, destructive, idempotent, open_world, with MCP's
	// defaults for unset ones) or mode:<unary|window|session|async_job>.
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// Tools override what the view publishes of a tool, by the host's
	// tool name (or a family's operation name, which renames all of its
	// tools).
	Tools map[string]ToolOverride `json:"tools,omitempty"`
	// Discovery is "off" (the default), "beside" (the meta-tools
	// search_tools, describe_tool and call_tool beside the tools) or
	// "only" (tools/list lists the meta-tools alone).
	Discovery string `json:"discovery,omitempty"`
}

// ToolOverride is what a view changes of one tool.
type ToolOverride struct {
	Name        string               `json:"name,omitempty"`
	Title       string               `json:"title,omitempty"`
	Description string               `json:"description,omitempty"`
	Annotations *opsfile.Annotations `json:"annotations,omitempty"`
}

// Discovery modes.
const (
	DiscoveryOff    = "off"
	DiscoveryBeside = "beside"
	DiscoveryOnly   = "only"
)

var viewToolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// view is a checked ViewConfig; state caches its resolution against the
// active host.
type view struct {
	cfg       ViewConfig
	include   []selector
	exclude   []selector
	toolsets  map[string][]selector
	discovery string
	meta      []*mcp.Tool // the discovery meta-tools, when on

	mu    sync.Mutex
	state *viewState
}

// selector matches a family or tool of the host.
type selector struct {
	kind, arg string // glob, toolset, annotation, mode
	not       bool
}

// compileView checks a view config; the error names the field.
func compileView(cfg *ViewConfig) (*view, error) {
	if cfg == nil {
		return nil, nil
	}
	v := &view{cfg: *cfg, toolsets: map[string][]selector{}}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("view.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, name := range sortedKeys(cfg.Toolsets) {
		if !viewToolNameRE.MatchString(name) {
			fail("toolsets", "toolset name %q must be 1-128 characters of A-Z a-z 0-9 _ . -", name)
		}
		if len(cfg.Toolsets[name]) == 0 {
			fail("toolsets."+name, "empty: list the selectors of its tools")
		}
		for i, s := range cfg.Toolsets[name] {
			sel, err := parseSelector(s, nil)
			if err == nil && sel.kind == "toolset" {
				err = errors.New("a toolset is made of name globs, annotation: and mode: selectors, not other toolsets")
			}
			if err != nil {
				fail(fmt.Sprintf("toolsets.%s[%d]", name, i), "%v", err)
				continue
			}
			v.toolsets[name] = append(v.toolsets[name], sel)
		}
	}
	for _, list := range []struct {
		field string
		in    []string
		out   *[]selector
	}{{"include", cfg.Include, &v.include}, {"exclude", cfg.Exclude, &v.exclude}} {
		for i, s := range list.in {
			sel, err := parseSelector(s, cfg.Toolsets)
			if err != nil {
				fail(fmt.Sprintf("%s[%d]", list.field, i), "%v", err)
				continue
			}
			*list.out = append(*list.out, sel)
		}
	}
	renamed := map[string]string{}
	for _, key := range sortedKeys(cfg.Tools) {
		o := cfg.Tools[key]
		if o.Name != "" && !viewToolNameRE.MatchString(o.Name) {
			fail("tools."+key+".name", "must be 1-128 characters of A-Z a-z 0-9 _ . - (got %q)", o.Name)
		}
		if o.Name != "" {
			if other, dup := renamed[o.Name]; dup {
				fail("tools."+key+".name", "%q is also the new name of tool %q", o.Name, other)
			}
			renamed[o.Name] = key
		}
		if o == (ToolOverride{}) {
			fail("tools."+key, "empty: set name, title, description or annotations")
		}
	}
	switch cfg.Discovery {
	case "", DiscoveryOff:
		v.discovery = DiscoveryOff
	case DiscoveryBeside, DiscoveryOnly:
		v.discovery = cfg.Discovery
		v.meta = metaTools()
		for _, m := range metaToolNames {
			if key, ok := renamed[m]; ok {
				fail("tools."+key+".name", "%q is the name of a discovery meta-tool", m)
			}
		}
	default:
		fail("discovery", "unknown mode %q (one of off, beside, only)", cfg.Discovery)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return v, nil
}

var annotationHints = []string{"read_only", "destructive", "idempotent", "open_world"}

// parseSelector parses one include, exclude or toolset selector;
// toolsets are the names a toolset: selector may use.
func parseSelector(s string, toolsets map[string][]string) (selector, error) {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		if s == "" {
			return selector{}, errors.New("empty selector")
		}
		if _, err := path.Match(s, ""); err != nil {
			return selector{}, fmt.Errorf("bad name glob %q: %v", s, err)
		}
		return selector{kind: "glob", arg: s}, nil
	}
	sel := selector{kind: kind, arg: arg}
	switch kind {
	case "toolset":
		if _, ok := toolsets[arg]; !ok {
			return sel, fmt.Errorf("unknown toolset %q (toolsets: %s)", arg, strings.Join(sortedKeys(toolsets), ", "))
		}
	case "annotation":
		sel.arg, sel.not = strings.CutPrefix(arg, "!")
		if !slices.Contains(annotationHints, sel.arg) {
			return sel, fmt.Errorf("unknown annotation %q (one of %s, optionally negated with !)", arg, strings.Join(annotationHints, ", "))
		}
	case "mode":
		switch opsfile.Mode(arg) {
		case opsfile.ModeUnary, opsfile.ModeWindow, opsfile.ModeSession, opsfile.ModeAsyncJob:
		default:
			return sel, fmt.Errorf("unknown mode %q (one of unary, window, session, async_job)", arg)
		}
	default:
		return sel, fmt.Errorf("unknown selector %q (a name glob, toolset:<name>, annotation:<hint> or mode:<mode>)", s)
	}
	return sel, nil
}

// viewState is a view resolved against one host.
type viewState struct {
	h           *host.Host
	tools       []*viewTool // in the host's order
	byPublished map[string]*viewTool
	byHost      map[string]*viewTool
	// renames map the host's names of a family's tools to their
	// published ones, for the families the view renames.
	renames map[*opsfile.Operation]map[string]string
	err     error
	// docs are the search documents of the tools (discovery.go).
	docsOnce sync.Once
	docs     map[*viewTool]*searchDoc
}

// nameRunRE matches the runs of text a tool name can be.
var nameRunRE = regexp.MustCompile(`[A-Za-z0-9_.-]+`)

// renameRefs replaces the whole tool names of m in s (a trailing . or -
// ends a sentence, not a name).
func renameRefs(s string, m map[string]string) string {
	return nameRunRE.ReplaceAllStringFunc(s, func(w string) string {
		name := strings.TrimRight(w, ".-")
		if n, ok := m[name]; ok {
			return n + w[len(name):]
		}
		return w
	})
}

// renameResult rewrites the tool names in the result of a call of vt's
// family (a start result names the status, poll, stop… tools).
func (st *viewState) renameResult(vt *viewTool, res *mcp.CallToolResult) {
	m := st.renames[vt.op]
	if m == nil || res == nil {
		return
	}
	for i, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			res.Content[i] = &mcp.TextContent{Text: renameRefs(tc.Text, m), Meta: tc.Meta, Annotations: tc.Annotations}
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			res.StructuredContent = json.RawMessage(renameRefs(string(b), m))
		}
	}
}

// viewTool is one published tool.
type viewTool struct {
	name, hostName string
	role           string             // in its family; "" for a unary or window tool
	tool           *mcp.Tool          // as published
	served         host.Tool          // the host's tool, which its calls call
	op             *opsfile.Operation // the operation (a family's, for its tools)
	toolsets       []string
}

// unit is an operation of the host with the tools it is published as.
type unit struct {
	op    *opsfile.Operation
	tools []host.Tool
}

// resolve is the view of h, cached for the latest host.
func (v *view) resolve(h *host.Host) *viewState {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.state != nil && v.state.h == h {
		return v.state
	}
	v.state = v.build(h)
	return v.state
}

func (v *view) build(h *host.Host) *viewState {
	st := &viewState{h: h, byPublished: map[string]*viewTool{}, byHost: map[string]*viewTool{}}
	var units []*unit
	byOp := map[*opsfile.Operation]*unit{}
	names := map[string]bool{}
	for _, o := range h.Operations() {
		t := h.Tool(o.Name)
		op := t.Base()
		if op == nil {
			continue
		}
		names[o.Name] = true
		names[op.Name] = true
		u := byOp[op]
		if u == nil {
			u = &unit{op: op}
			byOp[op] = u
			units = append(units, u)
		}
		u.tools = append(u.tools, t)
	}
	var errs []error
	for _, key := range sortedKeys(v.cfg.Tools) {
		if !names[key] {
			errs = append(errs, fmt.Errorf("view.tools.%s: the endpoint has no tool or operation of this name", key))
		}
	}
	for _, u := range units {
		ann := v.effectiveAnnotations(u.op)
		var sets []string
		for _, name := range sortedKeys(v.toolsets) {
			if slices.ContainsFunc(v.toolsets[name], func(s selector) bool { return matches(s, u, ann, nil) }) {
				sets = append(sets, name)
			}
		}
		match := func(s selector) bool { return matches(s, u, ann, sets) }
		if len(v.include) > 0 && !slices.ContainsFunc(v.include, match) || slices.ContainsFunc(v.exclude, match) {
			continue
		}
		for _, t := range u.tools {
			vt := v.publish(u, t, ann, sets)
			if other, dup := st.byPublished[vt.name]; dup {
				errs = append(errs, fmt.Errorf("view: tools %q and %q are both published as %q (rename one in view.tools)",
					other.hostName, vt.hostName, vt.name))
				continue
			}
			if v.discovery != DiscoveryOff && slices.Contains(metaToolNames, vt.name) {
				errs = append(errs, fmt.Errorf("view: tool %q is published as %q, the name of a discovery meta-tool (rename it in view.tools)",
					vt.hostName, vt.name))
				continue
			}
			st.tools = append(st.tools, vt)
			st.byPublished[vt.name] = vt
			st.byHost[vt.hostName] = vt
		}
	}
	// A family's tools name each other (descriptions, the id argument,
	// start results): by their published names.
	st.renames = map[*opsfile.Operation]map[string]string{}
	for _, vt := range st.tools {
		if vt.role != "" && vt.name != vt.hostName {
			if st.renames[vt.op] == nil {
				st.renames[vt.op] = map[string]string{}
			}
			st.renames[vt.op][vt.hostName] = vt.name
		}
	}
	for _, vt := range st.tools {
		if m := st.renames[vt.op]; m != nil {
			vt.tool.Description = renameRefs(vt.tool.Description, m)
			for _, sch := range []*any{&vt.tool.InputSchema, &vt.tool.OutputSchema} {
				if raw, ok := (*sch).(json.RawMessage); ok {
					*sch = json.RawMessage(renameRefs(string(raw), m))
				}
			}
		}
		if vt.op.Family == nil || vt.tool.Meta == nil {
			continue
		}
		ex, _ := vt.tool.Meta["io.crank/execution"].(map[string]any)
		if ex == nil {
			continue
		}
		clone := make(map[string]any, len(ex))
		for k, x := range ex {
			clone[k] = x
		}
		ex = clone
		ex["tools"] = st.familyNames(vt.op)
		vt.tool.Meta = mcp.Meta{"io.crank/execution": ex}
	}
	st.err = errors.Join(errs...)
	return st
}

// familyNames maps each role of a family to its published tool name.
func (st *viewState) familyNames(op *opsfile.Operation) map[string]string {
	out := map[string]string{}
	for role, name := range op.Family.Names {
		if vt := st.byHost[name]; vt != nil {
			out[role] = vt.name
		}
	}
	return out
}

// effectiveAnnotations are an operation's hints with the view's override
// and MCP's defaults (destructive and open world unless said otherwise).
func (v *view) effectiveAnnotations(op *opsfile.Operation) opsfile.Annotations {
	a := defaultAnnotations(op)
	if o := v.cfg.Tools[op.Name].Annotations; o != nil {
		overlayAnnotations(&a, o)
	}
	return a
}

// defaultAnnotations are an operation's hints, MCP's defaults filled in.
func defaultAnnotations(op *opsfile.Operation) opsfile.Annotations {
	pt := policyTool(op).Annotations
	return opsfile.Annotations{ReadOnly: &pt.ReadOnly, Destructive: &pt.Destructive, Idempotent: &pt.Idempotent, OpenWorld: &pt.OpenWorld}
}

func overlayAnnotations(dst, o *opsfile.Annotations) {
	for _, f := range []struct{ dst, src **bool }{
		{&dst.ReadOnly, &o.ReadOnly}, {&dst.Destructive, &o.Destructive}, {&dst.Idempotent, &o.Idempotent}, {&dst.OpenWorld, &o.OpenWorld},
	} {
		if *f.src != nil {
			b := **f.src
			*f.dst = &b
		}
	}
}

func hint(a opsfile.Annotations, name string) bool {
	var p *bool
	switch name {
	case "read_only":
		p = a.ReadOnly
	case "destructive":
		p = a.Destructive
	case "idempotent":
		p = a.Idempotent
	case "open_world":
		p = a.OpenWorld
	}
	return p != nil && *p
}

// matches reports whether a selector selects a unit: a glob its
// operation's name or one of its tools' names.
func matches(s selector, u *unit, ann opsfile.Annotations, toolsets []string) bool {
	switch s.kind {
	case "glob":
		if ok, _ := path.Match(s.arg, u.op.Name); ok {
			return true
		}
		for _, t := range u.tools {
			if ok, _ := path.Match(s.arg, t.Name()); ok {
				return true
			}
		}
		return false
	case "toolset":
		return slices.Contains(toolsets, s.arg)
	case "annotation":
		return hint(ann, s.arg) != s.not
	case "mode":
		return string(u.op.Mode) == s.arg
	}
	return false
}

// publish is the published form of tool served of unit u.
func (v *view) publish(u *unit, served host.Tool, ann opsfile.Annotations, toolsets []string) *viewTool {
	t := served.Operation()
	tool := mcpTool(t)
	name := t.Name
	family := u.op.Family != nil && t.Role != ""
	opOverride := v.cfg.Tools[u.op.Name]
	if o, ok := v.cfg.Tools[t.Name]; ok && o.Name != "" {
		name = o.Name
	} else if family && opOverride.Name != "" && t.Name == u.op.Name+"_"+t.Role {
		name = opOverride.Name + "_" + t.Role
	}
	tool.Name = name
	// A family operation's title and description are its start tool's.
	apply := func(o ToolOverride) {
		if o.Title != "" {
			tool.Title = o.Title
		}
		if o.Description != "" {
			tool.Description = o.Description
		}
	}
	if family && t.Role == opsfile.RoleStart {
		// Keep what the family adds to the operation's description.
		if rest, ok := strings.CutPrefix(tool.Description, u.op.Description); ok && opOverride.Description != "" {
			opOverride.Description += rest
		}
		apply(opOverride)
	} else if family && opOverride.Description != "" {
		// The other tools end with "Job of: <its first line>".
		first := func(s string) string { s, _, _ = strings.Cut(strings.TrimSpace(s), "\n"); return s }
		if of := first(u.op.Description); of != "" && strings.HasSuffix(tool.Description, of) {
			tool.Description = strings.TrimSuffix(tool.Description, of) + first(opOverride.Description)
		}
	}
	apply(v.cfg.Tools[t.Name])
	// Annotations: the operation's override is its start tool's (a
	// family's other tools have hints of their own); a tool's own
	// override goes on top.
	own := v.cfg.Tools[t.Name].Annotations
	if t.Name == u.op.Name {
		own = nil // already in ann
	}
	a, set := ann, v.cfg.Tools[u.op.Name].Annotations != nil
	if family && t.Role != opsfile.RoleStart {
		a, set = defaultAnnotations(t), false
	}
	if own != nil {
		overlayAnnotations(&a, own)
		set = true
	}
	if set {
		tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: hint(a, "read_only"), DestructiveHint: a.Destructive,
			IdempotentHint: hint(a, "idempotent"), OpenWorldHint: a.OpenWorld}
	}
	return &viewTool{name: name, hostName: t.Name, role: t.Role, tool: tool, served: served, op: u.op, toolsets: toolsets}
}

// metaToolNames are the discovery meta-tools (discovery.go).
var metaToolNames = []string{searchToolName, describeToolName, callToolName}

// CheckView resolves the endpoint's view against h and returns what is
// wrong with it there (an override of a tool h does not have, two tools
// published under one name), naming the field. Callers check a host
// before they attach it; an endpoint attached to a host its view does
// not fit leaves out the tools in conflict.
func (ep *Endpoint) CheckView(h *host.Host) error {
	if ep.view == nil || h == nil {
		return nil
	}
	return ep.view.resolve(h).err
}

// viewOf is the view of the active host, nil without a view.
func (ep *Endpoint) viewOf(h *host.Host) *viewState {
	if ep.view == nil || h == nil {
		return nil
	}
	return ep.view.resolve(h)
}

// viewMiddleware publishes the view: it rewrites tools/list results and
// translates the tool name of tools/call, as the request's plan resolved
// it (plan.go).
func (ep *Endpoint) viewMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p := planOf(ctx)
		st := p.view
		if st == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if err == nil {
				first := true
				if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p != nil && p.Cursor != "" {
					first = false
				}
				res = ep.publishList(st, res, first)
			}
			return res, err
		case "tools/call":
			cr, ok := req.(*mcp.CallToolRequest)
			switch {
			case !ok || cr.Params == nil:
			case p.vt != nil:
				cr.Params.Name = p.vt.hostName
				res, err := next(ctx, method, req)
				if r, ok := res.(*mcp.CallToolResult); ok {
					st.renameResult(p.vt, r)
				}
				return res, err
			case p.hidden:
				return nil, unknownTool(p.name) // as the SDK answers an unknown tool
			}
		}
		return next(ctx, method, req)
	}
}

// publishList rewrites a tools/list result: the view's tools under their
// published form, the meta-tools when discovery is on (on the first page:
// the policy leaves out what is not an operation), nothing else.
func (ep *Endpoint) publishList(st *viewState, res mcp.Result, first bool) mcp.Result {
	var lr *mcp.ListToolsResult
	var outputs map[string]json.RawMessage
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		lr = r
	case *listToolsResult:
		lr = r.ListToolsResult
		outputs = map[string]json.RawMessage{}
		for name, out := range r.outputs {
			if vt := st.byHost[name]; vt != nil {
				outputs[vt.name] = out
			}
		}
	default:
		return res
	}
	out := *lr
	out.Tools = make([]*mcp.Tool, 0, len(lr.Tools))
	if first && ep.view.discovery != DiscoveryOff {
		out.Tools = append(out.Tools, ep.view.meta...)
	}
	for _, t := range lr.Tools {
		if vt := st.byHost[t.Name]; vt != nil && ep.view.discovery != DiscoveryOnly {
			out.Tools = append(out.Tools, vt.tool)
		}
	}
	if outputs != nil {
		return &listToolsResult{ListToolsResult: &out, outputs: outputs}
	}
	return &out
}

// ViewTool is one tool as an endpoint's view publishes it, for listings.
type ViewTool struct {
	Name     string   `json:"name"`
	Tool     string   `json:"tool"` // the host's name
	Title    string   `json:"title,omitempty"`
	Toolsets []string `json:"toolsets,omitempty"`
}

// ViewTools lists what the endpoint's view publishes of h, sorted by
// name, and its discovery mode; "", nil without a view.
func (ep *Endpoint) ViewTools(h *host.Host) (discovery string, tools []ViewTool) {
	if ep.view == nil {
		return "", nil
	}
	tools = []ViewTool{}
	st := ep.viewOf(h)
	if st == nil {
		return ep.view.discovery, tools
	}
	tools = make([]ViewTool, 0, len(st.tools))
	for _, vt := range st.tools {
		tools = append(tools, ViewTool{Name: vt.name, Tool: vt.hostName, Title: vt.tool.Title, Toolsets: vt.toolsets})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return ep.view.discovery, tools
}
