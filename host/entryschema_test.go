package host_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/host"
)

// The entry's schema builds from OperationDecl's tags, and the bounds the
// code keeps for itself agree with them.
func TestOperationSchema(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal(host.OperationSchema(), &s); err != nil {
		t.Fatal(err)
	}
	limits := s.Properties["limits"]
	if limits == nil || limits.Title != "Collection limits" || *limits.Properties["max_items"].Maximum != host.MaxItemsLimit ||
		host.MaxSessionBufferItems >= host.MaxItemsLimit {
		t.Fatalf("limits: %+v", limits)
	}
	var modes []string
	for _, m := range s.Properties["mode"].Enum {
		modes = append(modes, m.(string))
	}
	if !slices.Equal(modes, []string{string(host.ModeUnary), string(host.ModeWindow), string(host.ModeSession), string(host.ModeAsyncJob)}) {
		t.Errorf("modes: %v", modes)
	}
	var presets []string
	for _, p := range s.Properties["preset"].Enum {
		presets = append(presets, p.(string))
	}
	if !slices.Equal(presets, host.PresetNames()) {
		t.Errorf("the preset tag lists %v, the host knows %v", presets, host.PresetNames())
	}
	if _, err := s.Resolve(nil); err != nil {
		t.Errorf("the schema does not resolve: %v", err)
	}
	// Every field in the export's order is a property, and the other way.
	if got := host.EntryFields(); len(got) != len(s.Properties) || !slices.Contains(got, "limits") || got[0] != "name" {
		t.Errorf("entry fields: %v", got)
	}
}

func TestFieldPointer(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"limits.max_items", "/limits/max_items"},
		{"headers[0]", "/headers/0"},
		{"paths./users", "/paths/~1users"},
		{"a~b", "/a~0b"},
		{"", ""},
	} {
		if got := host.FieldPointer(c.in); got != c.want {
			t.Errorf("FieldPointer(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
