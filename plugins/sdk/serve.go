package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
)

// ReattachEnv is the environment variable through which the host attaches
// to adapters that already run instead of launching them: a JSON object
// from adapter name to ReattachConfig, as an adapter served with
// WithManagedDebug prints it. The host does not stop an adapter it
// attached to.
const ReattachEnv = "CRANK_REATTACH_ADAPTERS"

// ReattachConfig says where an adapter served in debug mode listens, so
// that a host can attach to it.
type ReattachConfig struct {
	// Protocol is the go-plugin protocol, "grpc".
	Protocol string `json:"protocol"`
	// ProtocolVersion is the adapter protocol version served.
	ProtocolVersion int `json:"protocol_version"`
	// Network and Address are where it listens, e.g. "unix" and a socket
	// path.
	Network string `json:"network"`
	Address string `json:"address"`
	// PID is the adapter's process id.
	PID int `json:"pid"`
}

// ServeOption configures Serve.
type ServeOption func(*serveOptions) error

type serveOptions struct {
	logger  hclog.Logger
	managed bool
	debug   *debugOptions
}

type debugOptions struct {
	ctx      context.Context
	reattach chan<- ReattachConfig
	closed   chan<- struct{}
}

// WithLogger sets the logger of the plugin machinery (go-plugin's server).
// The default writes JSON lines at level Info to stderr, which the host
// reads into its own log. An adapter's own logs go wherever it writes
// them; stderr reaches the host's log too.
func WithLogger(l hclog.Logger) ServeOption {
	return func(o *serveOptions) error {
		o.logger = l
		return nil
	}
}

// WithDebug serves the adapter in this process until ctx is done, instead
// of as a process the host launched: Serve sends where it listens on
// reattach (once; make it buffered or read it) and closes closed when it
// has stopped. It is for tests (package adaptertest serves adapters this
// way) and for tools that manage the process themselves; use
// WithManagedDebug to run an adapter under a debugger.
func WithDebug(ctx context.Context, reattach chan<- ReattachConfig, closed chan<- struct{}) ServeOption {
	return func(o *serveOptions) error {
		if o.managed {
			return errors.New("sdk: WithDebug and WithManagedDebug exclude each other")
		}
		o.debug = &debugOptions{ctx: ctx, reattach: reattach, closed: closed}
		return nil
	}
}

// WithManagedDebug serves the adapter in the foreground, for running it
// under a debugger: Serve prints a line
//
//	CRANK_REATTACH_ADAPTERS='{"<name>":{...}}'
//
// to stdout and serves until interrupted (Ctrl-C or SIGTERM). A gateway
// started with that variable in its environment attaches to this process
// instead of launching the adapter, and leaves it running when it stops.
// Several adapters attach at once when their objects are merged into one.
func WithManagedDebug() ServeOption {
	return func(o *serveOptions) error {
		if o.debug != nil {
			return errors.New("sdk: WithDebug and WithManagedDebug exclude each other")
		}
		o.managed = true
		return nil
	}
}

// Serve runs the adapter as a go-plugin process and returns when the host
// ends it. Call it from main:
//
//	func main() {
//		if err := sdk.Serve(myAdapter{}); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Started by hand rather than by a host, the process prints a notice and
// exits. It also exits when the host that started it is gone (killed
// without a chance to stop its adapters). Serve returns an error only when
// the options are wrong or debug serving fails to start.
func Serve(a Adapter, opts ...ServeOption) error {
	var o serveOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	if o.logger == nil {
		o.logger = hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Info, JSONFormat: true})
	}
	adapterLog.Store(&o.logger) // recover.go
	cfg := &plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.PluginSets(&server{impl: a}),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			// connWatch tells a resumable call whose host died from one
			// the host cancelled (hostgone.go).
			return grpc.NewServer(append(opts, append(wire.ServerOptions(), grpc.StatsHandler(connWatch{}))...)...)
		},
		Logger: o.logger,
	}
	switch {
	case o.managed:
		return serveManaged(a, cfg)
	case o.debug != nil:
		serveDebug(cfg, o.debug)
		return nil
	}
	defer exitWhenOrphaned()()
	plugin.Serve(cfg)
	return nil
}

// serveDebug serves in this process until d.ctx is done.
func serveDebug(cfg *plugin.ServeConfig, d *debugOptions) {
	rcs := make(chan *plugin.ReattachConfig, 1)
	cfg.Test = &plugin.ServeTestConfig{Context: d.ctx, ReattachConfigCh: rcs, CloseCh: d.closed}
	served := make(chan struct{})
	go func() {
		select {
		case rc := <-rcs:
			select {
			case d.reattach <- reattachConfig(rc):
			case <-d.ctx.Done():
			}
		case <-served:
		}
	}()
	defer close(served)
	plugin.Serve(cfg)
}

// serveManaged serves in the foreground, prints how to attach and waits
// for an interrupt.
func serveManaged(a Adapter, cfg *plugin.ServeConfig) error {
	d, err := a.Describe(context.Background())
	if err != nil {
		return fmt.Errorf("sdk: describe the adapter: %w", err)
	}
	if d.Name == "" {
		return errors.New("sdk: the adapter's Describe returned no name to attach it by")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reattach := make(chan ReattachConfig, 1)
	closed := make(chan struct{})
	go serveDebug(cfg, &debugOptions{ctx: ctx, reattach: reattach, closed: closed})
	var rc ReattachConfig
	select {
	case rc = <-reattach:
	case <-closed:
		return errors.New("sdk: the debug server stopped before it listened")
	case <-time.After(10 * time.Second):
		return errors.New("sdk: the debug server did not start listening within 10s")
	}
	env, err := json.Marshal(map[string]ReattachConfig{d.Name: rc})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "adapter %q serves in debug mode (pid %d); start the gateway with this variable in its environment, and stop the adapter with Ctrl-C:\n", d.Name, rc.PID)
	fmt.Printf("%s='%s'\n", ReattachEnv, strings.ReplaceAll(string(env), "'", `'"'"'`))
	<-closed
	return nil
}

func reattachConfig(rc *plugin.ReattachConfig) ReattachConfig {
	return ReattachConfig{
		Protocol:        string(rc.Protocol),
		ProtocolVersion: rc.ProtocolVersion,
		Network:         rc.Addr.Network(),
		Address:         rc.Addr.String(),
		PID:             rc.Pid,
	}
}
