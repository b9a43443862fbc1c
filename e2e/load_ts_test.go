package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// kindTS is one run of the official TypeScript SDK client
// (e2e/ts/client.mjs) in the load: its own MCP session, a unary call, a
// window with progress, and a job followed to its result.
const kindTS = "ts"

const tsLoadScript = `[
	{"op":"callTool","name":"get_user","arguments":{"id":7}},
	{"op":"callTool","name":"tail","arguments":{},"progress":true},
	{"op":"callTool","name":"export_start","arguments":{"ms":100}},
	{"op":"callTool","name":"export_status","arguments":{"job_id":"{{2.job_id}}"},
	 "until":{"field":"status","equals":"succeeded"},"untilMs":15000},
	{"op":"callTool","name":"export_result","arguments":{"job_id":"{{2.job_id}}"}}
]`

// runTSLoad runs the TypeScript client against url, one run after the
// other, until deadline.
func runTSLoad(url string, deadline time.Time, rep *loadReport) {
	for time.Now().Before(deadline) {
		start := time.Now()
		o := tsLoadRun(url)
		rep.add(kindTS, time.Since(start), o)
		if o.err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// tsLoadRun runs tsLoadScript once and checks every answer.
func tsLoadRun(url string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := tsClient(ctx, url, tsLoadScript)
	if err != nil {
		return classify(fmt.Errorf("typescript client: %w", err))
	}
	var run struct {
		Steps []struct {
			OK    bool
			Error struct {
				Code    *int
				Message string
				Source  string
				Data    json.RawMessage
			}
			Result struct {
				IsError           bool
				StructuredContent map[string]any
				Content           []struct{ Text string }
				Progress          []json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(out, &run); err != nil || len(run.Steps) != 5 {
		return fail("typescript client: %d steps in %s (%v)", len(run.Steps), out, err)
	}
	for i, s := range run.Steps {
		if !s.OK {
			// An HTTP failure's status is not in the SDK's message (a
			// balancer's 502 for a replica that died mid-request has an
			// empty body): name it, for classify.
			if s.Error.Source == "http" && s.Error.Code != nil {
				return classify(fmt.Errorf("typescript step %d: HTTP %d: %s", i, *s.Error.Code, s.Error.Message))
			}
			o := classify(fmt.Errorf("typescript step %d: %s", i, s.Error.Message))
			o.retryable = o.retryable || retryableData(s.Error.Data) // the answer says so
			return o
		}
		if s.Result.IsError {
			text := ""
			if len(s.Result.Content) > 0 {
				text = s.Result.Content[0].Text
			}
			return classify(fmt.Errorf("typescript step %d: tool error: %s", i, text))
		}
	}
	if name := run.Steps[0].Result.StructuredContent["name"]; name != "User 7" {
		return fail("typescript get_user: %v", run.Steps[0].Result.StructuredContent)
	}
	w := run.Steps[1].Result
	if items, _ := w.StructuredContent["items"].([]any); len(items) != 5 || len(w.Progress) != 5 {
		return fail("typescript window: %d items, %d progress notifications, want 5 and 5", len(items), len(w.Progress))
	}
	st := run.Steps[3].Result.StructuredContent
	switch {
	case st["status"] == "failed" && strings.Contains(fmt.Sprint(st["error"]), "owner_lost"):
		return outcome{err: fmt.Errorf("typescript job: owner_lost"), ownerLost: true}
	case st["status"] == "failed":
		return classify(fmt.Errorf("typescript job ended %v", st))
	case st["status"] != "succeeded":
		return fail("typescript job: %v", st)
	}
	if r := run.Steps[4].Result.StructuredContent; r["ready"] != true || fmt.Sprint(r["result"]) != "map[rows:100]" {
		return fail("typescript job result: %v", r)
	}
	return outcome{}
}
