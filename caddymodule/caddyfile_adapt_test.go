package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	// The goldens use standard directives (bind, respond, path matchers).
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// updateGolden rewrites the JSON half of every adapt golden with the
// adapter's current output: go test ./caddymodule/ -run TestCaddyfileAdapt -update
// Review the diff before keeping it.
var updateGolden = flag.Bool("update", false, "rewrite the testdata/caddyfile_adapt goldens with the current output")

const adaptDir = "testdata/caddyfile_adapt"

// goldenSeparator splits a golden into its Caddyfile and expected output, as
// in Caddy's own caddytest/integration/caddyfile_adapt tests.
const goldenSeparator = "----------"

var crlf = regexp.MustCompile(`\r?\n`)

// TestCaddyfileAdapt adapts each testdata/caddyfile_adapt/*.caddyfiletest
// with the caddyfile adapter. When the part after the separator is JSON, the
// adapted config must equal it; otherwise adapting must fail with an error
// containing that text.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(adaptDir, "*.caddyfiletest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no goldens in %s", adaptDir)
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".caddyfiletest"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			caddyfileText, expected, ok := strings.Cut(crlf.ReplaceAllString(string(data), "\n"), goldenSeparator)
			if !ok {
				t.Fatalf("%s: no %q line between the Caddyfile and the expected output", name, goldenSeparator)
			}
			caddyfileText = strings.TrimSpace(caddyfileText) + "\n"
			expected = strings.TrimSpace(expected)

			if *updateGolden && (expected == "" || expected[0] == '{') {
				got := adaptPretty(t, caddyfileText)
				out := caddyfileText + goldenSeparator + "\n" + got + "\n"
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote %s", path)
				return
			}

			if expected == "" {
				t.Fatalf("%s: empty expected output (run with -update to generate it)", name)
			}
			if expected[0] == '{' {
				if !caddytest.CompareAdapt(t, name, caddyfileText, "caddyfile", expected) {
					// CompareAdapt printed the diff to stdout.
					t.Errorf("%s: adapted config differs from the golden; got:\n%s", name, adaptPretty(t, caddyfileText))
				}
				return
			}
			_, _, err = caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
			if err == nil {
				t.Fatalf("%s: adapting succeeded, want an error containing %q", name, expected)
			}
			if !strings.Contains(err.Error(), expected) {
				t.Errorf("%s: error %q does not contain %q", name, err, expected)
			}
		})
	}
}

// adaptPretty adapts a Caddyfile and returns the JSON indented with tabs,
// as caddytest.CompareAdapt compares it.
func adaptPretty(t *testing.T, caddyfileText string) string {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfileText), nil)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	for _, w := range warnings {
		t.Logf("warning: line %d: %s: %s", w.Line, w.Directive, w.Message)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		t.Fatalf("indent: %v", err)
	}
	return buf.String()
}
