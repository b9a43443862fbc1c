package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"go.uber.org/zap"
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
	// InputSchema is the JSON Schema of its arguments.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Calls counts this replica's calls of a tool of this name since it
	// started (crank_tool_calls_total), and how many failed.
	Calls telemetry.ToolCallCount `json:"calls"`
}

// ToolSource is where a tool is defined: an operations file, or a
// catalog at the version the handler serves.
type ToolSource struct {
	Kind    string `json:"kind"` // "file" or "catalog"
	File    string `json:"file,omitempty"`
	Catalog string `json:"catalog,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// FailedEntry is an entry of a crank handler that could not load: it
// serves no tools until a load of it works (host.EntryFailure).
type FailedEntry struct {
	host.EntryFailure
	// Endpoint and Workspace are the handler whose entry it is.
	Endpoint  string `json:"endpoint"`
	Workspace string `json:"workspace"`
	// Source is where the entry is defined.
	Source ToolSource `json:"source"`
}

// listTools answers every tool every handler of this replica serves now,
// the entries that could not load (failed), and which handlers are still
// loading theirs (a replica that is starting builds its handlers' tools
// one after the other).
func listTools(g *Gateway, w http.ResponseWriter, _ *http.Request, _ []string) error {
	out := []ToolInfo{}
	failed := []FailedEntry{}
	loading := []string{}
	counts := telemetry.ToolCalls()
	for _, ep := range g.Endpoints {
		se, ok := ep.(ServingEndpoint)
		if !ok {
			continue
		}
		h := se.Serving()
		if h == nil {
			loading = append(loading, ep.Info().ID)
			continue
		}
		info := ep.Info()
		for _, t := range toolsOf(info, h) {
			t.Calls = counts[t.Name]
			out = append(out, t)
		}
		for _, f := range h.FailedEntries() {
			failed = append(failed, FailedEntry{EntryFailure: f, Endpoint: info.ID, Workspace: info.Workspace, Source: sourceOf(info, f.File)})
		}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"tools": out, "failed": failed, "loading": loading})
}

// sourceOf is where a handler's tool or entry written in file is defined.
func sourceOf(info EndpointInfo, file string) ToolSource {
	if info.Catalog != "" && file == "catalog "+info.Catalog {
		s := ToolSource{Kind: "catalog", Catalog: info.Catalog}
		if info.Serving != nil {
			s.Version = info.Serving.Version
		}
		return s
	}
	return ToolSource{Kind: "file", File: file}
}

// toolsOf lists the tools of a handler's host.
func toolsOf(info EndpointInfo, h *host.Host) []ToolInfo {
	var out []ToolInfo
	for _, o := range h.Operations() {
		t := ToolInfo{Name: o.Name, Title: o.Title, Description: o.Description, Endpoint: info.ID,
			Workspace: info.Workspace, Mode: string(o.Mode), Adapter: o.Adapter, Role: o.Role, InputSchema: o.InputSchema}
		if t.Mode == "" {
			t.Mode = string(opsfile.ModeUnary)
		}
		if o.Family != nil && o.Role != "" {
			t.FamilyTools = o.Family.Names
			if base := h.Tool(o.Name).Base(); base != nil {
				t.Family = base.Name
			}
		}
		t.Source = sourceOf(info, o.File)
		out = append(out, t)
	}
	return out
}

// CallRequest is the body of POST /crank/tools/{tool}/call.
type CallRequest struct {
	// Endpoint is the handler whose tool to call (its id in
	// /crank/endpoints); default: the first that serves the tool.
	Endpoint  string          `json:"endpoint,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// TimeoutMS bounds the call (default 30 s, at most 5 min).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// callAgentBase prefixes the agent an operator's tool call runs as.
const callAgentBase = "admin-call:"

// callTool calls a tool a handler serves now, as the agent
// admin-call:<caller> in the handler's workspace: an operator starting,
// polling and stopping a session, or following and cancelling a job, by
// hand. Every argument check, limit and quota applies, and the call is
// audited (tool.call).
func callTool(g *Gateway, w http.ResponseWriter, r *http.Request, args []string) error {
	tool := args[0]
	body, e := readBody(r)
	if e != nil {
		return e
	}
	var req CallRequest
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return &Error{Status: http.StatusBadRequest, Message: "the body is not a tool call: " + err.Error(),
			Problems: opsfile.Problems{{Message: err.Error()}}}
	}
	if len(req.Arguments) > 0 {
		var m map[string]any
		if json.Unmarshal(req.Arguments, &m) != nil || m == nil {
			return &Error{Status: http.StatusBadRequest, Message: "the tool call is not valid",
				Problems: opsfile.Problems{{Pointer: "/arguments", Message: "must be a JSON object"}}}
		}
		if msg := host.DuplicateMember(req.Arguments); msg != "" {
			return &Error{Status: http.StatusBadRequest, Message: "the tool call is not valid",
				Problems: opsfile.Problems{{Pointer: "/arguments", Message: msg}}}
		}
	}
	timeout := defTestTimeout
	if req.TimeoutMS != 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	if timeout <= 0 || timeout > maxTestTimeout {
		return &Error{Status: http.StatusBadRequest, Message: "the tool call is not valid",
			Problems: opsfile.Problems{{Pointer: "/timeout_ms", Message: fmt.Sprintf("must be from 1 to %d", maxTestTimeout.Milliseconds())}}}
	}
	var h *host.Host
	var info EndpointInfo
	for _, ep := range g.Endpoints {
		se, ok := ep.(ServingEndpoint)
		if !ok {
			continue
		}
		i := ep.Info()
		if req.Endpoint != "" && i.ID != req.Endpoint {
			continue
		}
		if s := se.Serving(); s != nil {
			if s.Tool(tool).Served() {
				h, info = s, i
				break
			}
		}
	}
	if h == nil {
		where := "any crank handler of this replica"
		if req.Endpoint != "" {
			where = "endpoint " + req.Endpoint
		}
		return errorf(http.StatusNotFound, "tool %s is not served by %s (see /crank/tools)", tool, where)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	who, _ := caller(r)
	run := &testRunner{h: h, ctx: ctx, base: host.CallRequest{WorkspaceID: info.Workspace, AgentID: callAgentBase + who,
		RequestID: "admin-call"}}
	var stream *testStream
	if queryBool(r, "stream") {
		stream = newTestStream(w)
		run.emit = stream.send
	}
	res := run.one(tool, req.Arguments)
	g.audit(r, "tool.call", info.Catalog, nil, zap.String("tool", tool), zap.String("endpoint", info.ID),
		zap.String("workspace", info.Workspace), zap.Bool("is_error", res.IsError), zap.Int64("duration_ms", res.DurationMS))
	if stream != nil {
		stream.finish(res)
		return nil
	}
	return writeJSON(w, http.StatusOK, res)
}
