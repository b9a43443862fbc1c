package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// researchConfig is the derived config of server-everything's
// simulate-research-query (a task) on base, or of the tool base names.
func researchConfig(t *testing.T, h *adaptertest.Harness, base map[string]any) json.RawMessage {
	t.Helper()
	if base["tool"] == nil {
		base["tool"] = "simulate-research-query"
	}
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: base, Timeout: 20 * time.Second})
	if err != nil || len(diags) > 0 || len(tools) != 1 {
		t.Fatalf("expand: %+v %v %v", tools, diags, err)
	}
	return tools[0].Config
}

// A task call over Streamable HTTP reports its resume state — the task,
// its session, a fingerprint of the url — and another adapter process,
// with no session of its own, follows the same task from it to the same
// result; a state that names another url, or any state for an upstream
// run as a command, is refused, and such an upstream's calls report none.
func TestTaskResumedByAnotherAdapter(t *testing.T) {
	t.Parallel()
	t.Run("streamable http", func(t *testing.T) {
		t.Parallel()
		url := everythingHTTP(t)
		h := newHarness(t)
		cfg := researchConfig(t, h, map[string]any{"url": url})
		info, err := h.Describe(ctxT(t))
		if err != nil || !info.Capabilities.Resume {
			t.Fatalf("describe: %+v %v", info, err)
		}
		states := make(chan json.RawMessage, 4)
		first := make(chan string, 1)
		go func() {
			res, err := h.Client.InvokeRelayed(ctxT(t), &sdk.Request{Operation: sdk.Operation{Name: "research", Config: cfg},
				Arguments: json.RawMessage(`{"topic":"resumed"}`)}, info.Capabilities, client.Relay{Resume: func(s json.RawMessage) { states <- s }})
			if err != nil {
				first <- err.Error()
				return
			}
			first <- res.Text
		}()
		var state json.RawMessage
		select {
		case state = <-states:
		case text := <-first:
			t.Fatalf("the call ended without a resume state: %s", text)
		}
		var rs taskResume
		if err := json.Unmarshal(state, &rs); err != nil || rs.Task == "" || rs.Session == "" || rs.Protocol == "" ||
			rs.Upstream == "" || strings.Contains(string(state), url) {
			t.Fatalf("resume state %s: %v", state, err)
		}

		// Another adapter, as on another replica, follows the same task.
		other := newAdapter()
		t.Cleanup(other.pool.closeAll)
		h2 := adaptertest.New(t, other)
		var mu sync.Mutex
		var progress []sdk.Progress
		res, err := h2.Client.InvokeWithProgress(ctxT(t), &sdk.Request{Operation: sdk.Operation{Name: "research", Config: cfg}, Resume: state},
			info.Capabilities, func(p sdk.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() })
		if err != nil || !strings.Contains(res.Text, "# Research Report: resumed") {
			t.Fatalf("resumed call: %+v %v", res, err)
		}
		if text := <-first; !strings.Contains(text, "# Research Report: resumed") {
			t.Errorf("the first call: %s", text)
		}
		mu.Lock()
		if len(progress) == 0 {
			t.Error("the resumed call reported no progress")
		}
		mu.Unlock()

		// A state of another url, or of no task, is refused.
		for state, want := range map[string]string{
			`{"task":"` + rs.Task + `","session":"` + rs.Session + `","upstream":"0000"}`: "created on another url than the operation's",
			`{"nothing":1}`: "the resume state is not a task's",
		} {
			_, ue, err := adaptertest.New(t, newAdapter()).Invoke(ctxT(t), adaptertest.Call{Config: cfg, Resume: state})
			if err != nil || ue == nil || !ue.Rejected || !strings.Contains(ue.Message, want) {
				t.Errorf("resume from %s: %+v %v, want %q", state, ue, err, want)
			}
		}
		// A session the upstream does not know says so.
		_, ue, err := adaptertest.New(t, newAdapter()).Invoke(ctxT(t), adaptertest.Call{Config: cfg,
			Resume: `{"task":"` + rs.Task + `","session":"gone","protocol":"` + rs.Protocol + `","upstream":"` + rs.Upstream + `"}`})
		if err != nil || ue == nil || !strings.Contains(ue.Message, "no longer knows the MCP session task") {
			t.Errorf("resume on a lost session: %+v %v", ue, err)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		cfg := researchConfig(t, h, everythingStdio(t))
		info, err := h.Describe(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		reported := 0
		res, err := h.Client.InvokeRelayed(ctxT(t), &sdk.Request{Operation: sdk.Operation{Name: "research", Config: cfg},
			Arguments: json.RawMessage(`{"topic":"stdio"}`)}, info.Capabilities, client.Relay{Resume: func(json.RawMessage) { reported++ }})
		if err != nil || !strings.Contains(res.Text, "# Research Report: stdio") || reported != 0 {
			t.Fatalf("stdio task: %+v %v, %d resume states", res, err, reported)
		}
		_, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: cfg, Resume: `{"task":"t","upstream":"x"}`})
		if err != nil || ue == nil || !ue.Rejected || !strings.Contains(ue.Message, "runs as a command beside each adapter") {
			t.Errorf("resume on stdio: %+v %v", ue, err)
		}
	})
}

// taskServerHTTP starts e2e/ts/task-server.mjs over Streamable HTTP on a
// free port and returns its endpoint and its output.
func taskServerHTTP(t *testing.T) (string, *lockedBuffer) {
	t.Helper()
	everything(t) // the same TypeScript dependencies
	js, err := filepath.Abs("../../e2e/ts/task-server.mjs")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("node", js, "http", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitUntil(t, "the task server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp", out
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A resumed call that is cancelled cancels the upstream task it follows,
// on the session the task was created on.
func TestResumedTaskCancelled(t *testing.T) {
	t.Parallel()
	url, out := taskServerHTTP(t)
	h := newHarness(t)
	cfg := researchConfig(t, h, map[string]any{"url": url, "tool": "waits"})
	info, err := h.Describe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	relay := func(states chan json.RawMessage) client.Relay {
		return client.Relay{Resume: func(s json.RawMessage) { states <- s }}
	}
	states := make(chan json.RawMessage, 1)
	go func() {
		_, _ = h.Client.InvokeRelayed(ctxT(t), &sdk.Request{Operation: sdk.Operation{Name: "wait", Config: cfg},
			Arguments: json.RawMessage(`{"text":"resumed"}`)}, info.Capabilities, relay(states))
	}()
	state := <-states

	other := newAdapter()
	t.Cleanup(other.pool.closeAll)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	following := make(chan sdk.Progress, 1)
	go func() {
		r := relay(make(chan json.RawMessage, 1))
		r.Progress = func(p sdk.Progress) {
			select {
			case following <- p:
			default:
			}
		}
		_, err := adaptertest.New(t, other).Client.InvokeRelayed(ctx, &sdk.Request{Operation: sdk.Operation{Name: "wait", Config: cfg}, Resume: state},
			info.Capabilities, r)
		done <- err
	}()
	if p := <-following; p.Message != "waiting for resumed" {
		t.Errorf("the resumed call's progress: %+v", p)
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("the cancelled resumed call succeeded")
	}
	waitUntil(t, "the upstream task to be cancelled", func() bool { return strings.Contains(out.String(), "cancelled resumed") })
}
