package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// contractRun is what e2e/ts/contract.mjs printed: the tools one client
// listed and what each call answered.
type contractRun struct {
	Client          string `json:"client"`
	ProtocolVersion string `json:"protocolVersion"`
	Error           string `json:"error"`
	Tools           []struct {
		Name        string         `json:"name"`
		Title       string         `json:"title"`
		Role        string         `json:"role"` // in a session or async_job family
		Annotations map[string]any `json:"annotations"`
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"inputSchema"`
		OutputSchema *struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"outputSchema"`
	} `json:"tools"`
	Calls []struct {
		Tool              string         `json:"tool"`
		Arguments         map[string]any `json:"arguments"`
		OK                bool           `json:"ok"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Text              string         `json:"text"`
		Error             *struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"calls"`
}

// contractClients are the official TypeScript SDK clients of the sweep:
// v1 (its last release, 2025-11-25), v2 in the same protocol, and v2 in
// 2026-07-28, sessionless.
var contractClients = []string{"v1", "v2", "v2-modern"}

// runContract runs contract.mjs with one client against url (from any
// goroutine: it reports failures with Errorf).
func runContract(t *testing.T, url, client string, plan map[string]any) contractRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	b, _ := json.Marshal(plan)
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot, "e2e", "ts", "contract.mjs"), url, client, string(b))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var run contractRun
	if jerr := json.Unmarshal(out, &run); jerr != nil || err != nil && run.Error == "" {
		t.Errorf("contract.mjs %s: %v %v\n%s\n%.2000s", client, err, jerr, stderr.String(), out)
		return run
	}
	if run.Error != "" {
		t.Errorf("contract.mjs %s: %s", client, run.Error)
	}
	return run
}

// judgeContract fails on every broken promise a run shows: a result the
// client refused (its output schema, -32602; structuredContent missing,
// -32600), has_more with no cursor to go on with, a cursor argument on a
// tool whose results have none, a tool whose name reads as a lookup
// (sdk.Verb; a family's status and result tools) without readOnlyHint,
// two tools of one endpoint with the same title.
func judgeContract(t *testing.T, where string, run contractRun) {
	t.Helper()
	titles := map[string]string{}
	for _, tool := range run.Tools {
		if other, dup := titles[tool.Title]; dup && tool.Title != "" {
			t.Errorf("%s %s: %s and %s are both titled %q", where, run.Client, other, tool.Name, tool.Title)
		}
		titles[tool.Title] = tool.Name
		_, cursorIn := tool.InputSchema.Properties["cursor"]
		cursorOut := tool.OutputSchema != nil && tool.OutputSchema.Properties["cursor"] != nil
		if cursorIn && !cursorOut {
			t.Errorf("%s %s: %s takes a cursor its results never carry", where, run.Client, tool.Name)
		}
		// A family's tools read as their role does: status and result
		// read; start, poll (it acknowledges), stop and cancel do not.
		reads := sdk.Verb(tool.Name) == "read"
		if tool.Role != "" {
			reads = tool.Role == "status" || tool.Role == "result"
		}
		if reads && tool.Annotations["readOnlyHint"] != true {
			t.Errorf("%s %s: %s reads (by its name) but is not marked readOnlyHint: %v", where, run.Client, tool.Name, tool.Annotations)
		}
	}
	// A tool that takes a cursor must hand one out: every window of the
	// demo that can continue gets items, and so a cursor, in the sweep.
	cursorIn, answered, cursorOut := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, tool := range run.Tools {
		_, cursorIn[tool.Name] = tool.InputSchema.Properties["cursor"]
	}
	for _, c := range run.Calls {
		if c.Error == nil && !c.IsError {
			answered[c.Tool] = true
			if cur, _ := c.StructuredContent["cursor"].(string); cur != "" {
				cursorOut[c.Tool] = true
			}
		}
	}
	for name := range cursorIn {
		if cursorIn[name] && answered[name] && !cursorOut[name] && !strings.HasSuffix(name, "_poll") {
			t.Errorf("%s %s: %s takes a cursor but none of its results carried one", where, run.Client, name)
		}
	}
	for _, c := range run.Calls {
		if c.Error != nil {
			if c.Error.Code != nil && (*c.Error.Code == -32602 || *c.Error.Code == -32600) {
				t.Errorf("%s %s: %s(%v): the client refused the result: %d %s", where, run.Client, c.Tool, c.Arguments, *c.Error.Code, c.Error.Message)
			} else {
				t.Logf("%s %s: %s(%v): %s", where, run.Client, c.Tool, c.Arguments, c.Error.Message)
			}
			continue
		}
		if c.IsError && testing.Verbose() {
			t.Logf("%s %s: %s(%v) is an error: %.200s", where, run.Client, c.Tool, c.Arguments, c.Text)
		}
		if c.StructuredContent["has_more"] == true {
			if cur, _ := c.StructuredContent["cursor"].(string); cur == "" {
				t.Errorf("%s %s: %s says has_more without a cursor to go on with: %v", where, run.Client, c.Tool, c.StructuredContent)
			}
		}
		if strings.Contains(c.Text, "does not match the output schema") {
			t.Errorf("%s %s: %s: the gateway's check found its own result breaking the schema it publishes: %s", where, run.Client, c.Tool, c.Text)
		}
	}
}

