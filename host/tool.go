package host

import (
	"sync"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
)

// Tool is a tool name resolved against the tools a host serves, once
// (Host.Tool): what a call hands to Call and StartTask, so that the host
// does not look the name up again. A Tool the host does not serve keeps
// its name, for the error that says so.
type Tool struct {
	name string
	b    *boundOp
}

// Tool resolves a tool name against the tools the host serves. A Tool
// outlives a re-expansion that replaces them (reexpand.go): a call of it
// runs the tool as it was resolved.
func (h *Host) Tool(name string) Tool {
	b, _ := h.op(name)
	return Tool{name: name, b: b}
}

// Served reports whether the host serves the tool.
func (t Tool) Served() bool { return t.b != nil }

// Name is the tool's name.
func (t Tool) Name() string { return t.name }

// Operation is the tool as the host publishes it (a family tool's own
// role and schemas); nil for a tool the host does not serve.
func (t Tool) Operation() *opsfile.Operation {
	if t.b == nil {
		return nil
	}
	return t.b.Operation
}

// Base is the operation the tool belongs to, as policies and views judge
// it: the tool's own, or, for a tool of a session or async_job family
// ({name}_start, _poll, _status, …), the family's operation, whose Name
// is the operation's. nil for a tool the host does not serve.
func (t Tool) Base() *opsfile.Operation {
	switch {
	case t.b == nil:
		return nil
	case t.b.base != nil:
		return t.b.base.Operation
	}
	return t.b.Operation
}

// CarriesArguments reports whether the tool's arguments are its
// operation's (a unary or window tool, a family's start tool), as
// opposed to a family tool's own (a session or job id).
func (t Tool) CarriesArguments() bool {
	return t.b != nil && (t.b.Role == "" || t.b.Role == opsfile.RoleStart)
}

// AcceptsTasks reports whether the tool accepts task-augmented calls:
// the start tool of an async_job family.
func (t Tool) AcceptsTasks() bool {
	return t.b != nil && t.b.Role == opsfile.RoleStart && t.b.Mode == opsfile.ModeAsyncJob
}

// Unary reports whether a call of the tool is one plain adapter call that
// sends its caller nothing before its result unless the caller asked for
// progress: a unary operation (no family role, no window) whose running
// adapter relays neither log messages nor client requests (its
// description is known: an adapter not started yet may). The MCP
// endpoint serves such a call on its own hot path.
func (t Tool) Unary() bool {
	if t.b == nil || t.b.Role != "" || t.b.Execution != nil || t.b.sup == nil {
		return false
	}
	if ua := t.b.UpstreamAuth; ua != nil && ua.Grant == auth.GrantAuthorizationCode {
		return false // a consent may ask its client (upstream_grant.go)
	}
	d := t.b.sup.Description()
	return d != nil && (!d.Capabilities.Progress || !d.Capabilities.Log && !d.Capabilities.ClientRequests)
}

// Upstreams are the addresses the tool's config connects to (a family
// tool's: its operation's), as its adapter's config schema says: what a
// rate limit scoped to an upstream matches. Read once per tool.
func (t Tool) Upstreams() []string {
	if t.b == nil {
		return nil
	}
	if t.b.base != nil {
		return Tool{b: t.b.base}.Upstreams()
	}
	if t.b.upstreams == nil {
		return nil
	}
	return t.b.upstreams()
}

// readUpstreams is the Upstreams of b, read once its adapter described
// itself (its config schema says what each field reaches).
func readUpstreams(b *boundOp) func() []string {
	var mu sync.Mutex
	var list []string
	read := false
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		if !read && b.sup != nil && b.sup.Description() != nil {
			list, read = opsfile.Upstreams(b.Config, b.sup.Description().ConfigSchema), true
		}
		return list
	}
}
