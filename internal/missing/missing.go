// Package missing is how a test that needs a tool the machine lacks (a
// browser, xmlsec1, an npm package, root) gives way: on CI it fails, for
// CI installs every tool (.ci/run); elsewhere it skips, or leaves out the
// part that needs the tool, and writes why to the file $CRANK_SKIPPED
// names, which `make test` prints at its end, so nothing is left out
// silently.
package missing

import (
	"fmt"
	"os"
	"testing"
)

// Tool ends the test: what is missing (e.g. "chromium is not installed")
// and how to get it (e.g. "apt-get install chromium").
func Tool(t testing.TB, what, install string) {
	t.Helper()
	t.Skip(Part(t, what, install))
}

// Part notes that the test leaves out the part that needs the tool, and
// returns the note; on CI it fails the test.
func Part(t testing.TB, what, install string) string {
	t.Helper()
	msg := fmt.Sprintf("%s (%s)", what, install)
	if os.Getenv("CI") != "" {
		t.Fatal(msg + ": CI installs it, so this is a failure")
	}
	if path := os.Getenv("CRANK_SKIPPED"); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), msg)
			f.Close()
		}
	}
	t.Log(msg + ": left out")
	return msg
}
