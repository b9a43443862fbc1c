package telemetry

import (
	"context"
	"sync"
)

// MaxToolLabels caps how many distinct tool (and operation, and rate
// limit) names become label values in this process. Tool names come from the configuration,
// but a catalog that changes at run time could publish an unbounded
// series of names over a process's life: past the cap, further names are
// counted under OtherTool. A name keeps its label once it has one.
const MaxToolLabels = 2000

// OtherTool is the tool label of the names past MaxToolLabels.
const OtherTool = "_other"

var toolLabels = struct {
	sync.RWMutex
	names map[string]struct{}
}{names: map[string]struct{}{}}

// ToolLabel returns the label value of a tool or operation name the
// gateway serves (never a name a client sent that no tool has).
func ToolLabel(name string) string {
	toolLabels.RLock()
	_, ok := toolLabels.names[name]
	toolLabels.RUnlock()
	if ok {
		return name
	}
	toolLabels.Lock()
	defer toolLabels.Unlock()
	if _, ok := toolLabels.names[name]; ok {
		return name
	}
	if len(toolLabels.names) >= MaxToolLabels {
		return OtherTool
	}
	toolLabels.names[name] = struct{}{}
	return name
}

// mcpMethods are the MCP methods a request's method label may name; any
// other method is "other" (a client chooses the method it sends).
var mcpMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true, "tasks/update": true,
	"notifications/initialized": true, "notifications/cancelled": true, "notifications/progress": true,
	"notifications/roots/list_changed": true,
}

func mcpMethod(m string) string {
	if mcpMethods[m] {
		return m
	}
	return "other"
}

// MCPMethod returns the label value of an MCP method (or span name part).
func MCPMethod(m string) string { return mcpMethod(m) }

type outcomeKey struct{}

// WithCallOutcome returns ctx carrying a place for the outcome class of
// the tool call served under it (SetCallOutcome), and that place: the MCP
// request's telemetry learns a cancelled call from it.
func WithCallOutcome(ctx context.Context) (context.Context, *string) {
	p := new(string)
	return context.WithValue(ctx, outcomeKey{}, p), p
}

// SetCallOutcome records the outcome class of the tool call served under
// ctx, when ctx has a place for it.
func SetCallOutcome(ctx context.Context, outcome string) {
	if p, ok := ctx.Value(outcomeKey{}).(*string); ok {
		*p = outcome
	}
}
