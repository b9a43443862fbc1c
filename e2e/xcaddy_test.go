package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// xcaddyMain is the main.go xcaddy writes for
// `xcaddy build --with github.com/crankmcp/crank/caddymodule`.
const xcaddyMain = `package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/crankmcp/crank/caddymodule"
)

func main() {
	caddycmd.Main()
}
`

// crankModules are Crank's modules and their directories in the checkout.
var crankModules = []struct{ path, dir string }{
	{"github.com/crankmcp/crank", "."},
	{"github.com/crankmcp/crank/plugins/sdk", "plugins/sdk"},
	{"github.com/crankmcp/crank/proto", "proto"},
}

// TestXcaddyBuild builds Caddy with Crank the way xcaddy does: a main
// module of its own that requires Crank's modules and replaces each with
// this checkout. The replace directives of Crank's own go.mod do not
// apply to such a module, so this catches a module split that builds only
// from inside the repository. The binary must hold the crank modules and
// no demo, and run every built-in adapter.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy")
	}
	t.Parallel()
	dir := t.TempDir()
	root, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(root)
	var mod strings.Builder
	fmt.Fprintf(&mod, "module caddy\n\n%s\n", goLine)
	for _, m := range crankModules {
		fmt.Fprintf(&mod, "\nrequire %s v0.0.0-00010101000000-000000000000\n", m.path)
		fmt.Fprintf(&mod, "replace %s => %s\n", m.path, filepath.Join(repoRoot, m.dir))
	}
	writeFile(t, filepath.Join(dir, "go.mod"), mod.String())
	writeFile(t, filepath.Join(dir, "main.go"), xcaddyMain)
	// Crank's go.sum holds the sums of the modules the build needs, so
	// nothing is fetched that the module cache does not already hold;
	// -mod=mod adds Caddy's requirement and any missing sum, as
	// xcaddy's go get does.
	sums, err := os.ReadFile(filepath.Join(repoRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sums))
	bin := filepath.Join(dir, "caddy")
	start := time.Now()
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of a Caddy with Crank, as xcaddy runs it: %v\n%s\ngo.mod:\n%s", err, out, mod.String())
	}
	t.Logf("built in %s", time.Since(start).Round(time.Millisecond))

	out, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatalf("list-modules: %v", err)
	}
	if got := nonStandardModules(string(out)); !slices.Equal(got, []string{"admin.api.crank", "crank", "http.handlers.crank", "http.handlers.crank_console"}) {
		t.Errorf("non-standard modules %q, want Crank's four:\n%s", got, out)
	}

	// Every built-in adapter runs from the binary, launched as the
	// gateway launches it.
	out, _ = exec.Command(bin, "help", "crank-adapter").Output()
	m := regexp.MustCompile(`Built-in adapters: ([a-z, ]+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("help crank-adapter names no built-in adapters:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exe := &adaptertest.Executable{Path: bin}
	for _, name := range strings.Split(string(m[1]), ", ") {
		d, err := exe.Start(t, "crank-adapter", name).Describe(ctx)
		if err != nil || d.Name != name {
			t.Errorf("crank-adapter %s: %+v %v", name, d, err)
		}
	}
}

// nonStandardModules returns the modules list-modules lists between its
// count of standard modules and its count of the others.
func nonStandardModules(out string) []string {
	_, rest, _ := strings.Cut(out, "Standard modules:")
	_, rest, _ = strings.Cut(rest, "\n")
	rest, _, _ = strings.Cut(rest, "Non-standard modules:")
	return strings.Fields(rest)
}
