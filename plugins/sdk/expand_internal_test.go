package sdk

import (
	"bytes"
	"strings"
	"testing"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// TestFitExpansion: an expansion over the protocol's message limit is
// answered with an error naming its size, its largest tool and the
// remedy; one within it goes as it is.
func TestFitExpansion(t *testing.T) {
	t.Parallel()
	schema := bytes.Repeat([]byte("x"), 4<<20)
	var tools []*adapterv1.Tool
	for i := range 20 {
		tools = append(tools, &adapterv1.Tool{Name: "t" + string(rune('a'+i)), OutputSchemaJson: schema})
	}
	small := &adapterv1.ExpandOperationResponse{Tools: tools[:2]}
	if got := fitExpansion(small); got != small {
		t.Fatal("an expansion within the limit was changed")
	}
	got := fitExpansion(&adapterv1.ExpandOperationResponse{Tools: tools,
		Diagnostics: []*adapterv1.Diagnostic{{Severity: adapterv1.Diagnostic_SEVERITY_WARNING, Message: "kept"}}})
	if len(got.GetTools()) != 0 || len(got.GetDiagnostics()) != 2 {
		t.Fatalf("want no tools and the warning plus one error, got %d tools, %v", len(got.GetTools()), got.GetDiagnostics())
	}
	d := got.GetDiagnostics()[1]
	if d.GetSeverity() != adapterv1.Diagnostic_SEVERITY_ERROR {
		t.Errorf("severity %v", d.GetSeverity())
	}
	for _, want := range []string{"20 tools in 80.0 MiB", "64 MiB", "ta, takes 4.0 MiB", "split the entry", "output_schema_limits"} {
		if !strings.Contains(d.GetMessage(), want) {
			t.Errorf("message %q lacks %q", d.GetMessage(), want)
		}
	}
}
