// Package configtest ties a built-in adapter's config declaration (an
// sdk.Config) to its documentation and its diagnostics, for the adapters'
// tests (see Check).
package configtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/plugins/sdk"
)

// docField matches a field of a YAML example in a doc comment, commented
// out or not: its indentation and its name.
var docField = regexp.MustCompile(`^//\t(?:# ?)?( *)([a-z_][a-z0-9_]*):`)

// docFields returns the config fields that the first YAML example after
// the heading ("# Config") in the doc comment of file names, as dotted
// paths (a field indented under another as parent.child).
func docFields(t testing.TB, file, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	i := slices.Index(lines, "// "+heading)
	if i < 0 {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	for i < len(lines) && !strings.HasPrefix(lines[i], "//\t") {
		i++
	}
	var out, parents []string
	for ; i < len(lines) && strings.HasPrefix(lines[i], "//\t"); i++ {
		m := docField.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		depth := len(m[1]) / 2
		if depth > len(parents) {
			continue // a value's own structure
		}
		parents = append(parents[:depth], m[2])
		out = append(out, strings.Join(parents, "."))
	}
	if len(out) == 0 {
		t.Fatalf("%s: no config example after %q", file, heading)
	}
	return out
}

// Case is what Check checks a config declaration against.
type Case struct {
	// Doc is the file whose doc comment shows the config; default doc.go.
	Doc string
	// Headings name the doc comment's sections whose first YAML example
	// shows config fields; default "# Config".
	Headings []string
	// BaseDir is the operations file directory the Good configs' files are
	// relative to.
	BaseDir string
	// Good configs (any JSON values) have no diagnostics.
	Good []any
	// Valid configs are valid against the schema, whatever their
	// diagnostics (values the schema cannot judge).
	Valid []any
}

// Check checks the config declaration that newConfig returns: every field
// the documentation shows is in the published schema, every property is
// described, the Good and Valid configs are valid against the schema, the
// Good configs have no diagnostics, and a misspelt member (its first
// letter doubled) of any object of a Good config that the schema declares
// is an error at its dotted path suggesting the member.
func Check[C, P any](t *testing.T, newConfig func() *sdk.Config[C, P], c Case) {
	t.Helper()
	schema, err := newConfig().Schema()
	if err != nil {
		t.Fatal(err)
	}
	if c.Doc == "" {
		c.Doc = "doc.go"
	}
	if c.Headings == nil {
		c.Headings = []string{"# Config"}
	}
	for _, h := range c.Headings {
		documented(t, schema, docFields(t, c.Doc, h))
	}
	described(t, schema)
	valid(t, schema, c.Valid...)
	dir := c.BaseDir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			t.Fatal(err)
		}
	}
	good(t, schema, func(raw json.RawMessage) []sdk.Diagnostic {
		return newConfig().Get(&sdk.Operation{Config: raw, BaseDir: dir}).Diagnostics()
	}, c.Good...)
}

// node is a schema as a JSON object.
type node = map[string]any

func parse(t testing.TB, raw json.RawMessage) node {
	t.Helper()
	var n node
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatalf("the config schema is not a JSON object: %v", err)
	}
	return n
}

// property returns the subschema of the field at a dotted path (a path
// may name a map's keys).
func property(root node, path string) node {
	n := root
	for _, seg := range strings.Split(path, ".") {
		props, _ := n["properties"].(node)
		next, _ := props[seg].(node)
		if next == nil && props == nil {
			next, _ = n["additionalProperties"].(node) // seg is a map key
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// documented checks that every field in fields is a property of schema.
func documented(t testing.TB, schema json.RawMessage, fields []string) {
	t.Helper()
	root := parse(t, schema)
	for _, f := range fields {
		if property(root, f) == nil {
			t.Errorf("the documentation shows the field %s, the config schema does not have it", f)
		}
	}
}

// described checks that every property in schema, at every depth, has a
// description.
func described(t testing.TB, schema json.RawMessage) {
	t.Helper()
	var walk func(path string, n node)
	walk = func(path string, n node) {
		props, _ := n["properties"].(node)
		for name, p := range props {
			p, _ := p.(node)
			if p == nil {
				continue
			}
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("config field %s%s has no description (a jsonschema tag)", path, name)
			}
			walk(path+name+".", p)
		}
		for _, k := range []string{"additionalProperties", "items"} {
			if sub, ok := n[k].(node); ok {
				walk(path+"*.", sub)
			}
		}
	}
	walk("", parse(t, schema))
}

// valid checks that each config is valid against schema.
func valid(t testing.TB, schema json.RawMessage, configs ...any) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("the config schema does not resolve: %v", err)
	}
	for _, c := range configs {
		raw := rawJSON(t, c)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Errorf("config %s is not valid against the published schema: %v", raw, err)
		}
	}
}

// good checks that each config has no diagnostics, is
// valid against schema and, through misspelt, that a misspelt member of
// it is named with a suggestion. diagnose returns the diagnostics of a
// raw config.
func good(t testing.TB, schema json.RawMessage, diagnose func(config json.RawMessage) []sdk.Diagnostic, configs ...any) {
	t.Helper()
	valid(t, schema, configs...)
	for _, c := range configs {
		raw := rawJSON(t, c)
		if ds := diagnose(raw); len(ds) != 0 {
			t.Errorf("config %s: %v", raw, ds)
			continue
		}
		misspelt(t, schema, c, diagnose)
	}
}

// rawJSON is a config written as JSON text (a string) or as a Go value.
func rawJSON(t testing.TB, c any) json.RawMessage {
	t.Helper()
	if s, ok := c.(string); ok {
		return json.RawMessage(s)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// misspelt checks, for every object of the config good that the schema
// declares with its own properties, that a misspelt member (its first
// letter doubled) is an error at its dotted path suggesting the member.
// diagnose returns the diagnostics of a raw config.
func misspelt(t testing.TB, schema json.RawMessage, good any, diagnose func(config json.RawMessage) []sdk.Diagnostic) {
	t.Helper()
	var cfg any
	if err := json.Unmarshal(rawJSON(t, good), &cfg); err != nil {
		t.Fatal(err)
	}
	checked := 0
	var walk func(path string, v any, s node)
	walk = func(path string, v any, s node) {
		switch v := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(node)
			if props == nil {
				if sub, ok := s["additionalProperties"].(node); ok {
					for k, x := range v {
						walk(path+k+".", x, sub)
					}
				}
				return
			}
			for k, x := range v {
				sub, _ := props[k].(node)
				if sub == nil {
					continue
				}
				typo := k[:1] + k
				v[typo] = x
				raw, _ := json.Marshal(cfg)
				delete(v, typo)
				checked++
				want := sdk.Diagnostic{Severity: sdk.SeverityError, Field: path + typo, Message: fmt.Sprintf("unknown field (did you mean %q?)", k)}
				if ds := diagnose(raw); !slices.Contains(ds, want) {
					t.Errorf("config %s: want the diagnostic %s: %s, got %v", raw, want.Field, want.Message, ds)
				}
				walk(path+k+".", x, sub)
			}
		case []any:
			if sub, ok := s["items"].(node); ok {
				for i, x := range v {
					walk(fmt.Sprintf("%s[%d].", strings.TrimSuffix(path, "."), i), x, sub)
				}
			}
		}
	}
	walk("", cfg, parse(t, schema))
	if checked == 0 {
		t.Error("the config has no field the schema declares")
	}
}
