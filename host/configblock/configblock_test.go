package configblock_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/configblock"
)

type block struct {
	Name    string   `json:"name" jsonschema:"A name."`
	Mode    string   `json:"mode,omitempty" enum:"on,off" jsonschema:"On or off."`
	Tags    []string `json:"tags,omitempty" jsonschema:"Tags."`
	Count   int      `json:"count,omitempty"`
	On      bool     `json:"on,omitempty"`
	Ratio   float64  `json:"ratio,omitempty"`
	private string
}

// Fields lists the string and []string fields with their docs and enums;
// Set takes one value for a string, one or more for a list, and names
// what is wrong; Expand rewrites every value.
func TestBlock(t *testing.T) {
	t.Parallel()
	fs := configblock.Fields[block]()
	var names []string
	for _, f := range fs {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"name", "mode", "tags", "count", "on"}) || fs[0].Doc != "A name." ||
		!slices.Equal(fs[1].Enum, []string{"on", "off"}) || !fs[2].List || fs[0].List {
		t.Fatalf("fields %+v", fs)
	}
	var b block
	for _, c := range []struct {
		name string
		vs   []string
		want string
	}{
		{"name", []string{"a"}, ""},
		{"name", []string{"a", "b"}, "name: want one value"},
		{"tags", []string{"x", "y"}, ""},
		{"tags", nil, "tags: want one or more values"},
		{"count", []string{"1"}, ""},
		{"count", []string{"x"}, `count: want a whole number, got "x"`},
		{"on", nil, ""},
		{"on", []string{"maybe"}, `on: want true or false, got "maybe"`},
		{"ratio", []string{"1"}, `unrecognized option "ratio" (name, mode, tags, count, on)`},
	} {
		err := configblock.Set(&b, c.name, c.vs)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Set(%s, %q): %v, want %q", c.name, c.vs, err, c.want)
		}
	}
	configblock.Expand(&b, strings.ToUpper)
	if b.Name != "A" || !slices.Equal(b.Tags, []string{"X", "Y"}) || b.private != "" || b.Count != 1 || !b.On {
		t.Errorf("after Expand: %+v", b)
	}
}

// CheckEnums names a field whose value its enum does not list; an empty
// value is the default.
func TestCheckEnums(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		b    block
		want string
	}{
		{block{}, ""},
		{block{Mode: "on"}, ""},
		{block{Mode: "maybe"}, `mode: must be on or off, got "maybe"`},
	} {
		err := configblock.CheckEnums(&c.b)
		if (err == nil) != (c.want == "") || err != nil && err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.b, err, c.want)
		}
	}
}

// A default tag gives an empty field's value and ends its doc.
func TestDefault(t *testing.T) {
	t.Parallel()
	type block struct {
		Every string `json:"every,omitempty" default:"5s" jsonschema:"How often."`
		Name  string `json:"name,omitempty"`
	}
	fs := configblock.Fields[block]()
	if fs[0].Default != "5s" || fs[0].Doc != "How often. Default: 5s." || fs[1].Default != "" {
		t.Errorf("fields: %+v", fs)
	}
	var b block
	if v := configblock.Value(&b, "every"); v != "5s" {
		t.Errorf("empty: %q", v)
	}
	b.Every = "1m"
	if v := configblock.Value(&b, "every"); v != "1m" {
		t.Errorf("set: %q", v)
	}
}