// demoContractArgs are the demo's known-good arguments, laid over those
// generated from each tool's input schema.
var demoContractArgs = map[string]any{
	"get_user": map[string]any{"id": 2}, "api_get_user": map[string]any{"id": 2}, "delete_user": map[string]any{"id": 999},
	"api_delete_user": map[string]any{"id": 999}, "create_user": map[string]any{"name": "Sweep"},
	"slow_call": map[string]any{"ms": 10}, "api_slow_call": map[string]any{"ms": 10}, "slow_count_start": map[string]any{"ms": 50},
	"get_book": map[string]any{"id": "2"}, "delete_book": map[string]any{"id": "999"},
	"book_events_window": map[string]any{"genre": "HISTORY"}, "book_events_start": map[string]any{"genre": "HISTORY"},
	"grpc_get_user": map[string]any{"id": "1"}, "grpc_lookup_users": map[string]any{"requests": []any{map[string]any{"id": "1"}}},
	"grpc_presence":  map[string]any{"requests": []any{map[string]any{"id": "1"}}},
	"order_GetOrder": map[string]any{"orderId": 1}, "order_lookup_soap12": map[string]any{"orderId": 1}, "order_refund": map[string]any{"orderId": 1},
	"invoice_batch_start": map[string]any{"orderId": []any{1, 2}, "durationMs": 100},
	"add_book":            map[string]any{"input": map[string]any{"title": "Sweep", "genre": "FICTION", "authorId": "a2", "year": 2026}},
	"order_Divide":        map[string]any{"a": 6, "b": 3}, "order_Add": map[string]any{"a": 1, "b": 2},
	"mcp_word_stats": map[string]any{"text": "the quick brown fox"}, "mcp_countdown": map[string]any{"from": 2},
	"countdown_window": map[string]any{"from": 2}, "tail_logs": map[string]any{},
	"ask_demo_llm": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Say hello"}}},
	"search_tools": map[string]any{"query": "user by id"}, "describe_tool": map[string]any{"name": "get_user"},
	"call_tool": map[string]any{"name": "get_user", "arguments": map[string]any{"id": 2}},
}

// TestContractSweepDemo is the contract sweep over the demo (`make run`):
// every tool of /mcp and /discover, of every mode and adapter, called by
// the TypeScript SDK v1 and v2 clients in both protocol generations,
// which refuse a result that breaks its tool's output schema; the run
// also fails on has_more without a cursor, a cursor argument no result
// carries, and a lookup without readOnlyHint. The three clients run side
// by side (about a minute: the windows run their course).
func TestContractSweepDemo(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	d := startDemo(t)
	plan := map[string]any{"args": demoContractArgs}
	type result struct {
		where string
		run   contractRun
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	for _, where := range []string{"/mcp", "/discover"} {
		for _, client := range contractClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				url := strings.TrimSuffix(d.mcpURL(), "/mcp") + where
				run := runContract(t, url, client, plan)
				mu.Lock()
				results = append(results, result{where, run})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(results, func(a, b result) int { return strings.Compare(a.where+a.run.Client, b.where+b.run.Client) })
	for _, r := range results {
		judgeContract(t, r.where, r.run)
		called := map[string]bool{}
		for _, c := range r.run.Calls {
			called[c.Tool] = true
		}
		for _, tool := range r.run.Tools {
			if !called[tool.Name] {
				t.Errorf("%s %s: %s was listed but not called", r.where, r.run.Client, tool.Name)
			}
		}
		t.Logf("%s %s (%s): %d tools, %d calls", r.where, r.run.Client, r.run.ProtocolVersion, len(r.run.Tools), len(r.run.Calls))
	}
	if len(results) > 0 && len(results[len(results)-1].run.Tools) < 40 {
		t.Errorf("the demo's /mcp lists %d tools", len(results[len(results)-1].run.Tools))
	}
}
