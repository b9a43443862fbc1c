package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// The test binary doubles as an adapter executable: started with
// CRANK_HOST_TEST_ADAPTER=1 it serves testAdapter instead of running tests.
func TestMain(m *testing.M) {
	switch os.Getenv("CRANK_HOST_TEST_ADAPTER") {
	case "1":
		serve(testAdapter{})
	case "rest": // the real REST adapter, for window tests
		serve(rest.New())
	case "resumer", "resumer_old": // adapters that resume calls, or predate it (resume_test.go)
		serve(resumer{old: os.Getenv("CRANK_HOST_TEST_ADAPTER") == "resumer_old"})
	}
	os.Exit(m.Run())
}

func serve(a sdk.Adapter) {
	if err := sdk.Serve(a); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

type testAdapter struct{}

func (testAdapter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "test", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

type testConfig struct {
	Behavior string   `json:"behavior"`
	Secret   string   `json:"secret"`
	Tools    []string `json:"tools"`
	// File, with behavior "file", holds the tools' names, one a line
	// ("!" fails the expansion) (reexpand_test.go).
	File string `json:"file"`
}

// ExpandOperation: behavior "expand" makes one tool per name in tools,
// "derive" gives the entry itself a schema and a description.
func (testAdapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	var c testConfig
	_ = json.Unmarshal(op.Config, &c)
	switch c.Behavior {
	case "expand":
		var tools []sdk.Tool
		for _, n := range c.Tools {
			tools = append(tools, sdk.Tool{Name: n, Description: "Tool " + n,
				InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
				Config:      json.RawMessage(`{"behavior":"echo","tool":"` + n + `"}`),
				Annotations: sdk.Annotations{ReadOnly: sdk.Bool(true)}})
		}
		return tools, []sdk.Diagnostic{{Severity: sdk.SeverityWarning, Field: "tools", Message: "skipped one"}}
	case "file":
		return expandFile(c.File)
	case "publish":
		return nil, nil // resources and prompts only (published_test.go)
	case "derive":
		return []sdk.Tool{{Description: "derived description",
			InputSchema: json.RawMessage(`{"type":"object","required":["q"]}`)}}, nil
	}
	return []sdk.Tool{{}}, nil
}

func (testAdapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	var c testConfig
	if err := json.Unmarshal(op.Config, &c); err != nil {
		return []sdk.Diagnostic{sdk.Errorf("", "%v", err)}
	}
	switch c.Behavior {
	case "echo", "sleep", "hang", "mark_hang", "fail", "crash", "leak", "array", "expand", "derive", "file", "publish":
		return nil
	}
	return []sdk.Diagnostic{sdk.Errorf("behavior", "unknown behavior %q", c.Behavior)}
}

func (testAdapter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var c testConfig
	_ = json.Unmarshal(req.Operation.Config, &c)
	switch c.Behavior {
	case "sleep": // a well-behaved adapter enforces the operation timeout
		select {
		case <-time.After(req.Operation.Timeout):
			return nil, &sdk.UpstreamError{Kind: sdk.KindTimeout, Upstream: "GET http://up/slow",
				Message: "no answer within " + req.Operation.Timeout.String()}
		case <-ctx.Done():
			return nil, &sdk.UpstreamError{Kind: sdk.KindCancelled, Message: "stopped"}
		}
	case "hang": // a misbehaving one does not; the host's deadline ends the call
		time.Sleep(time.Minute)
	case "mark_hang": // says it has the call (creates File), then hangs
		if err := os.WriteFile(c.File, nil, 0o600); err != nil {
			return nil, err
		}
		time.Sleep(time.Minute)
	case "fail":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: "503", Upstream: "GET http://up/x",
			Message: "unavailable", Body: "try later", Retryable: true}
	case "crash":
		os.Exit(3)
	case "leak":
		return &sdk.Result{Text: "the token is " + c.Secret}, nil
	case "array":
		return &sdk.Result{Structured: json.RawMessage(`[1,2]`)}, nil
	}
	return &sdk.Result{Structured: req.Arguments}, nil
}

const catalogYAML = `
adapters:
  test:
    command: %s
    env: {CRANK_HOST_TEST_ADAPTER: "1"}
operations:
  - name: echo
    description: Echo the arguments.
    adapter: test
    input_schema:
      type: object
      properties:
        id: {type: integer}
        tags: {type: array, items: {type: string}}
        nested: {type: object, properties: {name: {type: string}}, required: [name]}
      required: [id]
    config: {behavior: echo}
  - name: slow
    description: Never answers in time.
    adapter: test
    timeout: 300ms
    config: {behavior: sleep}
  - name: hanging
    description: Adapter ignores the deadline.
    adapter: test
    timeout: 100ms
    config: {behavior: hang}
  - name: failing
    description: Upstream fails.
    adapter: test
    config: {behavior: fail}
  - name: crashing
    description: Adapter dies.
    adapter: test
    config: {behavior: crash}
  - name: leaky
    description: Echoes a secret.
    adapter: test
    config: {behavior: leak, secret: "{env.CRANK_TEST_SECRET}"}
  - name: array
    description: Returns an array.
    adapter: test
    config: {behavior: array}
`

type fixture struct {
	h   *host.Host
	sup *host.Supervisor
}

func newFixture(t testing.TB, yaml string) (*fixture, error) {
	t.Helper()
	return newFixtureWith(t, yaml, host.SupervisorOptions{HealthInterval: -1})
}

// newFixtureWith is newFixture with the adapters' supervisor options.
// with, when given, changes the host's options.
func newFixtureWith(t testing.TB, yaml string, opts host.SupervisorOptions, with ...func(*host.Options)) (*fixture, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := opsfile.Parse("ops.yaml", []byte(fmt.Sprintf(yaml, exe)), opsfile.LoadOptions{})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	sups := map[string]*host.Supervisor{}
	t.Cleanup(func() {
		for _, s := range sups {
			s.Close()
		}
	})
	if opts.StartTimeout == 0 {
		// The adapter is this race-built test binary: on a loaded machine
		// its start can take longer than the 10s a real adapter gets.
		opts.StartTimeout = time.Minute
	}
	f := &fixture{}
	hopts := host.Options{File: cat, Adapter: func(name string) (*host.Supervisor, error) {
		mu.Lock()
		defer mu.Unlock()
		spec, err := host.AdapterSpecOf(cat, name, nil)
		if err != nil {
			return nil, err
		}
		if s := sups[spec.Key()]; s != nil {
			return s, nil
		}
		s := host.NewSupervisor(spec, opts)
		sups[spec.Key()] = s
		f.sup = s
		return s, nil
	}}
	for _, w := range with {
		w(&hopts)
	}
	f.h, err = host.New(context.Background(), hopts)
	return f, err
}

func call(t *testing.T, h *host.Host, tool, args string) *host.Result {
	t.Helper()
	res, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool(tool), Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

func TestCallAndErrors(t *testing.T) {
	t.Setenv("CRANK_TEST_SECRET", "s3cr3t-value")
	f, err := newFixture(t, catalogYAML)
	if err != nil {
		t.Fatal(err)
	}

	res := call(t, f.h, "echo", `{"id": 7, "tags": ["a"]}`)
	if res.IsError || string(res.Structured) != `{"id": 7, "tags": ["a"]}` {
		t.Fatalf("echo: %+v", res)
	}
	if res := call(t, f.h, "array", `{}`); string(res.Structured) != `{"result":[1,2]}` {
		t.Fatalf("array not wrapped: %s", res.Structured)
	}

	cases := []struct{ tool, args, want string }{
		{"echo", `{"id": "seven"}`, `id: must be an integer, got a string`},
		{"echo", `{}`, `missing required argument id`},
		{"echo", `{"id": 1, "tags": [3]}`, `tags`},
		{"echo", `{"id": 1, "nested": {}}`, `nested: missing required field name`},
		{"echo", `[1]`, `must be a JSON object`},
		{"echo", `{"id":`, `not valid JSON`},
		{"slow", `{}`, `upstream timed out (GET http://up/slow): no answer within 300ms`},
		{"hanging", `{}`, `tool "hanging" timed out after 100ms`},
		{"failing", `{}`, `(GET http://up/x): status 503: unavailable (retrying may succeed)`},
	}
	for _, c := range cases {
		res := call(t, f.h, c.tool, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: want isError containing %q, got %+v", c.tool, c.args, c.want, res)
		}
	}

	if _, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("nope")}); !errors.Is(err, host.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}

	res = call(t, f.h, "leaky", `{}`)
	if strings.Contains(res.Text, "s3cr3t-value") || !strings.Contains(res.Text, redact.Mark) {
		t.Errorf("secret not redacted: %q", res.Text)
	}
}

