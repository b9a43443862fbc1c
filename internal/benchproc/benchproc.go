// Package benchproc is what the benchmarks that measure processes of
// their own (a gateway, an adapter, a bare server, an upstream) beside the
// one that runs them share: the CPU time a process used, and the test
// binary run again as such a process. Tests only.
package benchproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartSelf runs this test binary again with args and env added (an init
// function or a test of its own then serves what env asks for) and
// returns its process id, stdin and stdout. Closing stdin ends it; the
// benchmark's end does.
func StartSelf(tb testing.TB, env string, args ...string) (int, io.WriteCloser, *bufio.Reader) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid, stdin, bufio.NewReader(out)
}

// CPU is the CPU time the processes have used so far, in nanoseconds from
// the scheduler's accounting of each of their threads (Linux:
// /proc/<pid>/task/*/schedstat), or else in clock ticks of 10ms
// (/proc/<pid>/stat, which also counts threads that ended); 0 elsewhere.
func CPU(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		if d, ok := schedCPU(pid); ok {
			total += d
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// The fields after the command name, which is in parentheses.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			return 0
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// schedCPU sums the time on CPU of the process's threads. A Go process
// keeps its threads, so what ended threads used is negligible.
func schedCPU(pid int) (time.Duration, bool) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ns)
	}
	return total, true
}
