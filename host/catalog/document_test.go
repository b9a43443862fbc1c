package catalog_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
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
			if _, err := doc.Compile("catalog demo", host.LoadOptions{Dir: "../../demo", Expand: func(s string) string { return s },
				Allow: &host.CatalogAllow{Placeholders: []string{"env.*"}}}); err != nil {
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
		want       []catalog.Problem
	}{
		{"not yaml", "version: 1\nname: a: b\n", []catalog.Problem{{Line: 2}}},
		{"empty", "  \n", []catalog.Problem{{Pointer: ""}}},
		{"a list", "- a\n", []catalog.Problem{{Pointer: ""}}},
		{"unknown top field", "version: 1\noperation: []\n", []catalog.Problem{{Pointer: "/operation", Line: 2}}},
		{"adapters", "adapters:\n  x: {command: /bin/sh}\noperations: []\n", []catalog.Problem{{Pointer: "/adapters", Line: 1}}},
		{"version", "version: 2\n", []catalog.Problem{{Pointer: "/version", Line: 1}}},
		{"operations not a list", "operations: {a: 1}\n", []catalog.Problem{{Pointer: "/operations", Line: 1}}},
		{"unknown entry field", "operations:\n  - name: a\n    adapter: rest\n    confg: {}\n", []catalog.Problem{{Pointer: "/operations/0/confg", Line: 4}}},
		{"unknown annotation", "operations:\n  - name: a\n    annotations: {readonly: true}\n", []catalog.Problem{{Pointer: "/operations/0/annotations/readonly", Line: 3}}},
		{"wrong type", "operations:\n  - name: a\n    timeout: 5\n", []catalog.Problem{{Pointer: "/operations/0/timeout", Line: 3}}},
		{"wrong nested type", "operations:\n  - name: a\n    annotations: {read_only: yes}\n", []catalog.Problem{{Pointer: "/operations/0/annotations/read_only", Line: 3}}},
		{"duplicate", "operations:\n  - {name: a}\n  - {name: a}\n", []catalog.Problem{{Pointer: "/operations/1/name", Line: 3}}},
		{"json duplicate key", `{"operations": [], "operations": []}`, []catalog.Problem{{Line: 1}}},
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
    description: a window
    adapter: rest
    mode: window
    limits: {max_itemz: 3}
    config: {url: "http://x"}
  - description: no name
    adapter: rest
    config: {}
`))
	if probs != nil {
		t.Fatal(probs)
	}
	_, err := doc.Compile("catalog t", host.LoadOptions{})
	if err == nil {
		t.Fatal("compiled")
	}
	ps := catalog.ProblemsOf(err, doc, catalog.InFile)
	var ptrs []string
	for _, p := range ps {
		ptrs = append(ptrs, p.Pointer)
	}
	if !slices.Contains(ptrs, "/operations/1/limits/max_itemz") && !slices.Contains(ptrs, "/operations/1/limits") {
		t.Fatalf("pointers: %v (%+v)", ptrs, ps)
	}
	if !slices.Contains(ptrs, "/operations/2/name") {
		t.Fatalf("pointers: %v (%+v)", ptrs, ps)
	}
	// Placed as one entry's body, other entries' problems name them.
	ps = catalog.ProblemsOf(err, doc, catalog.AsEntry(1))
	for _, p := range ps {
		if p.Pointer != "" && !strings.HasPrefix(p.Pointer, "/limits") {
			t.Fatalf("entry-placed problem: %+v", p)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"limits.max_items", "/limits/max_items"},
		{"config.headers[0]", "/config/headers/0"},
		{"config.paths./users", "/config/paths/~1users"},
		{"name", "/name"},
		{"", ""},
	} {
		if got := catalog.FieldPointer(c.in); got != c.want {
			t.Errorf("FieldPointer(%q) = %q, want %q", c.in, got, c.want)
		}
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
