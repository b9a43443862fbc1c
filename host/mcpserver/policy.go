package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/auth"
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
//     the rule (policyCheck, the one decision point);
//   - the tools of a session or async_job family and the tasks of an
//     async_job are their operation's: hidden with it (tasks/get, result,
//     cancel and update answer "not found"; tasks/list leaves them out);
//     only the start tool carries the operation's arguments.

// policyCallerKey is the context key of the caller as the policy sees it,
// for tasks/list.
type policyCallerKey struct{}

// policyMiddleware applies the policy to the requests it governs.
func (ep *Endpoint) policyMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		h := ep.active.Load()
		if ep.policy == nil || h == nil {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		extra := req.GetExtra()
		taskID := ""
		switch method {
		case "tools/list":
			res, err := next(ctx, method, req)
			if err == nil {
				ep.filterTools(h, ep.policyCaller(extra, ss), res)
			}
			return res, err
		case "resources/list", "resources/templates/list", "prompts/list":
			res, err := next(ctx, method, req)
			if err == nil {
				ep.filterPublications(h, ep.policyCaller(extra, ss), res) // published.go
			}
			return res, err
		case "tools/call":
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
				if res, err := ep.policyCheck(h, ep.policyCaller(extra, ss), cr.Params.Name, cr.Params.Arguments); res != nil || err != nil {
					return res, err
				}
			}
			return next(ctx, method, req)
		case "ping": // a tasks/* request tunnelled for a restored session (tasks.go)
			env, marked := envelope(extra)
			if !marked {
				return next(ctx, method, req)
			}
			method = env.Method
			var p taskIDParams
			if len(env.Params) > 0 && json.Unmarshal(env.Params, &p) == nil {
				taskID = p.TaskID
			}
		case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksUpdate:
			if p, ok := req.GetParams().(*taskIDParams); ok && p != nil {
				taskID = p.TaskID
			}
		}
		switch method {
		case methodTasksList:
			return next(context.WithValue(ctx, policyCallerKey{}, ep.policyCaller(extra, ss)), method2(req, method), req)
		case methodTasksGet, methodTasksResult, methodTasksCancel, methodTasksUpdate:
			if taskID != "" && !ep.taskVisible(ctx, h, ep.policyCaller(extra, ss), ep.callerScope(extra, ss), taskID) {
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

// policyCaller is the caller of a request as the policy sees it.
func (ep *Endpoint) policyCaller(extra *mcp.RequestExtra, ss *mcp.ServerSession) *auth.Caller {
	id := tokenIdentity(extra)
	user := ""
	if id != nil {
		user = id.User
	} else if extra != nil && extra.Header != nil {
		user = extra.Header.Get(authUserHeader)
	}
	return auth.NewCaller(ep.callerAgent(extra, ss), user, ep.workspace, id)
}

// policyTool is an operation as the policy sees it; unset annotations
// take MCP's defaults (destructive, open world).
func policyTool(op *host.Operation) *auth.Tool {
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

// policyCheck is the policy's decision on one tools/call: nil, nil to go
// on; the unknown-tool error for a tool the caller may not see (the
// SDK's own answer for an unknown tool, so a hidden tool is not
// revealed); an isError result naming the rule that refused these
// arguments.
func (ep *Endpoint) policyCheck(h *host.Host, c *auth.Caller, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	op, ok := h.OperationOf(tool)
	if !ok {
		return nil, nil // the SDK answers an unknown tool
	}
	if !h.CarriesArguments(tool) {
		args = nil
	}
	switch d, ref := ep.policy.Check(c, policyTool(op), args); d {
	case auth.Hidden:
		deniedCall(tool, op)
		ep.logger.Info("tool call denied by policy: tool hidden from the caller",
			zap.String("tool", tool), zap.String("agent", c.ID))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", tool)}
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
func (ep *Endpoint) filterTools(h *host.Host, c *auth.Caller, res mcp.Result) {
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
	seen := map[*host.Operation]bool{}
	kept := make([]*mcp.Tool, 0, len(lr.Tools))
	for _, t := range lr.Tools {
		op, ok := h.OperationOf(t.Name)
		if !ok {
			continue
		}
		visible, done := seen[op]
		if !done {
			visible = ep.policy.Visible(c, policyTool(op))
			seen[op] = visible
		}
		if visible {
			kept = append(kept, t)
		}
	}
	lr.Tools = kept
}

// taskVisible reports whether the caller may see a task: it is not
// found, or its operation is visible to the caller.
func (ep *Endpoint) taskVisible(ctx context.Context, h *host.Host, c *auth.Caller, scope host.Scope, id string) bool {
	t, err := h.GetTask(ctx, scope, id)
	if err != nil {
		return true // the method answers not found, or the store's error
	}
	return ep.taskOperationVisible(h, c, t)
}

func (ep *Endpoint) taskOperationVisible(h *host.Host, c *auth.Caller, t *host.Task) bool {
	op, ok := h.OperationOf(t.Tool)
	return !ok || ep.policy.Visible(c, policyTool(op))
}

// keepTask is tasks/list's filter of the caller's tasks: nil (keep all)
// without a policy.
func (ep *Endpoint) keepTask(ctx context.Context, h *host.Host) func(*host.Task) bool {
	c, ok := ctx.Value(policyCallerKey{}).(*auth.Caller)
	if ep.policy == nil || !ok {
		return nil
	}
	return func(t *host.Task) bool { return ep.taskOperationVisible(h, c, t) }
}

// deniedCall counts a call the policy refused (crank_tool_calls_total,
// outcome "denied"); it never reached the host.
func deniedCall(tool string, op *host.Operation) {
	t := telemetry.ToolSeries(tool, string(op.Mode), op.Role)
	t.End(t.Begin(), host.OutcomeDenied)
}
