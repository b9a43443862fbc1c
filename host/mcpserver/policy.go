package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

// The per-tool policy (Options.Policy, CEL rules over the caller, the
// tool and the arguments; package auth compiles and evaluates them). A
// receiving middleware, outside the tasks and session middlewares,
// applies it:
//
//   - tools/list leaves out the tools the caller may not see (a rule is
//     false whatever the arguments);
//   - tools/call of such a tool is answered as for an unknown tool, and a
//     call whose arguments a rule refuses gets an isError result naming
//     the rule (policyCheck, the one decision point, which the call's
//     plan asks: plan.go);
//   - the tools of a session or async_job family and the tasks of an
//     async_job are their operation's: hidden with it (tasks/get, result,
//     cancel and update answer "not found"; tasks/list leaves them out);
//     only the start tool carries the operation's arguments.

// policyMiddleware applies the policy to the requests it governs.
func (ep *Endpoint) policyMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p := planOf(ctx)
		if ep.policy == nil || p.h == nil {
			return next(ctx, method, req)
		}
		taskID := ""
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if err == nil {
				ep.filterTools(p, res)
			}
			return res, err
		case "resources/list", "resources/templates/list", "prompts/list":
			res, err := next(ctx, method, req)
			if err == nil {
				ep.filterPublications(p, res) // published.go
			}
			return res, err
		case "tools/call": // decided by the plan
			switch {
			case p.denied != nil:
				return nil, p.denied
			case p.refused != nil:
				return p.refused, nil
			}
			return next(ctx, method, req)
		case "ping": // a tasks/* request tunnelled for a restored session (tasks.go)
			env, marked := envelope(req.GetExtra())
			if !marked {
				return next(ctx, method, req)
			}
			method = env.Method
			var params taskIDParams
			if len(env.Params) > 0 && json.Unmarshal(env.Params, &params) == nil {
				taskID = params.TaskID
			}
		case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksUpdate:
			if params, ok := req.GetParams().(*taskIDParams); ok && params != nil {
				taskID = params.TaskID
			}
		}
		switch method {
		case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksUpdate:
			if taskID != "" && !ep.taskVisible(ctx, p, taskID) {
				return nil, taskError(store.ErrNotFound, taskID)
			}
		}
		return next(ctx, method2(req, method), req)
	}
}

// method2 is the method to hand on: a tunnelled request stays a ping.
func method2(req mcp.Request, method string) string {
	if _, marked := envelope(req.GetExtra()); marked {
		return "ping"
	}
	return method
}

// policyCaller is the caller of a request as the policy sees it, agent
// the one it runs as (callerAgent).
func (ep *Endpoint) policyCaller(extra *mcp.RequestExtra, agent string) *auth.Caller {
	id := tokenIdentity(extra)
	user := ""
	if id != nil {
		user = id.User
	} else if extra != nil && extra.Header != nil {
		user = extra.Header.Get(authUserHeader)
	}
	return auth.NewCaller(agent, user, ep.workspace, id)
}

// policyTool is an operation as the policy sees it; unset annotations
// take MCP's defaults (destructive, open world).
func policyTool(op *opsfile.Operation) *auth.Tool {
	t := &auth.Tool{Name: op.Name, Title: op.Title, Mode: string(op.Mode), Adapter: op.Adapter,
		Annotations: auth.ToolAnnotations{Destructive: true, OpenWorld: true}}
	if a := op.Annotations; a != nil {
		set := func(dst *bool, v *bool) {
			if v != nil {
				*dst = *v
			}
		}
		set(&t.Annotations.ReadOnly, a.ReadOnly)
		set(&t.Annotations.Destructive, a.Destructive)
		set(&t.Annotations.Idempotent, a.Idempotent)
		set(&t.Annotations.OpenWorld, a.OpenWorld)
		if t.Annotations.ReadOnly && a.Destructive == nil {
			t.Annotations.Destructive = false // MCP: destructive is meaningful only when not read-only
		}
	}
	return t
}

// policyCheck is the policy's decision on one call of t: nil, nil to go
// on; the unknown-tool error for a tool the caller may not see (the
// SDK's own answer for an unknown tool, so a hidden tool is not
// revealed); an isError result naming the rule that refused these
// arguments.
func (ep *Endpoint) policyCheck(c *auth.Caller, t host.Tool, args json.RawMessage) (*mcp.CallToolResult, error) {
	op, tool := t.Base(), t.Name()
	if op == nil {
		return nil, nil // the SDK answers an unknown tool
	}
	if !t.CarriesArguments() {
		args = nil
	}
	switch d, ref := ep.policy.Check(c, policyTool(op), args); d {
	case auth.Hidden:
		deniedCall(tool, op)
		ep.logger.Info("tool call denied by policy: tool hidden from the caller",
			zap.String("tool", tool), zap.String("agent", c.ID))
		return nil, unknownTool(tool)
	case auth.Refused:
		deniedCall(tool, op)
		ep.logger.Info("tool call denied by policy", zap.String("tool", tool), zap.String("agent", c.ID),
			zap.String("rule", ref.Rule), zap.String("reason", ref.Reason))
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: fmt.Sprintf("tool %q: %s", tool, ref.Error())}}}, nil
	}
	return nil, nil
}

// filterTools leaves out of a tools/list result the tools the caller may
// not see.
func (ep *Endpoint) filterTools(p *plan, res mcp.Result) {
	var lr *mcp.ListToolsResult
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		lr = r
	case *listToolsResult:
		lr = r.ListToolsResult
	}
	if lr == nil {
		return
	}
	seen := map[*opsfile.Operation]bool{}
	kept := make([]*mcp.Tool, 0, len(lr.Tools))
	for _, t := range lr.Tools {
		op := p.h.Tool(t.Name).Base()
		if op == nil {
			continue
		}
		visible, done := seen[op]
		if !done {
			visible = ep.policy.Visible(p.caller, policyTool(op))
			seen[op] = visible
		}
		if visible {
			kept = append(kept, t)
		}
	}
	lr.Tools = kept
}

// taskVisible reports whether the caller of p may see a task: it is not
// found, or its operation is visible to the caller.
func (ep *Endpoint) taskVisible(ctx context.Context, p *plan, id string) bool {
	t, err := p.h.GetTask(ctx, p.scope, id)
	if err != nil {
		return true // the method answers not found, or the store's error
	}
	return ep.taskOperationVisible(p, t)
}

func (ep *Endpoint) taskOperationVisible(p *plan, t *host.Task) bool {
	op := p.h.Tool(t.Tool).Base()
	return op == nil || ep.policy.Visible(p.caller, policyTool(op))
}

// keepTask is tasks/list's filter of the caller's tasks: nil (keep all)
// without a policy.
func (ep *Endpoint) keepTask(p *plan) func(*host.Task) bool {
	if ep.policy == nil || p.caller == nil {
		return nil
	}
	return func(t *host.Task) bool { return ep.taskOperationVisible(p, t) }
}

// deniedCall counts a call the policy refused (crank_tool_calls_total,
// outcome "denied"); it never reached the host.
func deniedCall(tool string, op *opsfile.Operation) {
	t := telemetry.ToolSeries(tool, string(op.Mode), op.Role)
	t.End(t.Begin(), host.OutcomeDenied)
}
