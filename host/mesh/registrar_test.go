package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/host/mesh"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// registryBinary is mcp-mesh's registry from e2e/mesh's lockfile (`make
// mesh-deps`).
var registryBinary = filepath.Join("..", "..", "e2e", "mesh", "node_modules", "@mcpmesh", "cli-linux-x64", "bin", "mcp-mesh-registry")

// registry is a real mcp-mesh registry process on a free loopback port.
type registry struct {
	t    *testing.T
	port int
	db   string
	cmd  *exec.Cmd
}

// startRegistry runs the registry binary (skipping the test, or failing it
// under CI, when it is not installed) with its database in db ("" for a
// new one).
func startRegistry(t *testing.T, port int, db string) *registry {
	t.Helper()
	bin, _ := filepath.Abs(registryBinary)
	if _, err := os.Stat(bin); err != nil {
		msg := "e2e/mesh/node_modules is missing: run `make mesh-deps` (npm ci in e2e/mesh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg + "; the mcp-mesh registration cannot be tested")
		}
		t.Skip(msg + "; the mcp-mesh registration test is left out")
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	if db == "" {
		db = filepath.Join(t.TempDir(), "registry.db")
	}
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db, "MCP_MESH_LOG_LEVEL=WARNING")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &registry{t: t, port: port, db: db, cmd: cmd}
	t.Cleanup(r.kill)
	mcptest.WaitUntil(t, "the registry answers", func() bool {
		resp, err := http.Get(r.url() + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return r
}

func (r *registry) url() string { return fmt.Sprintf("http://127.0.0.1:%d", r.port) }

func (r *registry) kill() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// registryAgent is an agent as the registry lists it.
type registryAgent struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Endpoint     string `json:"endpoint"`
	Version      string `json:"version"`
	Capabilities []struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	} `json:"capabilities"`
}

// agents lists the healthy agents of the registry.
func (r *registry) agents() map[string]registryAgent {
	resp, err := http.Get(r.url() + "/agents")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Agents []registryAgent `json:"agents"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&list)
	out := map[string]registryAgent{}
	for _, a := range list.Agents {
		if a.Status == "healthy" {
			out[a.ID] = a
		}
	}
	return out
}

func (a registryAgent) capabilities() []string {
	var names []string
	for _, c := range a.Capabilities {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// toolSet is a changeable tool list.
type toolSet struct {
	mu    sync.Mutex
	tools []mesh.Tool
}

func (s *toolSet) get() []mesh.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

func (s *toolSet) add(t mesh.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools = append(s.tools, t)
}

// A registrar registers the endpoint's tools as capabilities (a text
// window tagged as mesh's stream, a job family as Crank's), sends them
// again when they change, registers again after a registry restart that
// lost its database, and removes the agent on Stop. Two replicas on one
// etcd give one registration, and the other takes over when the holder
// stops; a registry that is down fails nothing.
func TestRegistrar(t *testing.T) {
	t.Parallel()
	emb, a := storetest.Embedded(t)
	b := storetest.Open(t, emb, store.EtcdConfig{OwnerTTL: 2 * time.Second})
	reg := startRegistry(t, 0, "")
	tools := &toolSet{tools: []mesh.Tool{
		{Name: "get_user", Description: "Get a user", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "ask_llm", Description: "Ask the LLM", Meta: map[string]any{"stream_type": "text",
			"io.crank/execution": map[string]any{"mode": "window"}}},
		{Name: "report_start", Description: "Start a report", Meta: map[string]any{
			"io.crank/execution": map[string]any{"mode": "async_job", "role": "start"}}},
	}}
	cfg := mesh.Config{Registry: reg.url(), AgentID: "crank-test", URL: "http://127.0.0.1:18080/mcp",
		Tags: []string{"crank"}, HeartbeatInterval: "1s"}
	newRegistrar := func(e *store.Etcd) *mesh.Registrar {
		r, err := mesh.New(mesh.Options{Config: cfg, Version: "9.9.9", Tools: tools.get, Elector: e})
		if err != nil {
			t.Fatal(err)
		}
		r.Start()
		t.Cleanup(func() { _ = r.Stop(context.Background()) })
		return r
	}
	ra := newRegistrar(a)
	mcptest.WaitUntil(t, "the agent is registered", func() bool {
		ag, ok := reg.agents()["crank-test"]
		return ok && slices.Equal(ag.capabilities(), []string{"ask_llm", "get_user", "report_start"})
	})
	ag := reg.agents()["crank-test"]
	if ag.Endpoint != "http://127.0.0.1:18080" || ag.Version != "9.9.9" {
		t.Errorf("agent %+v", ag)
	}
	for _, c := range ag.Capabilities {
		want := map[string][]string{"get_user": {"crank"}, "ask_llm": {"crank", mesh.TagWindow, mesh.TagStream},
			"report_start": {"crank", mesh.TagJob}}[c.Name]
		if !slices.Equal(c.Tags, want) {
			t.Errorf("capability %s: tags %q, want %q", c.Name, c.Tags, want)
		}
	}

	// A second replica: still one registration.
	rb := newRegistrar(b)
	tools.add(mesh.Tool{Name: "added", Description: "Added by a reload"})
	ra.Changed()
	mcptest.WaitUntil(t, "the added tool is registered", func() bool {
		return slices.Contains(reg.agents()["crank-test"].capabilities(), "added")
	})

	// The registry restarts with a new database: registered again.
	reg.kill()
	reg2 := startRegistry(t, reg.port, "")
	mcptest.WaitUntil(t, "registered again after the registry's restart", func() bool {
		_, ok := reg2.agents()["crank-test"]
		return ok
	})

	// The holder stops: it deregisters, and the other replica takes over.
	if err := ra.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mcptest.WaitUntil(t, "the other replica registers", func() bool {
		_, ok := reg2.agents()["crank-test"]
		return ok
	})
	// The last one stops: the agent is gone.
	if err := rb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg2.agents()["crank-test"]; ok {
		t.Fatal("the agent is still registered after the last replica stopped")
	}

	// A registry that is down: Start returns, Stop too.
	reg2.kill()
	down, err := mesh.New(mesh.Options{Config: cfg, Tools: tools.get})
	if err != nil {
		t.Fatal(err)
	}
	down.Start()
	if err := down.Stop(context.Background()); err != nil {
		t.Logf("stop with the registry down: %v", err)
	}
}

// Config problems name the field.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	if err := (&mesh.Config{}).Check("mesh"); err != nil {
		t.Fatalf("no registry, no registration: %v", err)
	}
	c := mesh.Config{Registry: "ftp://x", AgentID: "a b", URL: "http://127.0.0.1:8080/other", Tags: []string{""}, HeartbeatInterval: "1ms"}
	err := c.Check("mesh")
	for _, want := range []string{"mesh.registry: must be", "mesh.agent_id: must be", "mesh.url: must end in /mcp", "mesh.tags[0]:", "mesh.heartbeat_interval:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
	var s mesh.Config
	if err := s.Set("tags", []string{"a", "b"}); err != nil || !slices.Equal(s.Tags, []string{"a", "b"}) {
		t.Errorf("tags: %v %q", err, s.Tags)
	}
	if err := s.Set("agent_id", []string{"a", "b"}); err == nil {
		t.Error("two agent ids taken")
	}
	if err := s.Set("nope", []string{"a"}); err == nil || !strings.Contains(err.Error(), "registry, agent_id") {
		t.Errorf("unknown option: %v", err)
	}
}