func TestExpandOperation(t *testing.T) {
	f, err := newFixture(t, `
adapters:
  test: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: "1"}}
operations:
  - {name: many, adapter: test, timeout: 2s, config: {behavior: expand, tools: [one, two]}}
  - {name: derived, adapter: test, config: {behavior: derive}}
  - {name: written, description: mine, adapter: test, input_schema: {type: object}, config: {behavior: derive}}
`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range f.h.Operations() {
		names = append(names, op.Name)
	}
	if strings.Join(names, ",") != "one,two,derived,written" {
		t.Fatalf("tools = %v", names)
	}
	ops := f.h.Operations()
	if ops[0].Description != "Tool one" || ops[0].Timeout != 2*time.Second || !*ops[0].Annotations.ReadOnly {
		t.Errorf("expanded tool: %+v", ops[0])
	}
	// The derived config reaches the adapter on invoke.
	if res := call(t, f.h, "two", `{"n": 2}`); res.IsError || string(res.Structured) != `{"n": 2}` {
		t.Errorf("call two: %+v", res)
	}
	if res := call(t, f.h, "two", `{"n": "x"}`); !res.IsError || !strings.Contains(res.Text, "n: must be an integer, got a string") {
		t.Errorf("derived schema not enforced: %+v", res)
	}
	// A single unnamed tool is the entry: the adapter fills only the gaps.
	if ops[2].Description != "derived description" || !strings.Contains(string(ops[2].InputSchema), `"required":["q"]`) {
		t.Errorf("derived: %+v", ops[2])
	}
	// (closed to undeclared arguments by the host: arguments.go)
	if ops[3].Description != "mine" || string(ops[3].InputSchema) != `{"additionalProperties":false,"type":"object"}` {
		t.Errorf("written: %q %s", ops[3].Description, ops[3].InputSchema)
	}
}

func TestAdapterCrashAndRestart(t *testing.T) {
	f, err := newFixture(t, catalogYAML)
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, f.h, "echo", `{"id":1}`); res.IsError {
		t.Fatal(res.Text)
	}
	starts := f.sup.Starts()

	// kill -9 between calls: the next call restarts the adapter.
	pid := f.sup.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, f.sup.Exited)
	if res := call(t, f.h, "echo", `{"id":2}`); res.IsError {
		t.Fatalf("call after kill: %s", res.Text)
	}
	if f.sup.Starts() != starts+1 {
		t.Fatalf("starts = %d, want %d", f.sup.Starts(), starts+1)
	}

	// A call in flight when the process dies gets a clear error, not a hang.
	res := call(t, f.h, "crashing", `{}`)
	if !res.IsError || !strings.Contains(res.Text, `adapter "test" stopped during the call`) {
		t.Fatalf("crash in flight: %+v", res)
	}
	// ... and the adapter serves again afterwards.
	waitFor(t, f.sup.Exited)
	if res := call(t, f.h, "echo", `{"id":3}`); res.IsError {
		t.Fatalf("call after crash: %s", res.Text)
	}
}

