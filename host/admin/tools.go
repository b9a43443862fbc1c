package admin

import (
	"net/http"
	"strings"

	"github.com/crankmcp/crank/host"
)

// ServingEndpoint is an Endpoint that can show the host it serves now
// (nil before its first host is built).
type ServingEndpoint interface {
	Endpoint
	Serving() *host.Host
}

// ToolInfo is one tool a crank handler serves now, as an MCP client
// lists it.
type ToolInfo struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Endpoint and Workspace are the handler serving it.
	Endpoint  string `json:"endpoint"`
	Workspace string `json:"workspace"`
	Mode      string `json:"mode"`
	Adapter   string `json:"adapter"`
	// Family is the session or async_job operation the tool is part of,
	// Role its part (start, poll, stop, status, result, cancel), and
	// FamilyTools every tool of the family by role.
	Family      string            `json:"family,omitempty"`
	Role        string            `json:"role,omitempty"`
	FamilyTools map[string]string `json:"family_tools,omitempty"`
	// Source is where the tool is defined.
	Source ToolSource `json:"source"`
}

// ToolSource is where a tool is defined: an operations file, or a
// catalog at the version the handler serves.
type ToolSource struct {
	Kind    string `json:"kind"` // "file" or "catalog"
	File    string `json:"file,omitempty"`
	Catalog string `json:"catalog,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// listTools answers every tool every handler of this replica serves now.
func listTools(g *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	out := []ToolInfo{}
	for _, ep := range g.Endpoints {
		se, ok := ep.(ServingEndpoint)
		if !ok {
			continue
		}
		h := se.Serving()
		if h == nil {
			continue
		}
		out = append(out, toolsOf(ep.Info(), h)...)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"tools": out})
}

// toolsOf lists the tools of a handler's host.
func toolsOf(info EndpointInfo, h *host.Host) []ToolInfo {
	// A family's operation is the catalog entry whose start tool it is.
	families := map[string]string{}
	for _, o := range h.Catalog().Operations {
		if o.Mode == host.ModeSession || o.Mode == host.ModeAsyncJob {
			start := o.Name + "_" + host.RoleStart
			if o.Family != nil && o.Family.Names[host.RoleStart] != "" {
				start = o.Family.Names[host.RoleStart]
			}
			families[start] = o.Name
		}
	}
	catSource := "catalog " + info.Catalog
	var out []ToolInfo
	for _, o := range h.Operations() {
		t := ToolInfo{Name: o.Name, Title: o.Title, Description: o.Description, Endpoint: info.ID,
			Workspace: info.Workspace, Mode: string(o.Mode), Adapter: o.Adapter, Role: o.Role}
		if t.Mode == "" {
			t.Mode = string(host.ModeUnary)
		}
		if o.Family != nil && o.Role != "" {
			t.FamilyTools = o.Family.Names
			start := o.Family.Names[host.RoleStart]
			t.Family = families[start]
			if t.Family == "" {
				t.Family = strings.TrimSuffix(start, "_"+host.RoleStart)
			}
		}
		if info.Catalog != "" && o.File == catSource {
			t.Source = ToolSource{Kind: "catalog", Catalog: info.Catalog}
			if info.Serving != nil {
				t.Source.Version = info.Serving.Version
			}
		} else {
			t.Source = ToolSource{Kind: "file", File: o.File}
		}
		out = append(out, t)
	}
	return out
}
