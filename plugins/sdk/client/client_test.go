package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// The test binary doubles as an adapter served with WithManagedDebug when
// started with CRANK_CLIENT_TEST_DEBUG=1, and as the feed adapter
// (streams_test.go) when started with CRANK_CLIENT_TEST_FEED=1, and as
// the waiter adapter (invoke_streams_test.go) with
// CRANK_CLIENT_TEST_WAITER=1.
func TestMain(m *testing.M) {
	if os.Getenv("CRANK_CLIENT_TEST_DEBUG") == "1" {
		if err := sdk.Serve(echo{}, sdk.WithManagedDebug()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("CRANK_CLIENT_TEST_FEED") == "1" {
		if err := sdk.Serve(newFeed()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("CRANK_CLIENT_TEST_WAITER") == "1" {
		if err := sdk.Serve(newWaiter()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// echo answers its arguments.
type echo struct{}

func (echo) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "echo", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (echo) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	return &sdk.Result{Structured: req.Arguments}, nil
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func invokeEcho(t *testing.T, c *client.Client) {
	t.Helper()
	res, err := c.Invoke(ctxT(t), &sdk.Request{Arguments: json.RawMessage(`{"n":1}`)})
	if err != nil || string(res.Structured) != `{"n":1}` {
		t.Fatalf("invoke: %v %v", res, err)
	}
}

// An adapter served in debug mode is attached to, and left running when
// the client is done with it.
func TestAttach(t *testing.T) {
	rc := adaptertest.Serve(t, echo{})
	if rc.Protocol != "grpc" || rc.ProtocolVersion != 1 || rc.PID != os.Getpid() || rc.Address == "" {
		t.Fatalf("reattach config = %+v", rc)
	}
	for range 2 {
		p, err := client.Start(client.Config{Reattach: &rc})
		if err != nil {
			t.Fatal(err)
		}
		info, err := p.Describe(ctxT(t), "test")
		if err != nil || info.Name != "echo" || info.ProtocolVersion != 1 || !info.Serves(sdk.ModeUnary) {
			t.Fatalf("describe: %+v %v", info, err)
		}
		invokeEcho(t, p.Client)
		if err := p.Ping(context.Background()); err != nil || !p.Alive() || p.Exited() || p.PID() != os.Getpid() {
			t.Fatalf("ping %v, alive %v, exited %v, pid %d", err, p.Alive(), p.Exited(), p.PID())
		}
		p.Kill() // closes the connection only: the next round attaches again
	}

	bad := rc
	bad.ProtocolVersion = 9
	if _, err := client.Start(client.Config{Reattach: &bad}); err == nil || !strings.Contains(err.Error(), "protocol version 9") {
		t.Errorf("another protocol version: %v", err)
	}
	if _, err := client.Start(client.Config{}); err == nil {
		t.Error("a config with neither Cmd nor Reattach")
	}
}

func TestReattachFromEnv(t *testing.T) {
	t.Setenv(sdk.ReattachEnv, `{"rest":{"protocol":"grpc","protocol_version":1,"network":"unix","address":"/tmp/x","pid":42}}`)
	rc, err := client.ReattachFromEnv("rest")
	if err != nil || rc == nil || *rc != (sdk.ReattachConfig{Protocol: "grpc", ProtocolVersion: 1, Network: "unix", Address: "/tmp/x", PID: 42}) {
		t.Errorf("rest: %+v %v", rc, err)
	}
	if rc, err := client.ReattachFromEnv("grpc"); rc != nil || err != nil {
		t.Errorf("an adapter the variable does not name: %+v %v", rc, err)
	}
	t.Setenv(sdk.ReattachEnv, `{"rest":`)
	if _, err := client.ReattachFromEnv("rest"); err == nil || !strings.Contains(err.Error(), sdk.ReattachEnv) {
		t.Errorf("bad JSON: %v", err)
	}
}

// WithManagedDebug serves in the foreground, prints the line a gateway is
// started with, keeps serving after a client leaves, and stops on an
// interrupt.
func TestManagedDebug(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an adapter process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CRANK_CLIENT_TEST_DEBUG=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("no output: %v", lines.Err())
	}
	name, value, ok := strings.Cut(lines.Text(), "=")
	if !ok || name != sdk.ReattachEnv || !strings.HasPrefix(value, "'") || !strings.HasSuffix(value, "'") {
		t.Fatalf("printed %q", lines.Text())
	}
	t.Setenv(sdk.ReattachEnv, strings.Trim(value, "'"))
	rc, err := client.ReattachFromEnv("echo")
	if err != nil || rc == nil || rc.PID != cmd.Process.Pid {
		t.Fatalf("reattach config %+v %v (pid %d)", rc, err, cmd.Process.Pid)
	}
	for range 2 {
		p, err := client.Start(client.Config{Reattach: rc})
		if err != nil {
			t.Fatal(err)
		}
		invokeEcho(t, p.Client)
		p.Kill()
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after an interrupt: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the adapter did not stop on an interrupt")
	}
}
