package caddymodule

import (
	"fmt"
	"os"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

// TestMain lets the test binary stand in for the crank executable as an
// adapter process: the gateway starts built-in adapters as
// `os.Executable() crank-adapter <name>`, and in a test os.Executable() is
// this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == AdapterCommand {
		newAdapter, ok := builtins[os.Args[2]]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown built-in adapter %q\n", os.Args[2])
			os.Exit(2)
		}
		if err := sdk.Serve(newAdapter()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
