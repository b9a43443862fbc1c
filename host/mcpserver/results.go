package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
)

// Results the tasks middleware (tasks.go) wraps to add the fields that
// go-sdk's types lack: the tasks capability of the initialize result, and
// execution.taskSupport and the task output schema of the task tools in
// tools/list.

// initializeResult is an initialize result with the tasks capability,
// which mcp.ServerCapabilities has no field for.
type initializeResult struct{ *mcp.InitializeResult }

func (r *initializeResult) MarshalJSON() ([]byte, error) {
	type capabilities struct {
		*mcp.ServerCapabilities
		Tasks json.RawMessage `json:"tasks"`
	}
	// The outer capabilities field shadows the embedded one.
	return json.Marshal(struct {
		*mcp.InitializeResult
		Capabilities capabilities `json:"capabilities"`
	}{r.InitializeResult, capabilities{r.Capabilities, tasksCapability}})
}

// listToolsResult is a tools/list result whose task tools say
// execution.taskSupport "optional", which mcp.Tool has no field for, and
// have the output schema taskOutputSchemas gives them.
type listToolsResult struct {
	*mcp.ListToolsResult
	// outputs are the output schemas of the task tools, by name.
	outputs map[string]json.RawMessage
}

type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

func (r *listToolsResult) MarshalJSON() ([]byte, error) {
	type tool struct {
		*mcp.Tool
		Execution    *toolExecution `json:"execution,omitempty"`
		OutputSchema any            `json:"outputSchema,omitempty"`
	}
	tools := make([]tool, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = tool{Tool: t, OutputSchema: t.OutputSchema}
		if out, ok := r.outputs[t.Name]; ok {
			tools[i].Execution = &toolExecution{TaskSupport: "optional"}
			tools[i].OutputSchema = out
		}
	}
	return json.Marshal(struct {
		*mcp.ListToolsResult
		Tools []tool `json:"tools"`
	}{r.ListToolsResult, tools})
}

// taskOutputSchemas returns the output schema of each task tool of h: its
// start result (the job handle) or, for the CallToolResult tasks/result
// returns, the operation's own result, which the family's result tool
// describes as its "result" property. Clients check a task's result
// against the tool's output schema (the TypeScript SDK does), so it must
// admit both.
func taskOutputSchemas(h *host.Host) map[string]json.RawMessage {
	byName := map[string]*opsfile.Operation{}
	for _, op := range h.Operations() {
		byName[op.Name] = op
	}
	out := map[string]json.RawMessage{}
	for name, op := range byName {
		if !h.Tool(name).AcceptsTasks() || op.Family == nil {
			continue
		}
		var start any = map[string]any{"type": "object"}
		if len(op.OutputSchema) > 0 {
			start = op.OutputSchema
		}
		var result any = map[string]any{"type": "object"}
		if rt := byName[op.Family.Names[opsfile.RoleResult]]; rt != nil {
			var s struct {
				Properties struct {
					Result json.RawMessage `json:"result"`
				} `json:"properties"`
			}
			if json.Unmarshal(rt.OutputSchema, &s) == nil && len(s.Properties.Result) > 0 {
				result = s.Properties.Result
			}
		}
		out[name], _ = json.Marshal(map[string]any{"type": "object", "anyOf": []any{start, result},
			"description": "A plain call returns the job handle; the result of the call run as a task (tasks/result) is the operation's result."})
	}
	return out
}

// Interface guards.
var (
	_ mcp.Result     = (*initializeResult)(nil)
	_ mcp.Result     = (*listToolsResult)(nil)
	_ json.Marshaler = (*initializeResult)(nil)
	_ json.Marshaler = (*listToolsResult)(nil)
)
