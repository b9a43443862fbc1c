package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

// expandFile is the expansion of behavior "file": a tool per line of the
// file, which "!" fails.
func expandFile(path string) ([]sdk.Tool, []sdk.Diagnostic) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf("file", "%v", err)}
	}
	var tools []sdk.Tool
	for _, n := range strings.Fields(string(b)) {
		if n == "!" {
			return nil, []sdk.Diagnostic{sdk.Errorf("file", "the upstream is broken")}
		}
		tools = append(tools, sdk.Tool{Name: n, Description: "Tool " + n,
			InputSchema: json.RawMessage(`{"type":"object"}`), Config: json.RawMessage(`{"behavior":"echo"}`)})
	}
	return tools, nil
}

// fileEntryBetween is an operations file of an entry "files" expanded
// from file (behavior "file") between two plain entries, first and last.
func fileEntryBetween(file string) string {
	cfg, _ := json.Marshal(map[string]string{"behavior": "file", "file": file})
	return `
adapters:
  test:
    command: %s
    env: {CRANK_HOST_TEST_ADAPTER: "1"}
operations:
  - name: first
    description: First.
    adapter: test
    config: {behavior: echo}
  - name: files
    adapter: test
    config: ` + string(cfg) + `
  - name: last
    description: Last.
    adapter: test
    config: {behavior: echo}
`
}

// An entry expanded again serves its new tools in place of its old ones,
// in one step; the same tools change nothing; a failed expansion, a
// collision with another entry's tool and an invalid name keep the last
// good tools, with an error naming the entry (and the other entry).
func TestReexpand(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a b")
	f, err := newFixture(t, fileEntryBetween(file))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	names := func() string {
		var out []string
		for _, op := range f.h.Operations() {
			out = append(out, op.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names(); got != "first a b last" {
		t.Fatalf("loaded: %s", got)
	}
	write("a b c")
	if changed, err := f.h.Reexpand(ctx, "files"); err != nil || !changed || names() != "first a b c last" {
		t.Fatalf("added c: %v %v %s", changed, err, names())
	}
	if res := call(t, f.h, "c", `{}`); res.IsError {
		t.Fatalf("calling c: %s", res.Text)
	}
	if changed, err := f.h.Reexpand(ctx, "files"); err != nil || changed {
		t.Fatalf("unchanged: %v %v", changed, err)
	}
	for _, c := range []struct{ tools, want string }{
		{"a last", `tool "last" of entry "files": duplicate tool name: entry "last" serves it too`},
		{"a !", `entry "files": config.file: the upstream is broken`},
		{"a b-/", `entry "files": the adapter derived an invalid tool name "b-/"`},
	} {
		write(c.tools)
		if changed, err := f.h.Reexpand(ctx, "files"); changed || err == nil || err.Error() != c.want {
			t.Errorf("%s: %v %v, want %s", c.tools, changed, err, c.want)
		}
		if got := names(); got != "first a b c last" {
			t.Errorf("%s: tools now %s", c.tools, got)
		}
	}
	write("c")
	if changed, err := f.h.Reexpand(ctx, "files"); err != nil || !changed || names() != "first c last" || !f.h.Tool("c").Served() || f.h.Tool("a").Served() {
		t.Fatalf("down to c: %v %v %s", changed, err, names())
	}
	if changed, err := f.h.Reexpand(ctx, "first"); err != nil || changed || !slices.Contains(strings.Fields(names()), "first") {
		t.Fatalf("an entry the adapter expands as itself: %v %v", changed, err)
	}
	if changed, err := f.h.Reexpand(ctx, "nope"); err != nil || changed {
		t.Fatalf("no such entry: %v %v", changed, err)
	}
}
