// Package meshtest runs mcp-mesh's real binaries for the host/mesh and
// e2e tests: mcp-mesh-registry on a loopback port with its database in a
// temp dir, its agent listing, and meshctl. The binaries come from the
// npm package @mcpmesh/cli-linux-x64 that e2e/mesh's lockfile pins (`make
// mesh-deps`); Require skips a test without them, or fails it under CI.
// Post and ReadStream call a tool and read its stream as mcp-mesh's Java
// and TypeScript consumers do (stream.go). It is for tests only.
package meshtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
)

// Bin is the directory of the mcp-mesh binaries.
var Bin = func() string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	return filepath.Join(root, "e2e", "mesh", "node_modules", "@mcpmesh", "cli-linux-x64", "bin")
}()

// Require skips the test (fails it when CI is set) when the binaries are
// not installed.
func Require(t testing.TB) {
	t.Helper()
	for _, f := range []string{"meshctl", "mcp-mesh-registry"} {
		if _, err := os.Stat(filepath.Join(Bin, f)); err != nil {
			missing.Tool(t, "e2e/mesh/node_modules is missing", "make mesh-deps: npm ci in e2e/mesh")
		}
	}
}

// Registry is a running mcp-mesh-registry.
type Registry struct {
	t    testing.TB
	Port int
	cmd  *exec.Cmd
}

// StartRegistry runs the registry on port (0: a free one) with a new
// database, and waits until it answers; the test's end kills it.
func StartRegistry(t testing.TB, port int) *Registry {
	t.Helper()
	Require(t)
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	r := &Registry{t: t, Port: port}
	r.cmd = exec.Command(filepath.Join(Bin, "mcp-mesh-registry"), "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	r.cmd.Env = append(os.Environ(), "DATABASE_URL="+filepath.Join(t.TempDir(), "registry.db"), "MCP_MESH_LOG_LEVEL=WARNING")
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)
	mcptest.WaitUntil(t, "the mcp-mesh registry answers", func() bool {
		resp, err := http.Get(r.URL() + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return r
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", r.Port) }

// Kill ends the registry (its database is lost with it).
func (r *Registry) Kill() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// Agent is an agent as the registry's GET /agents lists it.
type Agent struct {
	ID           string       `json:"id"`
	Status       string       `json:"status"`
	Endpoint     string       `json:"endpoint"`
	Version      string       `json:"version"`
	Capabilities []Capability `json:"capabilities"`
}

// Capability is one of an agent's capabilities.
type Capability struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// Names lists the agent's capabilities, sorted.
func (a Agent) Names() []string {
	var names []string
	for _, c := range a.Capabilities {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// Agents lists the registry's healthy agents by id (none when it does
// not answer).
func (r *Registry) Agents() map[string]Agent {
	resp, err := http.Get(r.URL() + "/agents")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Agents []Agent `json:"agents"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&list)
	out := map[string]Agent{}
	for _, a := range list.Agents {
		if a.Status == "healthy" {
			out[a.ID] = a
		}
	}
	return out
}

// Meshctl runs meshctl with args (and --registry-url of r unless args
// name --agent-url), with a home of its own, and returns its output.
func (r *Registry) Meshctl(args ...string) (string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !slices.Contains(args, "--agent-url") {
		args = append(args, "--registry-url", r.URL())
	}
	cmd := exec.CommandContext(ctx, filepath.Join(Bin, "meshctl"), args...)
	cmd.Env = append(os.Environ(), "HOME="+r.t.TempDir(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
