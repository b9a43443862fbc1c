package mcpserver

import (
	"bytes"
	"context"
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
		var defs json.RawMessage
		if rt := byName[op.Family.Names[opsfile.RoleResult]]; rt != nil {
			var s struct {
				Properties struct {
					Result json.RawMessage `json:"result"`
				} `json:"properties"`
				Defs json.RawMessage `json:"$defs"`
			}
			if json.Unmarshal(rt.OutputSchema, &s) == nil && len(s.Properties.Result) > 0 {
				// The result's references resolve in the result tool's
				// $defs, which come along.
				result, defs = s.Properties.Result, s.Defs
			}
		}
		schema := map[string]any{"type": "object", "anyOf": []any{start, result},
			"description": "A plain call returns the job handle; the result of the call run as a task (tasks/result) is the operation's result."}
		if len(defs) > 0 {
			schema["$defs"] = defs
		}
		out[name], _ = json.Marshal(schema)
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

// Results of 2026-07-28 carry fields the earlier protocols do not have:
// resultType on every result, ttlMs and cacheScope on server/discover,
// the lists and resources/read. go-sdk's types send ttlMs and cacheScope
// whatever the protocol, and a resultType an upstream's answer brought
// (a prompts/get result decoded from it), so generationMiddleware takes
// them out of the results of a request of an earlier protocol.

// withoutNewFields are the methods whose results may carry them.
var withoutNewFields = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true, "prompts/get": true, "completion/complete": true}

// newResultFields are the result members of 2026-07-28.
var newResultFields = []string{"ttlMs", "cacheScope", "resultType"}

// generationMiddleware serves the results of a request of a protocol
// before 2026-07-28 without the fields of 2026-07-28.
func generationMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil || !withoutNewFields[method] || sessionless(req.GetExtra()) {
			return res, err
		}
		return legacyResult{res}, nil
	}
}

// legacyResult is a result as a protocol before 2026-07-28 has it.
type legacyResult struct{ mcp.Result }

func (r legacyResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b, nil
	}
	n := len(m)
	for _, k := range newResultFields {
		delete(m, k)
	}
	if len(m) == n {
		return b, nil
	}
	return json.Marshal(m)
}

// Caching hints (2026-07-28) are honest. A list is the same for every
// caller unless a policy decides what each may see: then it is private.
// A read passes on the hints of the upstream that answered it (the mcp
// adapter's, when its upstream gave them), private when a policy governs
// the read, and one without hints (an upstream of an earlier protocol, an
// adapter that has none) gets ttlMs 0 and private, never go-sdk's
// default public: nothing narrower is ever made public.

// setCacheable settles the caching hints of a result (go-sdk's
// ServerOptions.SetCacheable), c holding what its handler set.
func (ep *Endpoint) setCacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	if _, read := req.(*mcp.ReadResourceRequest); read {
		if c.CacheScope != "public" && c.CacheScope != "private" {
			c.TTLMs, c.CacheScope = 0, "private" // no hint, or none Crank knows
		}
		c.TTLMs = max(c.TTLMs, 0)
	}
	if ep.policy != nil {
		if _, discover := req.(*mcp.DiscoverRequest); !discover {
			c.CacheScope = "private"
		}
	}
}

// readResult is what an adapter answers a resources/read with: the
// contents array, or an object of the contents and the upstream's
// caching hints (sdk.Publisher.ReadResource).
func readResult(raw json.RawMessage) (*mcp.ReadResourceResult, error) {
	res := &mcp.ReadResourceResult{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		var obj struct {
			Contents   []*mcp.ResourceContents `json:"contents"`
			TTLMs      int                     `json:"ttlMs"`
			CacheScope string                  `json:"cacheScope"`
		}
		if err := json.Unmarshal(t, &obj); err != nil {
			return nil, err
		}
		res.Contents, res.TTLMs, res.CacheScope = obj.Contents, obj.TTLMs, obj.CacheScope
		return res, nil
	}
	return res, json.Unmarshal(raw, &res.Contents)
}
