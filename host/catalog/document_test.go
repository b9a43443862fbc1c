package catalog_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
)

// Every demo operations file survives export and re-import unchanged: the
// same entries, placeholders as written, so a catalog exported for GitOps
// applies back to the same catalog.
func TestDemoFilesRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../demo/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("demo files: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			doc, probs := catalog.ParseDocument(data)
			if probs != nil {
				t.Fatalf("parse: %v", probs)
			}
			back, probs := catalog.ParseDocument(doc.YAML())
			if probs != nil {
				t.Fatalf("re-parse of the export: %v\n%s", probs, doc.YAML())
			}
			if string(back.JSON()) != string(doc.JSON()) {
				t.Fatalf("export changed the document:\n%s\n---\n%s", doc.JSON(), back.JSON())
			}
			if d := catalog.Diff(doc, back); len(d) != 0 {
				t.Fatalf("diff of a round trip: %+v", d)
			}
			if _, err := doc.Compile("catalog demo", opsfile.LoadOptions{Dir: "../../demo", Expand: func(s string) string { return s },
				Allow: &opsfile.CatalogAllow{Placeholders: []string{"env.*"}}}); err != nil {
				t.Fatalf("compile: %v", err)
			}
			if strings.Contains(string(data), "{env.CRANK_DEMO_TOKEN}") && !strings.Contains(string(doc.YAML()), "{env.CRANK_DEMO_TOKEN}") {
				t.Fatal("the placeholder was not kept as written")
			}
		})
	}
}

