package caddymodule

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A built-in adapter runs as its own executable when one sits beside the
// gateway's, else as the gateway's executable with the crank-adapter
// subcommand; a file there that is not executable is not run.
func TestBuiltinSpecPrefersAdapterExecutable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "crank")
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("crank", 0o755)
	write("crank-adapter-rest", 0o755)
	write("crank-adapter-soap", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "crank-adapter-grpc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, command string
		args          []string
	}{
		{"rest", filepath.Join(dir, "crank-adapter-rest"), nil},
		{"soap", exe, []string{AdapterCommand, "soap"}},
		{"grpc", exe, []string{AdapterCommand, "grpc"}},
		{"graphql", exe, []string{AdapterCommand, "graphql"}},
	} {
		spec, ok := builtinSpecOf(exe, tc.name)
		if !ok || spec.Name != tc.name || spec.Command != tc.command || !slices.Equal(spec.Args, tc.args) {
			t.Errorf("%s: %+v %v, want %s %v", tc.name, spec, ok, tc.command, tc.args)
		}
	}
	if _, ok := builtinSpecOf(exe, "acme"); ok {
		t.Error("acme is not built in")
	}
}
