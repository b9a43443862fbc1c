package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/internal/mcptest"
)

// GET /crank/tools lists what the handler serves: its file's tool and
// its catalog's, a session family as its three tools grouped under the
// operation, each with its source.
func TestTools(t *testing.T) {
	f := newFixture(t)
	// Before the handler has built its tools, the answer says it is
	// still loading them.
	var empty struct {
		Tools   []admin.ToolInfo
		Loading []string
	}
	if err := json.Unmarshal(f.want(http.StatusOK, "GET", "/crank/tools", "").body, &empty); err != nil || len(empty.Tools) != 0 ||
		len(empty.Loading) != 1 || empty.Loading[0] != "0" {
		t.Fatalf("before the handler serves: %v %+v", err, empty)
	}
	doc, ps := catalog.ParseDocument([]byte(fmt.Sprintf(`operations:
  - name: tail
    description: Tail the log.
    adapter: rest
    mode: session
    transport_behavior: request_response
    family: {poll_tool_name: tail_next}
    config: {method: GET, url: "%s/log"}
`, f.up.URL)))
	if ps != nil {
		t.Fatal(ps)
	}
	h, err := f.ep.Build(context.Background(), doc, true)
	if err != nil {
		t.Fatal(err)
	}
	f.ep.serving = h

	var got struct {
		Tools   []admin.ToolInfo
		Loading []string
	}
	if err := json.Unmarshal(f.want(http.StatusOK, "GET", "/crank/tools", "").body, &got); err != nil || got.Loading == nil || len(got.Loading) != 0 {
		t.Fatalf("%v, loading %v", err, got.Loading)
	}
	by := map[string]admin.ToolInfo{}
	for _, tl := range got.Tools {
		by[tl.Name] = tl
	}
	if len(got.Tools) != 4 {
		t.Fatalf("tools: %+v", got.Tools)
	}
	if ft := by["file_tool"]; ft.Mode != "unary" || ft.Adapter != "rest" || ft.Source != (admin.ToolSource{Kind: "file", File: "ops.yaml"}) || ft.Family != "" {
		t.Errorf("file_tool: %+v", ft)
	}
	for role, name := range map[string]string{"start": "tail_start", "poll": "tail_next", "stop": "tail_stop"} {
		tl := by[name]
		if tl.Mode != "session" || tl.Family != "tail" || tl.Role != role || tl.FamilyTools["poll"] != "tail_next" ||
			tl.Source.Kind != "catalog" || tl.Source.Catalog != "served" || tl.Endpoint != "0" || tl.Workspace != "default" {
			t.Errorf("%s: %+v", name, tl)
		}
	}

	// An operator starts the session by hand, and stops it.
	var start admin.TestResult
	if err := json.Unmarshal(f.want(http.StatusOK, "POST", "/crank/tools/tail_start/call", `{"arguments": {}}`).body, &start); err != nil {
		t.Fatal(err)
	}
	var sess struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(start.Result, &sess); err != nil || start.IsError || sess.ID == "" || start.Operation != "tail" || start.Mode != "session" {
		t.Fatalf("start: %+v %s", start, start.Text)
	}
	stop := f.want(http.StatusOK, "POST", "/crank/tools/tail_stop/call", `{"endpoint": "0", "arguments": {"session_id": "`+sess.ID+`"}}`).obj(t)
	if stop["is_error"] != false {
		t.Fatalf("stop: %v", stop)
	}
	var after struct{ Tools []admin.ToolInfo }
	if err := json.Unmarshal(f.want(http.StatusOK, "GET", "/crank/tools", "").body, &after); err != nil {
		t.Fatal(err)
	}
	for _, tl := range after.Tools {
		if tl.Name == "tail_start" && tl.Calls.Calls < 1 {
			t.Errorf("tail_start's calls: %+v", tl.Calls)
		}
	}
	f.want(http.StatusNotFound, "POST", "/crank/tools/nope/call", `{}`)
	f.want(http.StatusNotFound, "POST", "/crank/tools/tail_start/call", `{"endpoint": "9"}`)
	if r := f.want(http.StatusBadRequest, "POST", "/crank/tools/tail_start/call", `{"arguments": [1]}`); !strings.Contains(string(r.body), "/arguments") {
		t.Errorf("bad arguments: %s", r.body)
	}
	if r := f.want(http.StatusBadRequest, "POST", "/crank/tools/tail_start/call", `{"arguments": {"f": {"a": 1, "a": 2}}}`); !strings.Contains(string(r.body), "/arguments") ||
		!strings.Contains(string(r.body), "f.a: appears twice in its object") {
		t.Errorf("a duplicate member: %s", r.body)
	}
	if n := f.audit.FilterField(zap.String("event", "tool.call")).Len(); n != 2 {
		t.Errorf("%d audited calls, want 2", n)
	}
}

