package mesh_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/host/mesh"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/internal/meshtest"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

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
	reg := meshtest.StartRegistry(t, 0)
	tools := &toolSet{tools: []mesh.Tool{
		{Name: "get_user", Description: "Get a user", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "ask_llm", Description: "Ask the LLM", Meta: map[string]any{"stream_type": "text",
			"io.crank/execution": map[string]any{"mode": "window"}}},
		{Name: "report_start", Description: "Start a report", Meta: map[string]any{
			"io.crank/execution": map[string]any{"mode": "async_job", "role": "start"}}},
	}}
	cfg := mesh.Config{Registry: reg.URL(), AgentID: "crank-test", URL: "http://127.0.0.1:18080/mcp",
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
		ag, ok := reg.Agents()["crank-test"]
		return ok && slices.Equal(ag.Names(), []string{"ask_llm", "get_user", "report_start"})
	})
	ag := reg.Agents()["crank-test"]
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
		return slices.Contains(reg.Agents()["crank-test"].Names(), "added")
	})

	// The registry restarts with a new database: registered again.
	reg.Kill()
	reg2 := meshtest.StartRegistry(t, reg.Port)
	mcptest.WaitUntil(t, "registered again after the registry's restart", func() bool {
		_, ok := reg2.Agents()["crank-test"]
		return ok
	})

	// The holder stops: it deregisters, and the other replica takes over.
	if err := ra.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	mcptest.WaitUntil(t, "the other replica registers", func() bool {
		_, ok := reg2.Agents()["crank-test"]
		return ok
	})
	// The last one stops: the agent is gone.
	if err := rb.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg2.Agents()["crank-test"]; ok {
		t.Fatal("the agent is still registered after the last replica stopped")
	}

	// A registry that is down: Start returns, Stop too.
	reg2.Kill()
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

// A registry that answers with a redirect elsewhere (its own doing, or
// anyone's on the path of plain http) never gets the registration sent
// there: the registrar follows redirects within the registry's origin
// only. A plain-http registry off loopback is refused at load.
func TestRegistrarFollowsNoRedirectElsewhere(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	var asked atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Redirect(w, r, other.URL+"/stop", http.StatusTemporaryRedirect)
	}))
	defer reg.Close()
	r, err := mesh.New(mesh.Options{Config: mesh.Config{Registry: reg.URL, AgentID: "crank-test", URL: "http://127.0.0.1:18080/mcp", HeartbeatInterval: "1s"},
		Tools: func() []mesh.Tool { return []mesh.Tool{{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}} }})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	mcptest.WaitUntil(t, "the registrar tries twice", func() bool { return asked.Load() >= 2 })
	_ = r.Stop(context.Background())
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the registration was sent to the redirect's target %d times", n)
	}
	c := mesh.Config{Registry: "http://registry.example:8000", AgentID: "a", URL: "http://127.0.0.1:8080/mcp"}
	if err := c.Check("mesh"); err == nil || !strings.Contains(err.Error(), "mesh.registry: must be https off loopback") {
		t.Errorf("a plain-http registry off loopback: %v", err)
	}
}
