package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The endpoint's published tools for listings outside MCP (an mcp-mesh
// registration, host/mesh), and a callback when they change: a new host
// attached (a reload, a catalog version) or an attached host's entry
// expanded to other tools (an upstream's list_changed).

// PublishedTool is a tool as the endpoint publishes it: after its view
// (the meta-tools too when discovery is on), with no caller's policy.
type PublishedTool struct {
	Name, Description         string
	InputSchema, OutputSchema json.RawMessage
	// Meta is the tool's _meta: a window tool's io.crank/execution and
	// stream_type, a family tool's io.crank/execution.
	Meta map[string]any
}

// toolWatchers are the callbacks of OnToolsChanged.
type toolWatchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// PublishedTools lists the tools the endpoint publishes now (nil before
// its first host), as tools/list shows them to a caller no policy limits.
func (ep *Endpoint) PublishedTools() []PublishedTool {
	h := ep.active.Load()
	if h == nil {
		return nil
	}
	var tools []*mcp.Tool
	if st := ep.viewOf(h); st != nil {
		if ep.view.discovery != DiscoveryOff {
			tools = append(tools, ep.view.meta...)
		}
		if ep.view.discovery != DiscoveryOnly {
			for _, vt := range st.tools {
				tools = append(tools, vt.tool)
			}
		}
	} else {
		for _, op := range h.Operations() {
			tools = append(tools, mcpTool(op))
		}
	}
	out := make([]PublishedTool, 0, len(tools))
	for _, t := range tools {
		p := PublishedTool{Name: t.Name, Description: t.Description, Meta: t.Meta}
		p.InputSchema, _ = json.Marshal(t.InputSchema)
		if t.OutputSchema != nil {
			p.OutputSchema, _ = json.Marshal(t.OutputSchema)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PublishedTool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// OnToolsChanged calls f (which must not block) whenever the endpoint
// publishes its tools again; remove stops that.
func (ep *Endpoint) OnToolsChanged(f func()) (remove func()) {
	w := &ep.toolWatchers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// toolsChanged calls the OnToolsChanged callbacks.
func (ep *Endpoint) toolsChanged() {
	w := &ep.toolWatchers
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.fns {
		f()
	}
}