// An adapter named in CRANK_REATTACH_ADAPTERS is attached to instead of
// launched: here one served in this process, under a command that does
// not exist.
func TestAttachToDebugAdapter(t *testing.T) {
	env, _ := json.Marshal(map[string]sdk.ReattachConfig{"test": adaptertest.Serve(t, testAdapter{})})
	t.Setenv(sdk.ReattachEnv, string(env))
	f, err := newFixture(t, strings.Replace(catalogYAML, "command: %s", "command: /nonexistent%s", 1))
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, f.h, "echo", `{"id":1}`); res.IsError || string(res.Structured) != `{"id":1}` {
		t.Fatalf("call: %+v", res)
	}
	if pid := f.sup.PID(); pid != os.Getpid() {
		t.Errorf("pid = %d, want this process's %d", pid, os.Getpid())
	}
	if d := f.sup.Description(); d == nil || d.Name != "test" || !d.Capabilities.Validate || !d.Capabilities.Expand {
		t.Errorf("description = %+v", d)
	}
}

func TestLoadErrorsFromAdapter(t *testing.T) {
	yaml := `
adapters:
  test: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: "1"}}
operations:
  - {name: a, description: d, adapter: test, config: {behavior: teleport}}
  - {name: b, description: d, adapter: missing, config: {}}
  - {name: c, adapter: test, config: {behavior: echo}}
  - {name: d, description: d, adapter: test, config: {behavior: expand, tools: [a, x y]}}
  - {name: e, description: d, adapter: test, config: {behavior: expand, tools: []}}
`
	_, err := newFixture(t, yaml)
	if err == nil {
		t.Fatal("want error")
	}
	for _, want := range []string{
		`ops.yaml:5: operation "a": /config/behavior: unknown behavior "teleport"`,
		`ops.yaml:6: operation "b": /adapter: no adapter named "missing"`,
		`ops.yaml:7: operation "c": /description: is required`,
		`ops.yaml:8: operation "d": /config: the adapter derived an invalid tool name "x y"`,
		`ops.yaml:9: operation "e": /config: the adapter found no tools to serve in it`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}

	bad := "adapters: {test: {command: /nonexistent/adapter}}\noperations: [{name: a, description: d, adapter: test, config: {}}]\n#%s"
	_, err = newFixture(t, bad)
	if err == nil || !strings.Contains(err.Error(), `operation "a": /adapter: adapter "test": cannot start /nonexistent/adapter`) {
		t.Fatalf("missing binary: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An adapter command relative to the operations file is found next to the
// file even when the file itself was named by a relative path: a "./x"
// must never become a bare "x" that is looked up in PATH.
func TestRelativeAdapterCommand(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("conf", 0o755); err != nil {
		t.Fatal(err)
	}
	ops := "adapters: {acme: {command: ./bin/acme}}\noperations: [{name: a, description: d, adapter: acme, config: {}}]\n"
	if err := os.WriteFile(filepath.Join("conf", "ops.yaml"), []byte(ops), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := opsfile.LoadFile(filepath.Join("conf", "ops.yaml"), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := host.AdapterSpecOf(cat, "acme", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "conf", "bin", "acme"); spec.Command != want {
		t.Errorf("command = %q, want %q", spec.Command, want)
	}
}

// The modes an operation can take follow from the adapter's own: sessions
// need a window, jobs either kind of call.
func TestModesOf(t *testing.T) {
	for _, c := range []struct {
		adapter []sdk.Mode
		want    []opsfile.Mode
	}{
		{[]sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, []opsfile.Mode{opsfile.ModeUnary, opsfile.ModeWindow, opsfile.ModeSession, opsfile.ModeAsyncJob}},
		{[]sdk.Mode{sdk.ModeUnary}, []opsfile.Mode{opsfile.ModeUnary, opsfile.ModeAsyncJob}},
		{[]sdk.Mode{sdk.ModeWindow}, []opsfile.Mode{opsfile.ModeWindow, opsfile.ModeSession, opsfile.ModeAsyncJob}},
		{nil, nil},
	} {
		if got := host.ModesOf(c.adapter); !slices.Equal(got, c.want) {
			t.Errorf("ModesOf(%v) = %v, want %v", c.adapter, got, c.want)
		}
	}
}

// An adapter's diagnostic of a member whose name holds a dot (a header
// "X.Api.Key") points at that member and its line: the SDK sends a JSON
// pointer beside the dotted field, which would split at the dot.
func TestDiagnosticOfDottedKey(t *testing.T) {
	yaml := `
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: a
    description: d
    adapter: rest
    config:
      method: GET
      url: http://127.0.0.1:1/x
      headers:
        X-Fine: ok
        X.Api.Key: "a\nb"
`
	_, err := newFixture(t, yaml)
	if want := `ops.yaml:13: operation "a": /config/headers/X.Api.Key: value contains a control character`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q in %v", want, err)
	}
}
