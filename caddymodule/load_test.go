package caddymodule

import (
	"os"
	"regexp"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/configblock"
)

// The Caddy subcommand is the command line's first argument that is not a
// flag: only `validate` runs the load in Provision.
func TestCaddyCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"crank", "validate", "--config", "Caddyfile"}, "validate"},
		{[]string{"crank", "run", "--config", "validate"}, "run"},
		{[]string{"/usr/bin/caddy"}, ""},
		{nil, ""},
	} {
		if got := caddyCommand(c.args); got != c.want {
			t.Errorf("%q: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestLoadFieldsDocumented holds the guide's crank block (docs/guide/configure-an-endpoint.md) to
// host.LoadConfig: every field is shown there, with its values.
func TestLoadFieldsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/guide/configure-an-endpoint.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configblock.Fields[host.LoadConfig]() {
		re := regexp.MustCompile(`(?m)^\t\t` + f.Name + `\s+` + f.Enum[0] + `\s+#.*` + f.Enum[1])
		if !re.Match(readme) {
			t.Errorf("configure-an-endpoint.md's crank block does not show %s %v (%s)", f.Name, f.Enum, f.Doc)
		}
	}
}
