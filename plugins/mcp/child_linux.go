package mcp

import (
	"os"
	"syscall"
)

// childSysProcAttr makes a stdio upstream receive SIGKILL when the
// adapter's thread that started it ends (the adapter exits or is killed),
// so no child outlives the adapter.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
