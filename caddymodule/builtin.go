package caddymodule

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/plugins/graphql"
	grpcadapter "github.com/crankmcp/crank/plugins/grpc"
	mcpadapter "github.com/crankmcp/crank/plugins/mcp"
	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/soap"
	"github.com/crankmcp/crank/plugins/websocket"
)

// AdapterCommand is the subcommand under which this executable runs a
// built-in adapter as a child process.
const AdapterCommand = "crank-adapter"

// builtins are the adapters compiled into this executable.
var builtins = map[string]func() sdk.Adapter{
	rest.Name:        rest.New,
	graphql.Name:     graphql.New,
	grpcadapter.Name: grpcadapter.New,
	mcpadapter.Name:  mcpadapter.New,
	soap.Name:        soap.New,
	websocket.Name:   websocket.New,
}

// BuiltinAdapters lists the built-in adapter names.
func BuiltinAdapters() []string {
	var names []string
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// builtinSpec runs a built-in adapter (builtinSpecOf this executable).
func builtinSpec(name string) (host.AdapterSpec, bool) {
	exe, err := os.Executable()
	if err != nil {
		return host.AdapterSpec{}, false
	}
	return builtinSpecOf(exe, name)
}

// builtinSpecOf runs the built-in adapter name of the gateway executable
// exe: the adapter's own executable when one sits beside exe, named
// crank-adapter-<name> (`make build` and the container image put them
// there, built from the same source), else `<exe> crank-adapter <name>`.
// Both serve the same adapter; the standalone executable starts in about
// a third of the time (spawn to first answered call, BenchmarkAdapterStart),
// since it does not link and initialise Caddy and its modules.
func builtinSpecOf(exe, name string) (host.AdapterSpec, bool) {
	if _, ok := builtins[name]; !ok {
		return host.AdapterSpec{}, false
	}
	own := filepath.Join(filepath.Dir(exe), "crank-adapter-"+name)
	if fi, err := os.Stat(own); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return host.AdapterSpec{Name: name, Command: own}, true
	}
	return host.AdapterSpec{Name: name, Command: exe, Args: []string{AdapterCommand, name}}, true
}

func init() {
	flags := flag.NewFlagSet(AdapterCommand, flag.ContinueOnError)
	flags.Bool("debug", false, "serve in the foreground for a debugger and print the "+sdk.ReattachEnv+" line that makes a gateway attach to it")
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  AdapterCommand,
		Usage: "[--debug] <name>",
		Short: "Runs a built-in Crank adapter (started by the gateway, not by hand)",
		Long: `Runs one of the adapters compiled into this executable as a go-plugin
process. The Crank gateway starts it itself; running it by hand only prints
a notice. Built-in adapters: ` + strings.Join(BuiltinAdapters(), ", ") + `.

With --debug the adapter serves in the foreground (under a debugger, say)
until interrupted, and prints a line ` + sdk.ReattachEnv + `='{...}'.
A gateway started with that variable in its environment attaches to this
process instead of launching the adapter, and leaves it running.`,
		Func: func(fl caddycmd.Flags) (int, error) {
			name := fl.Arg(0)
			newAdapter, ok := builtins[name]
			if !ok {
				return caddy.ExitCodeFailedStartup, fmt.Errorf("unknown built-in adapter %q (built-in: %s)", name, strings.Join(BuiltinAdapters(), ", "))
			}
			var opts []sdk.ServeOption
			if fl.Bool("debug") {
				opts = append(opts, sdk.WithManagedDebug())
			}
			if err := sdk.Serve(newAdapter(), opts...); err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			return caddy.ExitCodeSuccess, nil
		},
		Flags: flags,
	})
}
