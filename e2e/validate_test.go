package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestValidateStartsNothing: `crank validate` checks a config as `crank
// run` loads it without serving any of it. It starts no etcd (the demo's
// etcd ports, held by the test, do not make it fail) and dials none (an
// external cluster that does not exist is fine), and logs no error; it
// runs the adapters the load runs, and stops them before it exits.
func TestValidateStartsNothing(t *testing.T) {
	t.Parallel()
	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		// The ports of the demo's embedded etcd; one that another process
		// holds already serves the test as well.
		for _, addr := range []string{"127.0.0.1:23790", "127.0.0.1:23800"} {
			if l, err := net.Listen("tcp", addr); err == nil {
				t.Cleanup(func() { l.Close() })
			}
		}
		validate(t, repoRoot)
	})
	t.Run("external etcd", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		pidFile, probe := filepath.Join(dir, "adapter-pid"), filepath.Join(dir, "probe.sh")
		// An adapter that says its pid and is the built-in rest adapter.
		if err := os.WriteFile(probe, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec "+crankBin+" crank-adapter rest\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "ops.yaml"), `adapters:
  probe: {command: `+probe+`}
operations:
  - {name: probed, description: d, adapter: probe, config: {method: GET, url: "http://127.0.0.1:1/x"}}
  - {name: fetched, description: d, adapter: rest, config: {method: GET, url: "http://127.0.0.1:1/x"}}
`)
		writeFile(t, filepath.Join(dir, "Caddyfile"), `{
	admin off
	crank {
		etcd {
			endpoints http://127.0.0.1:`+strconv.Itoa(freePort(t))+`
		}
	}
}
http://127.0.0.1:`+strconv.Itoa(freePort(t))+` {
	crank /mcp ops.yaml
}
`)
		validate(t, dir)
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("crank validate did not run the adapter: %v", err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if alive(pid) {
			t.Errorf("the adapter crank validate ran (pid %d) outlives it", pid)
		}
	})
}

// TestValidateLoads: `crank validate` fails where `crank run` would not
// serve an entry, naming the file, the line, the entry and the reason: a
// missing OpenAPI document, an SDL that does not parse, a gRPC server
// whose reflection cannot be used, an expansion over the adapter
// protocol's message limit (a third-party adapter's). Each is checked
// alone, so that its message is not one of several.
func TestValidateLoads(t *testing.T) {
	t.Parallel()
	big := adaptertest.Build(t, filepath.Join(repoRoot, "e2e", "testdata", "bigexpand"))
	closed := freePort(t)
	for _, c := range []struct{ name, ops, want string }{
		{"missing OpenAPI document", `
operations:
  - name: petstore
    description: d
    adapter: rest
    config: {openapi: {document: missing.json}}
`, `ops.yaml:6: operation "petstore": /config/openapi/document: cannot read `},
		{"SDL that does not parse", `
operations:
  - name: library
    adapter: graphql
    config: {endpoint: "http://127.0.0.1:1/graphql", schema: bad.graphqls, generate: {query_fields: [books]}}
`, `ops.yaml:5: operation "library": /config/schema: not a valid GraphQL schema: bad.graphqls:3:1: Expected Name, found <EOF>`},
		{"unusable reflection server", fmt.Sprintf(`
operations:
  - name: directory
    adapter: grpc
    config: {target: "127.0.0.1:%d", service: crank.demo.v1.Directory}
`, closed), fmt.Sprintf(`ops.yaml:5: operation "directory": /config/target: cannot reach 127.0.0.1:%d for server reflection`, closed)},
		{"expansion over the message limit", fmt.Sprintf(`
adapters:
  big: {command: %s}
operations:
  - name: huge
    adapter: big
    config: {mib: 70}
`, big.Path), `ops.yaml:7: operation "huge": /config: the entry expands to 70 tools in 70.0 MiB, over the adapter protocol's 64 MiB for one expansion (`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ops.yaml"), c.ops)
			writeFile(t, filepath.Join(dir, "bad.graphqls"), "type Query {\n  books: Int\n")
			out := loadFailure(t, dir, "validate")
			// Caddy logs the error as JSON, so quotes come escaped.
			if !strings.Contains(out, strings.ReplaceAll(c.want, `"`, `\"`)) {
				t.Fatalf("want %q in:\n%s", c.want, out)
			}
		})
	}
}

// validate runs `crank validate` on dir/Caddyfile and checks that it
// succeeds and logs no error-level line.
func validate(t *testing.T, dir string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, crankBin, "validate", "--config", "Caddyfile", "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home, "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("crank validate: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"level":"error"`) {
			t.Errorf("crank validate logged an error: %s", line)
		}
	}
}

// alive reports whether the process pid runs (and is no zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && f[0] != "Z"
}