func TestParseDocumentPlacesProblems(t *testing.T) {
	cases := []struct {
		name, body string
		want       []opsfile.Problem
	}{
		{"not yaml", "version: 1\nname: a: b\n", []opsfile.Problem{{Line: 2}}},
		{"empty", "  \n", []opsfile.Problem{{Pointer: ""}}},
		{"a list", "- a\n", []opsfile.Problem{{Pointer: ""}}},
		{"unknown top field", "version: 1\noperation: []\n", []opsfile.Problem{{Pointer: "/operation", Line: 2}}},
		{"adapters", "adapters:\n  x: {command: /bin/sh}\noperations: []\n", []opsfile.Problem{{Pointer: "/adapters", Line: 1}}},
		{"version", "version: 2\n", []opsfile.Problem{{Pointer: "/version", Line: 1}}},
		{"operations not a list", "operations: {a: 1}\n", []opsfile.Problem{{Pointer: "/operations", Line: 1}}},
		{"unknown entry field", "operations:\n  - name: a\n    adapter: rest\n    confg: {}\n", []opsfile.Problem{{Pointer: "/operations/0/confg", Line: 4}}},
		{"unknown annotation", "operations:\n  - name: a\n    annotations: {readonly: true}\n", []opsfile.Problem{{Pointer: "/operations/0/annotations/readonly", Line: 3}}},
		{"wrong type", "operations:\n  - name: a\n    timeout: 5\n", []opsfile.Problem{{Pointer: "/operations/0/timeout", Line: 3}}},
		{"wrong nested type", "operations:\n  - name: a\n    annotations: {read_only: yes}\n", []opsfile.Problem{{Pointer: "/operations/0/annotations/read_only", Line: 3}}},
		{"duplicate", "operations:\n  - {name: a}\n  - {name: a}\n", []opsfile.Problem{{Pointer: "/operations/1/name", Line: 3}}},
		{"json duplicate key", `{"operations": [], "operations": []}`, []opsfile.Problem{{Line: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, probs := catalog.ParseDocument([]byte(c.body))
			if len(probs) != len(c.want) {
				t.Fatalf("problems: %+v", probs)
			}
			for i, w := range c.want {
				if probs[i].Pointer != w.Pointer || (w.Line != 0 && probs[i].Line != w.Line) || probs[i].Message == "" {
					t.Errorf("problem %d: %+v, want pointer %q line %d", i, probs[i], w.Pointer, w.Line)
				}
			}
		})
	}
	_, probs := catalog.ParseDocument([]byte("operations:\n  - name: a\n    confg: {}\n"))
	if !strings.Contains(probs[0].Message, `did you mean "config"`) {
		t.Fatalf("suggestion: %+v", probs)
	}
	entry, probs := catalog.ParseEntry([]byte("name: a\nadapter: rest\nconfig: {url: 'http://x/{env.T}'}\n"))
	if probs != nil || string(entry) != `{"adapter":"rest","config":{"url":"http://x/{env.T}"},"name":"a"}` {
		t.Fatalf("entry: %s %v", entry, probs)
	}
	if _, probs := catalog.ParseEntry([]byte("name: a\nmode: 3\n")); len(probs) != 1 || probs[0].Pointer != "/mode" || probs[0].Line != 2 {
		t.Fatalf("entry problem: %+v", probs)
	}
}

// The host's load errors become problems at the entry's field.
func TestProblemsOfHostErrors(t *testing.T) {
	doc, probs := catalog.ParseDocument([]byte(`operations:
  - name: ok
    description: fine
    adapter: rest
    config: {url: "http://x"}
  - name: bad
    description: limits of a unary operation
    adapter: rest
    limits: {max_items: 3}
    config: {url: "http://x"}
  - name: stats
    description: a window without its value
    adapter: rest
    mode: window
    aggregation: {aggregation_mode: stats}
    config: {}
`))
	if probs != nil {
		t.Fatal(probs)
	}
	_, err := doc.Compile("catalog t", opsfile.LoadOptions{})
	if err == nil {
		t.Fatal("compiled")
	}
	ps := catalog.ProblemsOf(err, "catalog t", doc, catalog.InFile)
	var ptrs []string
	for _, p := range ps {
		ptrs = append(ptrs, p.Pointer)
	}
	if !slices.Equal(ptrs, []string{"/operations/1/limits", "/operations/2/aggregation/value_path"}) {
		t.Fatalf("pointers: %v (%+v)", ptrs, ps)
	}
	// Placed as one entry's body, other entries' problems name them.
	ps = catalog.ProblemsOf(err, "catalog t", doc, catalog.AsEntry(1))
	if len(ps) != 2 || ps[0].Pointer != "/limits" || ps[1].Pointer != "" || !strings.HasPrefix(ps[1].Message, `operation "stats" of the catalog: /aggregation/value_path: is required`) {
		t.Fatalf("entry-placed problems: %+v", ps)
	}
}

func TestDiffNamesFields(t *testing.T) {
	a, _ := catalog.ParseDocument([]byte("operations:\n  - {name: x, adapter: rest, timeout: 5s, config: {url: a, q: [1, 2]}}\n  - {name: gone, adapter: rest, config: {}}\n"))
	b, _ := catalog.ParseDocument([]byte("operations:\n  - {name: x, adapter: rest, config: {url: b, q: [1, 3]}, title: T}\n  - {name: new, adapter: rest, config: {}}\n"))
	d := catalog.Diff(a, b)
	if len(d) != 3 || d[0].Operation != "x" || d[0].Change != "changed" || d[1].Change != "added" || d[2].Change != "removed" {
		t.Fatalf("diff: %+v", d)
	}
	var got []string
	for _, f := range d[0].Fields {
		got = append(got, f.Pointer+" "+string(f.From)+"→"+string(f.To))
	}
	want := []string{`/config/q/1 2→3`, `/config/url "a"→"b"`, `/timeout "5s"→`, `/title →"T"`}
	if !slices.Equal(got, want) {
		t.Fatalf("fields:\n%v\nwant\n%v", got, want)
	}
}

// An entry gets the same problems, to the byte, from an operations file
// (opsfile.Parse) and from the catalog (ParseEntry, then the compile of the
// catalog it joins): one decoder and one problem type for both.
func TestEntryProblemsAlike(t *testing.T) {
	same := func(s string) string { return s }
	for _, entry := range []string{
		`{"name": "a", "descripton": "d", "adapter": "rest", "limits": {"max_itemz": 1, "max_bytes": 0}, "timeout": 5, "mode": "sideways", "config": {}}`,
		`{"name": "a b", "description": "d", "adapter": "rest", "config": {}}`,
		`{"description": "d", "adapter": "rest", "config": {}}`,
		`[1]`,
		`{"name": "a", "description": "d", "adapter": "rest", "annotations": {"readonly": true, "read_only": "yes"}, "scope": "team", "config": {}}`,
		`{"name": "a", "description": "d", "adapter": "rest", "limits": {"max_items": 3}, "family": {"poll_tool_name": "p"}, "config": {"url": "x"}}`,
		`{"name": "a", "description": "d", "adapter": "rest", "mode": "window", "aggregation": {"aggregation_mode": "stats", "group_by": "$.x"},
		  "safety": {"truncate_item_fields": false, "max_field_length": 100}, "timeout": "1s", "config": {}}`,
		`{"name": "a", "adapter": "rest", "mode": "session", "limits": {"window_duration_ms": 5, "idle_timeout_ms": 0, "max_items": 200000}, "config": {}}`,
		`{"name": "a", "adapter": "rest", "mode": "async_job", "job": {"result_path": "$.x", "retention_ms": 0}, "config": {}}`,
	} {
		opts := opsfile.LoadOptions{Expand: same, Allow: &opsfile.CatalogAllow{}}
		_, err := opsfile.Parse("ops.json", []byte(`{"operations": [`+entry+`]}`), opts)
		var fromFile opsfile.Problems
		for _, p := range opsfile.ProblemsIn(err) {
			_, p.Pointer = opsfile.EntryOf(p.Pointer)
			p.File, p.Line = "", 0
			fromFile = append(fromFile, p)
		}
		raw, fromCatalog := catalog.ParseEntry([]byte(entry))
		if fromCatalog == nil {
			doc := (&catalog.Document{}).With(raw)
			_, err := doc.Compile("catalog t", opts)
			fromCatalog = catalog.ProblemsOf(err, "catalog t", doc, catalog.AsEntry(0))
		}
		for i := range fromCatalog {
			fromCatalog[i].Line = 0
		}
		f, _ := json.Marshal(fromFile)
		c, _ := json.Marshal(fromCatalog)
		if len(fromFile) == 0 || string(f) != string(c) {
			t.Errorf("%s:\nfile:    %s\ncatalog: %s", entry, f, c)
		}
	}
}

// A catalog's rate limits survive storing, export and re-import, editing
// an entry keeps them, a diff names the limit changed, and the compiled
// catalog's limits are its own budgets (their ID names the catalog).
func TestDocumentRateLimits(t *testing.T) {
	t.Parallel()
	src := `operations:
  - {name: get_user, description: d, adapter: rest, config: {url: "https://api.example.com/users"}}
rate_limits:
  - {name: users, rate: 10/m, per: user, tool: get_user}
  - {name: all, rate: 100/s, fleet: true}
`
	doc, probs := catalog.ParseDocument([]byte(src))
	if probs != nil {
		t.Fatal(probs)
	}
	back, err := catalog.Decode(doc.JSON())
	if err != nil || len(back.RateLimits) != 2 {
		t.Fatalf("stored and read: %v %v", back, err)
	}
	again, probs := catalog.ParseDocument(doc.YAML())
	if probs != nil || string(again.JSON()) != string(doc.JSON()) {
		t.Fatalf("export and re-import:\n%s\n%s\n%v", doc.YAML(), again.JSON(), probs)
	}
	edited := doc.With(json.RawMessage(`{"name":"get_user","description":"e","adapter":"rest","config":{}}`))
	if len(edited.RateLimits) != 2 || len(doc.Without("get_user").RateLimits) != 2 {
		t.Fatal("editing an entry lost the rate limits")
	}
	changed := doc.WithRateLimits([]json.RawMessage{json.RawMessage(`{"name":"users","rate":"20/m","per":"user","tool":"get_user"}`)})
	cs := catalog.Diff(doc, changed)
	if len(cs) != 2 || cs[0].RateLimit != "users" || cs[0].Change != "changed" || cs[0].Fields[0].Pointer != "/rate" ||
		cs[1].RateLimit != "all" || cs[1].Change != "removed" {
		t.Errorf("diff %+v", cs)
	}
	f, err := doc.Compile("catalog c", opsfile.LoadOptions{Allow: &opsfile.CatalogAllow{Upstreams: []string{"api.example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.RateLimits) != 2 || f.RateLimits[0].Namespace != "catalog c" {
		t.Fatalf("compiled limits %+v", f.RateLimits)
	}
	own := f.RateLimits[0]
	own.Namespace = ""
	if own.ID() == f.RateLimits[0].ID() {
		t.Error("a catalog's limit shares the ID of the handler's limit of the same definition")
	}
	if _, probs := catalog.ParseDocument([]byte("operations: []\nrate_limits: [{name: x, rate: often}]")); len(probs) != 1 ||
		probs[0].Pointer != "/rate_limits/0/rate" || probs[0].Line != 2 {
		t.Errorf("a bad limit: %v", probs)
	}
}
