package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
)

// An adapter that stops answering (here stopped by SIGSTOP, as a deadlock
// or a paused container would) fails its health ping: it is killed, the
// call waiting on it gets a clear error instead of waiting out its
// timeout, and the next call runs on a restarted process.
func TestHungAdapterIsReplaced(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "called")
	f, err := newFixtureWith(t, catalogYAML+`
  - name: held
    description: Holds the call until the process is stopped.
    adapter: test
    timeout: 60s
    config: {behavior: mark_hang, file: "`+marker+`"}
`, host.SupervisorOptions{HealthInterval: 100 * time.Millisecond, PingTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, f.h, "echo", `{"id":1}`); res.IsError {
		t.Fatal(res.Text)
	}
	starts, pid := f.sup.Starts(), f.sup.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}
	// The call is in the adapter's hands before the process stops, so
	// nothing but the health check can end it (a ping that failed first
	// would have the call run on a new process).
	held := make(chan *host.Result, 1)
	go func() {
		res, _ := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("held"), Arguments: []byte(`{}`)})
		held <- res
	}()
	waitFor(t, func() bool { _, err := os.Stat(marker); return err == nil })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	var res *host.Result
	select {
	case res = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the call to the stopped adapter still waits after 30s")
	}
	if res == nil || !res.IsError || !strings.Contains(res.Text, `adapter "test" stopped during the call of tool "held"`) {
		t.Fatalf("call to the stopped adapter: %+v", res)
	}
	waitFor(t, f.sup.Exited)
	if res := call(t, f.h, "echo", `{"id":3}`); res.IsError {
		t.Fatalf("call after the hung adapter was replaced: %s", res.Text)
	}
	if f.sup.Starts() != starts+1 || f.sup.PID() == pid {
		t.Fatalf("starts %d pid %d, want %d and a new pid (was %d)", f.sup.Starts(), f.sup.PID(), starts+1, pid)
	}
}

// An adapter that cannot start is retried with a doubling backoff (100ms,
// 200ms, 400ms, ...), not in a tight loop; calls meanwhile fail fast with
// the last start error — which quotes the end of the process's stderr —
// and when the next attempt is.
func TestFailingStartBacksOff(t *testing.T) {
	t.Parallel()
	attempts := filepath.Join(t.TempDir(), "attempts")
	s := host.NewSupervisor(host.AdapterSpec{Name: "broken", Command: "/bin/sh",
		Args: []string{"-c", "echo start >> " + attempts + "; echo 'cannot open config' >&2; exit 3"}},
		host.SupervisorOptions{HealthInterval: -1, StartTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = s.Close() })
	count := func() int {
		b, _ := os.ReadFile(attempts)
		return strings.Count(string(b), "start")
	}
	began, calls, fastFails := time.Now(), 0, 0
	for count() < 4 {
		if time.Since(began) > time.Minute {
			t.Fatalf("%d start attempts in a minute", count())
		}
		_, err := s.Client(context.Background())
		calls++
		switch {
		case err == nil:
			t.Fatal("the broken adapter started")
		case strings.Contains(err.Error(), `adapter "broken" failed to start`) && strings.Contains(err.Error(), "next attempt in"):
			fastFails++
		}
		// The error says what the process said before it exited.
		if want := `without the go-plugin handshake (is it a Crank adapter?); its stderr ends with: "cannot open config"`; !strings.Contains(err.Error(), want) {
			t.Fatalf("start error %q, want it to contain %q", err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Four attempts are at least half of 100+200+400ms apart (sdk.Backoff
	// keeps half of each delay and draws the rest): load only adds to it.
	if took := time.Since(began); took < 350*time.Millisecond {
		t.Errorf("4 start attempts within %s: the backoff was not kept", took)
	}
	if fastFails < calls/2 {
		t.Errorf("%d of %d calls failed fast while the adapter was backing off", fastFails, calls)
	}
}
