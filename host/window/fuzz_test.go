package window_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/jsonpath"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/host/window"
)

// FuzzWindowExtraction drives the JSONPath-driven part of a window with
// arbitrary upstream documents and paths (as items_path, cursor_path,
// group_by and redacted path): it never panics, always produces a valid
// JSON result within max_bytes, keeps its counters consistent, and every
// node the redacted path selects in a returned item is redacted. Seeds:
// testdata/fuzz/FuzzWindowExtraction.
func FuzzWindowExtraction(f *testing.F) {
	for _, s := range []struct{ doc, items, cursor, redact string }{
		{`{"events":[{"a":1,"secret":"s"},{"a":2}],"next":"c2"}`, `$.events[*]`, `$.next`, `$.secret`},
		{`[{"level":"error","user":{"pw":"x"}},{"level":"info"}]`, ``, `$[0].level`, `$..pw`},
		{`{"a":{"b":[1,2,{"c":"d"}]}}`, `$..*`, `$.a.b[2].c`, `$..c`},
		{`"just a string"`, `$`, `$`, `$`},
		{`{"x":[{"k":"v","n":1.5e300},{"k":null}]}`, `$.x[?@.k]`, `$.x[-1].k`, `$.x[?@.n > 1].k`},
		{`{"choices":[{"delta":{"content":"hi"}}]}`, `$.choices[*].delta`, `$.id`, `$.choices[0:1]`},
		{`[[[[[]]]]]`, `$[0][0]`, `$..[0]`, `$[*]`},
	} {
		f.Add([]byte(s.doc), s.items, s.cursor, s.redact)
	}
	f.Fuzz(func(t *testing.T, doc []byte, itemsPath, cursorPath, redactPath string) {
		if len(doc) > 1<<16 {
			return
		}
		agg := map[string]any{"aggregation_mode": "summary_plus_samples", "group_by": "$.level", "sample_size": 2}
		if itemsPath != "" {
			agg["items_path"] = itemsPath
		}
		if cursorPath != "" {
			agg["cursor_path"] = cursorPath
		}
		safety := map[string]any{"max_field_length": 32, "drop_duplicates": true}
		if redactPath != "" {
			safety["redacted_paths"] = []string{redactPath}
		}
		aj, _ := json.Marshal(agg)
		sj, _ := json.Marshal(safety)
		bad := false
		raw, _ := json.Marshal(map[string]any{"limits": json.RawMessage(`{"max_bytes":4096,"max_items":50}`),
			"aggregation": json.RawMessage(aj), "safety": json.RawMessage(sj)})
		ex := opsfile.ParseExecutionJSON(opsfile.ModeWindow, raw, func(string, string, ...any) { bad = true })
		if bad {
			return // a path that does not parse is refused at load
		}
		out, _ := runCollector(t, ex, "", string(doc), string(doc))
		var w struct {
			Items []json.RawMessage
			Stats window.Stats
		}
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("result is not JSON: %v\n%s", err, out)
		}
		s := w.Stats
		if s.Bytes > 4096 || s.Counted > 50 || s.Received < s.Counted || s.Counted < s.Returned ||
			s.Counted+s.DroppedDuplicates+s.SampledOut > s.Received {
			t.Fatalf("inconsistent stats %+v", s)
		}
		if len(ex.Paths.Redact) == 0 || strings.Contains(redactPath, "?") {
			// A filter may select a node only once its neighbours were
			// redacted: only filter-free paths have a fixed selection.
			return
		}
		for _, it := range w.Items {
			v, err := jsonpath.Decode(it)
			if err != nil {
				t.Fatalf("item is not JSON: %s", it)
			}
			for _, node := range ex.Paths.Redact[0].Select(v) {
				if str, ok := node.(string); !ok || str != redact.Mark {
					t.Fatalf("path %q selects an unredacted node %v in item %s", redactPath, node, it)
				}
			}
		}
	})
}
