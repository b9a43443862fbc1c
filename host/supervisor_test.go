package host_test

import (
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
	f, err := newFixtureWith(t, catalogYAML, host.SupervisorOptions{
		HealthInterval: 100 * time.Millisecond, PingTimeout: 200 * time.Millisecond})
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
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	res := call(t, f.h, "echo", `{"id":2}`)
	if !res.IsError || !strings.Contains(res.Text, `adapter "test" stopped during the call of tool "echo"`) {
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
