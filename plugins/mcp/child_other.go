//go:build !linux

package mcp

import (
	"os"
	"syscall"
)

// childSysProcAttr: outside Linux a child has no parent-death signal; the
// adapter ends its children when it closes their sessions.
func childSysProcAttr() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) error { return p.Signal(os.Interrupt) }