// A streamed test run of a window sends each chunk as the upstream emits
// it, before the window ends, then the result with its flags.
func TestTestRunStreamed(t *testing.T) {
	f := newFixture(t)
	sse := mcptest.NewEvents(t, 3)
	entry := fmt.Sprintf(`{"name": "watch", "description": "W", "adapter": "rest", "mode": "window",
		"transport_behavior": "server_stream", "limits": {"window_duration_ms": 120000, "upstream_timeout_ms": 120000, "max_items": 3},
		"config": {"method": "GET", "url": "%s/events"}}`, sse.URL)
	resp, err := http.Post(f.srv.URL+"/crank/catalogs/served/test?stream=true", "application/json",
		strings.NewReader(`{"entry": `+entry+`, "timeout_ms": 120000}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() map[string]json.RawMessage {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the stream ended early: %v", lines.Err())
		}
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("not an event: %s", lines.Bytes())
		}
		return ev
	}
	// The first two chunks arrive while the upstream still holds the third.
	for i := 1; i <= 2; i++ {
		ev := next()
		if !strings.Contains(string(ev["progress"]), fmt.Sprintf(`\"n\":%d`, i)) &&
			!strings.Contains(string(ev["progress"]), fmt.Sprintf(`\"n\": %d`, i)) {
			t.Fatalf("event %d: %v", i, ev)
		}
	}
	sse.Release()
	var res admin.TestResult
	for {
		ev := next()
		if raw, ok := ev["result"]; ok {
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if res.Mode != "window" || res.IsError || len(res.Progress) != 3 || res.Truncated == nil || !*res.Truncated ||
		res.EndReason != "max_items" || len(res.Warnings) == 0 {
		t.Fatalf("result: mode %s, is_error %v, %d chunks, end_reason %s, warnings %v", res.Mode, res.IsError, len(res.Progress), res.EndReason, res.Warnings)
	}
}

// Validating one entry answers its effective execution: every limit,
// with the defaults of what the entry leaves out.
func TestValidateEffective(t *testing.T) {
	f := newFixture(t)
	entry := fmt.Sprintf(`{"name": "w", "description": "W", "adapter": "rest", "mode": "window",
		"transport_behavior": "request_response", "limits": {"max_items": 7}, "config": {"method": "GET", "url": "%s/w"}}`, f.up.URL)
	var v admin.Validation
	if err := json.Unmarshal(f.want(http.StatusOK, "POST", "/crank/catalogs/served/validate?entry=true", entry).body, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Valid || v.Effective == nil || v.Effective.Mode != "window" || v.Effective.Execution == nil {
		t.Fatalf("validation: %+v", v)
	}
	if l := v.Effective.Execution.Limits; l.MaxItems != 7 || l.MaxBytes != 1<<20 || l.WindowDurationMS != 10_000 {
		t.Errorf("limits: %+v", l)
	}
	if a := v.Effective.Execution.Aggregation; a.Mode != window.AggRawItems {
		t.Errorf("aggregation: %+v", a)
	}
}
