package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ToolCallCount is what crank_tool_calls_total counted of one tool name in
// this process: every call, and those that failed (any outcome but ok and
// cancelled).
type ToolCallCount struct {
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
	// OutputMismatches are the results that did not match the tool's
	// published output schema (crank_output_mismatch_total).
	OutputMismatches int64 `json:"output_mismatches"`
}

// ToolCalls reads crank_tool_calls_total by tool name (the operator
// console's chart of calls and errors per tool).
func ToolCalls() map[string]ToolCallCount {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		toolCalls.Collect(ch)
		close(ch)
	}()
	out := map[string]ToolCallCount{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		var tool, outcome string
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "tool":
				tool = l.GetValue()
			case "outcome":
				outcome = l.GetValue()
			}
		}
		n := int64(d.GetCounter().GetValue())
		c := out[tool]
		c.Calls += n
		if outcome != "ok" && outcome != "cancelled" {
			c.Errors += n
		}
		out[tool] = c
	}
	for tool, n := range counted(outputMismatches) {
		c := out[tool]
		c.OutputMismatches = n
		out[tool] = c
	}
	return out
}

// counted reads a counter with a tool label by tool.
func counted(cv *prometheus.CounterVec) map[string]int64 {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		cv.Collect(ch)
		close(ch)
	}()
	out := map[string]int64{}
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "tool" {
				out[l.GetValue()] += int64(d.GetCounter().GetValue())
			}
		}
	}
	return out
}
