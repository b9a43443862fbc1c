package opsfile_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/host/window"
)

// The entry's schema builds from OperationDecl's tags, and the bounds the
// code keeps for itself agree with them.
func TestOperationSchema(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal(opsfile.OperationSchema(), &s); err != nil {
		t.Fatal(err)
	}
	limits := s.Properties["limits"]
	if limits == nil || limits.Title != "Collection limits" || *limits.Properties["max_items"].Maximum != window.MaxItemsLimit ||
		opsfile.MaxSessionBufferItems >= window.MaxItemsLimit {
		t.Fatalf("limits: %+v", limits)
	}
	var modes []string
	for _, m := range s.Properties["mode"].Enum {
		modes = append(modes, m.(string))
	}
	if !slices.Equal(modes, []string{string(opsfile.ModeUnary), string(opsfile.ModeWindow), string(opsfile.ModeSession), string(opsfile.ModeAsyncJob)}) {
		t.Errorf("modes: %v", modes)
	}
	var presets []string
	for _, p := range s.Properties["preset"].Enum {
		presets = append(presets, p.(string))
	}
	if !slices.Equal(presets, opsfile.PresetNames()) {
		t.Errorf("the preset tag lists %v, the host knows %v", presets, opsfile.PresetNames())
	}
	if _, err := s.Resolve(nil); err != nil {
		t.Errorf("the schema does not resolve: %v", err)
	}
	// Every field in the export's order is a property, and the other way.
	if got := opsfile.EntryFields(); len(got) != len(s.Properties) || !slices.Contains(got, "limits") || got[0] != "name" {
		t.Errorf("entry fields: %v", got)
	}
}

var updateReference = flag.Bool("update-reference", false, "rewrite the reference pages in docs/reference")

// The reference tables of an entry's fields and of a rate limit's in
// docs/reference are generated from their schemas (OperationDecl's and
// ratelimit.Limit's tags): this test fails when one is stale, and
// -update-reference rewrites it.
func TestEntryReference(t *testing.T) {
	for _, ref := range []struct {
		page       string
		begin, end string
		schema     json.RawMessage
		modes      bool
	}{
		{"../../docs/reference/operation-entry.md", "<!-- entry reference: generated from opsfile.OperationDecl by `go test ./host/opsfile -run TestEntryReference -update-reference`; do not edit -->\n",
			"<!-- end of the entry reference -->\n", opsfile.OperationSchema(), true},
		{"../../docs/reference/rate-limit.md", "<!-- rate limit reference: generated from ratelimit.Limit by `go test ./host/opsfile -run TestEntryReference -update-reference`; do not edit -->\n",
			"<!-- end of the rate limit reference -->\n", ratelimit.Schema(), false},
	} {
		doc, err := os.ReadFile(ref.page)
		if err != nil {
			t.Fatal(err)
		}
		before, rest, ok := strings.Cut(string(doc), ref.begin)
		_, after, ok2 := strings.Cut(rest, ref.end)
		if !ok || !ok2 {
			t.Fatalf("%s has no %q … %q section", ref.page, ref.begin, ref.end)
		}
		want := entryReference(ref.schema, ref.modes)
		if got, _, _ := strings.Cut(rest, ref.end); got == want {
			continue
		}
		if !*updateReference {
			t.Fatalf("%s is stale: run go test ./host/opsfile -run TestEntryReference -update-reference", ref.page)
		}
		if err := os.WriteFile(ref.page, []byte(before+ref.begin+want+ref.end+after), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// entryReference renders the schema as a Markdown table, a row per field
// in the schema's order (a block's fields after it), by JSON pointer
// within the entry; with modes, a column of the modes a field applies to.
func entryReference(raw json.RawMessage, withModes bool) string {
	var b strings.Builder
	if withModes {
		b.WriteString("| field | type | default | allowed | modes | what it is |\n| --- | --- | --- | --- | --- | --- |\n")
	} else {
		b.WriteString("| field | type | default | allowed | what it is |\n| --- | --- | --- | --- | --- |\n")
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	var rows func(raw json.RawMessage, at string)
	rows = func(raw json.RawMessage, at string) {
		var s jsonschema.Schema
		var parts struct{ Properties json.RawMessage }
		_ = json.Unmarshal(raw, &s)
		_ = json.Unmarshal(raw, &parts)
		var props map[string]json.RawMessage
		_ = json.Unmarshal(parts.Properties, &props)
		for _, name := range keysOf(parts.Properties) {
			p := s.Properties[name]
			def := string(p.Default)
			if slices.Contains(s.Required, name) {
				def = "required"
			}
			var allowed []string
			for _, e := range p.Enum {
				allowed = append(allowed, fmt.Sprint(e))
			}
			switch {
			case p.Minimum != nil && p.Maximum != nil:
				allowed = append(allowed, num(p.Minimum)+" to "+num(p.Maximum))
			case p.ExclusiveMinimum != nil && p.Maximum != nil:
				allowed = append(allowed, "over "+num(p.ExclusiveMinimum)+", at most "+num(p.Maximum))
			}
			if p.Pattern != "" {
				allowed = append(allowed, "`"+p.Pattern+"`")
			}
			typ := p.Type
			if typ == "array" && p.Items != nil {
				typ = "list of " + p.Items.Type + "s"
			}
			var modes []string
			if m, ok := p.Extra["x-crank-modes"].([]any); ok {
				for _, x := range m {
					modes = append(modes, fmt.Sprint(x))
				}
			}
			if withModes {
				fmt.Fprintf(&b, "| `%s/%s` | %s | %s | %s | %s | %s |\n", at, name, typ, cell(def), cell(strings.Join(allowed, ", ")),
					strings.Join(modes, ", "), cell(p.Description))
			} else {
				fmt.Fprintf(&b, "| `%s/%s` | %s | %s | %s | %s |\n", at, name, typ, cell(def), cell(strings.Join(allowed, ", ")), cell(p.Description))
			}
			if len(p.Properties) > 0 {
				rows(props[name], at+"/"+name)
			}
		}
	}
	rows(raw, "")
	return b.String()
}

// keysOf lists the keys of a JSON object in the order written.
func keysOf(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		_ = dec.Decode(&skip)
	}
	return keys
}
