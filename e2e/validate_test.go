package e2e

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestValidateStartsNothing: `crank validate` checks a config without
// starting any of it. It starts no etcd (the demo's etcd ports, held by
// the test, do not make it fail) and dials none (an external cluster that
// does not exist is fine), runs no adapter process, and logs no error.
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
		started, probe := filepath.Join(dir, "adapter-started"), filepath.Join(dir, "probe.sh")
		if err := os.WriteFile(probe, []byte("#!/bin/sh\ntouch "+started+"\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "ops.yaml"), `adapters:
  probe: {command: `+probe+`}
operations:
  - {name: probed, description: d, adapter: probe, config: {}}
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
		if _, err := os.Stat(started); err == nil {
			t.Error("crank validate ran the adapter probe.sh")
		}
	})
}

// validate runs `crank validate` on dir/Caddyfile and checks that it
// succeeds with no child process seen while it ran and no error-level log
// line.
func validate(t *testing.T, dir string) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(crankBin, "validate", "--config", "Caddyfile", "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home, "HOME="+home)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var children []string
	var err error
watch:
	for {
		select {
		case err = <-done:
			break watch
		default:
			children = append(children, childrenOf(cmd.Process.Pid)...)
			time.Sleep(time.Millisecond)
		}
	}
	if err != nil || !strings.Contains(out.String(), "Valid configuration") {
		t.Fatalf("crank validate: %v\n%s", err, out)
	}
	if len(children) > 0 {
		t.Errorf("crank validate started processes: %q", children)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, `"level":"error"`) {
			t.Errorf("crank validate logged an error: %s", line)
		}
	}
}

// childrenOf returns the command lines of the processes whose parent is
// pid (from Linux's /proc; none where there is no /proc).
func childrenOf(pid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		// After "pid (comm)": state, then the parent's pid.
		if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
		}
	}
	return out
}
