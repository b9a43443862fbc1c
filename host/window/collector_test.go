package window_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
)

// testExecution builds a window config from the blocks as written in an
// operations file (JSON), failing the test on any load error.
func testExecution(t testing.TB, transport, limits, aggregation, safety string) *window.Config {
	t.Helper()
	var errs []string
	blocks := map[string]json.RawMessage{}
	for k, v := range map[string]string{"limits": limits, "aggregation": aggregation, "safety": safety} {
		if v != "" {
			blocks[k] = json.RawMessage(v)
		}
	}
	if transport != "" {
		blocks["transport_behavior"], _ = json.Marshal(transport)
	}
	raw, _ := json.Marshal(blocks)
	ex := opsfile.ParseExecutionJSON(opsfile.ModeWindow, raw,
		func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
	if len(errs) > 0 {
		t.Fatalf("execution config: %v", errs)
	}
	return ex
}

// testCursor writes a window's cursor state as the collector tests do:
// the upstream cursor, then "+n" when the next window skips n items of
// its document.
func testCursor(st window.Position) string {
	if st.Skip == 0 {
		return st.Cursor
	}
	return st.Cursor + "+" + strconv.Itoa(st.Skip)
}

func parseTestCursor(s string) window.Position {
	if i := strings.LastIndexByte(s, '+'); i >= 0 {
		n, _ := strconv.Atoi(s[i+1:])
		return window.Position{Cursor: s[:i], Skip: n}
	}
	return window.Position{Cursor: s}
}

// runCollector feeds docs (JSON, with an optional "#cursor" suffix) to a
// collector, starting at cursor (testCursor's form), and returns the
// window's structuredContent with its duration zeroed and its cursor in
// testCursor's form, and the progress chunks.
func runCollector(t testing.TB, ex *window.Config, cursor string, docs ...string) (string, []string) {
	t.Helper()
	var chunks []string
	from := parseTestCursor(cursor)
	col := window.NewCollector(ex, window.Options{From: from, Progress: func(s string) { chunks = append(chunks, s) }})
	end := window.EndUpstreamEnd
	for _, d := range docs {
		doc, cur, _ := strings.Cut(d, "#")
		if col.Add([]byte(doc), cur) {
			end = col.End()
			break
		}
	}
	return string(col.Result(testCursor(col.Next()), end, "", 0).Encode()), chunks
}

var logDocs = []string{
	`{"level":"info","msg":"a","user":{"email":"ada@example.com","id":1}}#1`,
	`{"level":"error","msg":"b","user":{"email":"bob@example.com","id":2}}#2`,
	`{"level":"info","msg":"c"}#3`,
	`{"level":"warn","msg":"d"}#4`,
	`{"level":"error","msg":"e","password":"hunter2"}#5`,
}

const stats0 = `"dropped_duplicates":0,"sampled_out":0,"skipped_oversize":0,"fields_truncated":0`

func TestAggregationModes(t *testing.T) {
	redact := `{"redacted_paths":["$.user.email","$..password"]}`
	cases := []struct {
		name                   string
		aggregation, safety    string
		limits                 string
		docs                   []string
		want                   string
		wantChunks             int
		wantChunk0, wantChunkN string
	}{
		{
			name:        "raw_items",
			aggregation: `{"aggregation_mode":"raw_items","group_by":"$.level"}`, safety: redact, docs: logDocs,
			want: `{"items":[{"level":"info","msg":"a","user":{"email":"[REDACTED]","id":1}},{"level":"error","msg":"b","user":{"email":"[REDACTED]","id":2}},{"level":"info","msg":"c"},{"level":"warn","msg":"d"},{"level":"error","msg":"e","password":"[REDACTED]"}],` +
				`"summary":{"count":5,"counts":{"error":2,"info":2,"warn":1}},` +
				`"stats":{"received":5,"counted":5,"returned":5,` + stats0 + `,"redacted":3,"bytes":230,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"cursor":"5","end_reason":"upstream_end"}`,
			wantChunks: 5, wantChunk0: `{"level":"info","msg":"a","user":{"email":"[REDACTED]","id":1}}`,
		},
		{
			name:        "summary_only",
			aggregation: `{"aggregation_mode":"summary_only","group_by":"$.level"}`, safety: redact, docs: logDocs,
			want: `{"items":[],"summary":{"count":5,"counts":{"error":2,"info":2,"warn":1}},` +
				`"stats":{"received":5,"counted":5,"returned":0,` + stats0 + `,"redacted":3,"bytes":230,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"cursor":"5","end_reason":"upstream_end"}`,
			wantChunks: 5,
		},
		{
			name:        "summary_plus_samples",
			aggregation: `{"aggregation_mode":"summary_plus_samples","group_by":"$.level","sample_size":1}`, safety: redact, docs: logDocs,
			want: `{"items":[{"level":"info","msg":"a","user":{"email":"[REDACTED]","id":1}},{"level":"error","msg":"b","user":{"email":"[REDACTED]","id":2}},{"level":"warn","msg":"d"}],` +
				`"summary":{"count":5,"counts":{"error":2,"info":2,"warn":1}},` +
				`"stats":{"received":5,"counted":5,"returned":3,` + stats0 + `,"redacted":3,"bytes":230,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"cursor":"5","end_reason":"upstream_end"}`,
			wantChunks: 5,
		},
		{
			name:        "stats",
			aggregation: `{"aggregation_mode":"stats","value_path":"$.cpu"}`,
			docs:        []string{`{"host":"a","cpu":10}`, `{"host":"b","cpu":50}`, `{"host":"a","cpu":"30"}`, `{"host":"b","cpu":"n/a"}`, `{"host":"a","cpu":20.5}`, `{"host":"c","cpu":40}`, `{"host":"c"}`},
			want: `{"items":[],"summary":{"count":7,"numeric":5,"non_numeric":2,"min":10,"max":50,"avg":30.1,"p50":30,"p95":50,"sum":150.5},` +
				`"stats":{"received":7,"counted":7,"returned":0,` + stats0 + `,"redacted":0,"bytes":145,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"end_reason":"upstream_end"}`,
			wantChunks: 7,
		},
		{
			name:        "latest_state",
			aggregation: `{"aggregation_mode":"latest_state","key_path":"$.host"}`,
			docs:        []string{`{"host":"a","status":"up"}`, `{"host":"b","status":"up"}`, `{"host":"a","status":"down"}`, `{"status":"?"}`},
			want: `{"items":[],"summary":{"count":4,"keys":3,"state":{"(missing)":{"status":"?"},"a":{"host":"a","status":"down"},"b":{"host":"b","status":"up"}}},` +
				`"stats":{"received":4,"counted":4,"returned":0,` + stats0 + `,"redacted":0,"bytes":94,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"end_reason":"upstream_end"}`,
			wantChunks: 4,
		},
		{
			name:        "text",
			aggregation: `{"aggregation_mode":"text","text_path":"$.choices[0].delta.content","finish_reason_path":"$.choices[0].finish_reason","usage_path":"$.usage"}`,
			docs: []string{
				`{"choices":[{"delta":{"role":"assistant"},"finish_reason":null}]}`,
				`{"choices":[{"delta":{"content":"Hel"},"finish_reason":null}]}`,
				`{"choices":[{"delta":{"content":"lo\nworld"},"finish_reason":null}]}`,
				`{"choices":[{"delta":{},"finish_reason":"stop"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			},
			want: `{"items":[],"summary":{"text":"Hello\nworld","finish_reason":"stop","usage":{"completion_tokens":2,"prompt_tokens":3},"chunks":2},` +
				`"stats":{"received":5,"counted":5,"returned":0,` + stats0 + `,"redacted":0,"bytes":308,"duration_ms":0},` +
				`"truncated":false,"window_complete":true,"has_more":false,"end_reason":"upstream_end"}`,
			wantChunks: 2, wantChunk0: "Hel", wantChunkN: "lo\nworld",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := testExecution(t, "", c.limits, c.aggregation, c.safety)
			got, chunks := runCollector(t, ex, "", c.docs...)
			if got != c.want {
				t.Fatalf("result:\n got %s\nwant %s", got, c.want)
			}
			if len(chunks) != c.wantChunks {
				t.Fatalf("%d chunks, want %d: %q", len(chunks), c.wantChunks, chunks)
			}
			if c.wantChunk0 != "" && chunks[0] != c.wantChunk0 {
				t.Errorf("chunk 0 = %q, want %q", chunks[0], c.wantChunk0)
			}
			if c.wantChunkN != "" && chunks[len(chunks)-1] != c.wantChunkN {
				t.Errorf("last chunk = %q, want %q", chunks[len(chunks)-1], c.wantChunkN)
			}
			for _, ch := range chunks {
				if strings.Contains(ch, "@example.com") || strings.Contains(ch, "hunter2") {
					t.Errorf("a redacted value reached a progress chunk: %s", ch)
				}
			}
		})
	}
}

// field renders one field of a result.
func field(t testing.TB, result, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(result), &m); err != nil {
		t.Fatalf("%v: %s", err, result)
	}
	return string(m[name])
}

func flags(t testing.TB, result string) string {
	return fmt.Sprintf("end=%s truncated=%s complete=%s more=%s cursor=%s", field(t, result, "end_reason"),
		field(t, result, "truncated"), field(t, result, "window_complete"), field(t, result, "has_more"), field(t, result, "cursor"))
}

func TestCollectorLimits(t *testing.T) {
	// max_items ends the window right after the last counted item.
	ex := testExecution(t, "", `{"max_items":2}`, "", "")
	got, _ := runCollector(t, ex, "", logDocs...)
	if f := flags(t, got); f != `end="max_items" truncated=true complete=false more=true cursor="2"` {
		t.Errorf("max_items: %s", f)
	}
	// max_bytes: the item that does not fit is left for the next window.
	ex = testExecution(t, "", `{"max_bytes":100}`, "", "")
	got, _ = runCollector(t, ex, "", `{"n":1}#a`, `{"n":2,"pad":"`+strings.Repeat("x", 80)+`"}#b`, `{"n":3}#c`)
	if f := flags(t, got); f != `end="max_bytes" truncated=true complete=false more=true cursor="a"` {
		t.Errorf("max_bytes: %s", f)
	}
	// An item larger than max_bytes on its own is skipped, not stuck on.
	got, _ = runCollector(t, ex, "", `{"n":1}#a`, `{"pad":"`+strings.Repeat("x", 200)+`"}#b`, `{"n":3}#c`)
	if f := flags(t, got); f != `end="upstream_end" truncated=true complete=true more=false cursor="c"` ||
		!strings.Contains(got, `"gaps":["an item of 210 bytes is larger than max_bytes (100) and was skipped"]`) ||
		!strings.Contains(got, `"skipped_oversize":1`) {
		t.Errorf("oversize: %s", got)
	}
}

// A limit inside a batch (one poll answer, many items) ends the window
// with a cursor that resumes at the first item left out.
func TestCollectorBatchCursor(t *testing.T) {
	ex := testExecution(t, "request_response", `{"max_items":3}`,
		`{"items_path":"$.events[*]","cursor_path":"$.next","status_path":"$.state","summary_path":"$.totals"}`, "")
	page1 := `{"events":[{"n":1},{"n":2}],"next":"p2","state":"running","totals":{"n":5}}`
	page2 := `{"events":[{"n":3},{"n":4},{"n":5}],"next":"p3","state":"running","totals":{"n":5}}`
	got, _ := runCollector(t, ex, "p1", page1, page2)
	if f := flags(t, got); f != `end="max_items" truncated=true complete=false more=true cursor="p2+1"` {
		t.Fatalf("flags: %s", f)
	}
	if field(t, got, "status") != `"running"` || !strings.Contains(got, `"upstream":{"n":5}`) {
		t.Errorf("status/summary: %s", got)
	}
	// The next window polls with p2 and skips the item already returned.
	got, _ = runCollector(t, ex, "p2+1", page2, `{"events":[],"next":"p3"}`)
	if items := field(t, got, "items"); items != `[{"n":4},{"n":5}]` {
		t.Errorf("next window items = %s", items)
	}
	if field(t, got, "cursor") != `"p3"` {
		t.Errorf("next window cursor = %s", field(t, got, "cursor"))
	}
}

func TestCollectorDone(t *testing.T) {
	ex := testExecution(t, "request_response", "", `{"items_path":"$.items[*]","done_path":"$.done"}`, "")
	got, _ := runCollector(t, ex, "", `{"items":[1,2],"done":false}`, `{"items":[3],"done":true}`, `{"items":[4]}`)
	if f := flags(t, got); f != `end="done" truncated=false complete=true more=false cursor=` {
		t.Errorf("done: %s", f)
	}
	if field(t, got, "items") != `[1,2,3]` {
		t.Errorf("items: %s", field(t, got, "items"))
	}
}

func TestSafety(t *testing.T) {
	ex := testExecution(t, "", "", "", `{"max_field_length":16,"drop_duplicates":true,"redacted_paths":["$.token"]}`)
	long := strings.Repeat("é", 20) // 40 bytes
	got, chunks := runCollector(t, ex, "",
		`{"msg":"`+long+`","token":"t-1"}`, `{"msg":"`+long+`","token":"t-2"}`, `{"msg":"short"}`, `{"msg":"short"}`)
	wantItem := `{"msg":"éééééééé…[truncated 24 bytes]","token":"[REDACTED]"}`
	if items := field(t, got, "items"); items != `[`+wantItem+`,{"msg":"short"}]` {
		t.Errorf("items = %s", items)
	}
	// Redaction and truncation come first, so the two long items are the
	// same item after them.
	if !strings.Contains(got, `"dropped_duplicates":2`) || !strings.Contains(got, `"fields_truncated":2`) || field(t, got, "truncated") != "true" {
		t.Errorf("stats: %s", got)
	}
	if len(chunks) != 2 || chunks[0] != wantItem {
		t.Errorf("chunks = %q", chunks)
	}

	// Sampling keeps floor(n*rate) items, evenly spaced.
	ex = testExecution(t, "", "", "", `{"sampling_rate":0.25}`)
	var docs []string
	for i := 1; i <= 10; i++ {
		docs = append(docs, fmt.Sprint(i))
	}
	got, _ = runCollector(t, ex, "", docs...)
	if items := field(t, got, "items"); items != `[4,8]` || !strings.Contains(got, `"sampled_out":8`) {
		t.Errorf("sampling: %s", got)
	}
}

// The fast path (nothing reads inside items) and the decoding path agree.
func TestCollectorFastPath(t *testing.T) {
	docs := []string{`{"a":1}#1`, `[{"b":2},{"c":3}]#2`, `"text"#3`, `{"long":"` + strings.Repeat("x", 5000) + `"}#4`, `not json#5`}
	ex := testExecution(t, "", "", "", "")
	got, _ := runCollector(t, ex, "", docs...)
	want := `[{"a":1},{"b":2},{"c":3},"text",{"long":"` + strings.Repeat("x", 4096) + `…[truncated 904 bytes]"}]`
	if items := field(t, got, "items"); items != want {
		t.Errorf("items = %s", items)
	}
	if !strings.Contains(got, `"gaps":["an item that is not valid JSON was skipped"]`) {
		t.Errorf("invalid JSON not reported: %s", got)
	}
}
