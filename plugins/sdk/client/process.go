package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
)

// Config says which adapter process to start.
type Config struct {
	// Cmd launches the adapter executable. Its Env is the adapter's whole
	// environment: the host's own is not inherited (secrets stay with the
	// host).
	Cmd *exec.Cmd
	// Reattach, instead of Cmd, attaches to an adapter that already runs
	// (served with sdk.WithManagedDebug, see ReattachFromEnv). Kill leaves
	// such a process running.
	Reattach *sdk.ReattachConfig
	// Logger receives go-plugin's log and the adapter's stderr; nothing
	// is logged when nil.
	Logger hclog.Logger
	// StartTimeout bounds the start and handshake; go-plugin's default
	// (one minute) when zero.
	StartTimeout time.Duration
	// OnSpans, when set, receives the spans the adapter sends back with
	// its answers to calls whose request asked for them
	// (sdk.RequestContext.RecordSpans), for the host to export. It is
	// called from the calling goroutine and must not block.
	OnSpans func([]Span)
	// Observe, when set, sees every call (see Observer).
	Observe Observer
}

// Process is a running adapter process and the client calling it. A
// launched process is called over mutually authenticated TLS (go-plugin's
// AutoMTLS) on a local socket.
type Process struct {
	*Client
	plugin   *plugin.Client
	conn     *grpc.ClientConn
	pid      int // of a started process, kept after it exits
	attached bool
}

// Start launches the adapter (or attaches to it) and negotiates the
// protocol version through the go-plugin handshake. The adapter is not
// described yet: call Describe.
func Start(cfg Config) (*Process, error) {
	if (cfg.Cmd == nil) == (cfg.Reattach == nil) {
		return nil, errors.New("client: exactly one of Config.Cmd and Config.Reattach must be set")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	pc := &plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.PluginSets(nil),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     cfg.StartTimeout,
		Logger:           logger,
		GRPCDialOptions:  wire.DialOptions(),
	}
	if cfg.Reattach != nil {
		rc, err := reattachConfig(cfg.Reattach)
		if err != nil {
			return nil, err
		}
		pc.Reattach = rc
		pc.Plugins = pc.VersionedPlugins[rc.ProtocolVersion]
	} else {
		pc.Cmd = cfg.Cmd
		pc.AutoMTLS = true
		pc.Managed = true
		pc.SkipHostEnv = true
	}
	var stderr *tailWriter
	if cfg.Cmd != nil {
		stderr = &tailWriter{max: 1024}
		pc.Stderr = stderr
	}
	c := plugin.NewClient(pc)
	cp, err := c.Client()
	if err != nil {
		c.Kill() // waits for the stderr copy to end
		return nil, startError(err, stderr)
	}
	raw, err := cp.Dispense(wire.PluginName)
	if err != nil {
		c.Kill()
		return nil, err
	}
	conn, ok := raw.(*grpc.ClientConn)
	if !ok {
		c.Kill()
		return nil, fmt.Errorf("client: unexpected plugin type %T", raw)
	}
	cl := New(conn)
	cl.version = c.NegotiatedVersion()
	cl.onSpans, cl.observer = cfg.OnSpans, cfg.Observe
	pr := &Process{Client: cl, plugin: c, conn: conn, attached: cfg.Reattach != nil}
	if rc := c.ReattachConfig(); rc != nil {
		pr.pid = rc.Pid
	}
	return pr, nil
}

// reattachConfig turns an SDK reattach config into go-plugin's. The
// process is attached to in go-plugin's test mode, in which the client
// never stops it.
func reattachConfig(rc *sdk.ReattachConfig) (*plugin.ReattachConfig, error) {
	if _, ok := wire.PluginSets(nil)[rc.ProtocolVersion]; !ok {
		return nil, fmt.Errorf("client: the adapter to attach to speaks protocol version %d; this host speaks %d",
			rc.ProtocolVersion, wire.ProtocolVersion)
	}
	var addr net.Addr
	var err error
	switch rc.Network {
	case "unix":
		addr, err = net.ResolveUnixAddr(rc.Network, rc.Address)
	case "tcp":
		addr, err = net.ResolveTCPAddr(rc.Network, rc.Address)
	default:
		err = fmt.Errorf("unknown network %q", rc.Network)
	}
	if err != nil {
		return nil, fmt.Errorf("client: reattach address: %w", err)
	}
	protocol := plugin.Protocol(rc.Protocol)
	if protocol != plugin.ProtocolGRPC {
		return nil, fmt.Errorf("client: reattach protocol %q is not %q", rc.Protocol, plugin.ProtocolGRPC)
	}
	return &plugin.ReattachConfig{Protocol: protocol, ProtocolVersion: rc.ProtocolVersion, Addr: addr, Pid: rc.PID, Test: true}, nil
}

// ReattachFromEnv returns where the adapter named name runs when the
// environment variable sdk.ReattachEnv names it, or nil.
func ReattachFromEnv(name string) (*sdk.ReattachConfig, error) {
	v := os.Getenv(sdk.ReattachEnv)
	if v == "" {
		return nil, nil
	}
	var m map[string]sdk.ReattachConfig
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("%s: %w", sdk.ReattachEnv, err)
	}
	rc, ok := m[name]
	if !ok {
		return nil, nil
	}
	return &rc, nil
}

// Ping checks that the adapter answers go-plugin's health check before
// ctx ends. A stopped or wedged process keeps its connection open and
// never answers, so callers bound ctx.
func (p *Process) Ping(ctx context.Context) error {
	_, err := grpc_health_v1.NewHealthClient(p.conn).Check(ctx,
		&grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
	return err
}

// Alive is a cheap check that the process runs and its connection is not
// broken.
func (p *Process) Alive() bool {
	if p.plugin.Exited() {
		return false
	}
	st := p.conn.GetState()
	return st != connectivity.Shutdown && st != connectivity.TransientFailure
}

// Exited reports whether the process is known to have exited.
func (p *Process) Exited() bool { return p.plugin.Exited() }

// killGrace is how long Kill waits for go-plugin's graceful shutdown
// (which itself force-kills a process that does not exit within 2s of
// being asked) before it kills the process by its pid.
const killGrace = 5 * time.Second

// Kill stops the process: gracefully, then by force. A process that
// cannot take part in the graceful shutdown (stopped by a signal,
// deadlocked) would hold go-plugin's shutdown call forever; after
// killGrace it is killed by its pid. An attached process is left running;
// only the connection to it is closed.
func (p *Process) Kill() {
	if p.attached {
		_ = p.conn.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.plugin.Kill()
	}()
	select {
	case <-done:
		return
	case <-time.After(killGrace):
	}
	if p.pid > 0 {
		if proc, err := os.FindProcess(p.pid); err == nil {
			_ = proc.Kill()
		}
	}
	<-done
}

// PID is the adapter's process id, 0 once it has exited.
func (p *Process) PID() int {
	if p.plugin.Exited() {
		return 0
	}
	if rc := p.plugin.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// startError says why a launched process did not start, shorter than
// go-plugin's diagnosis, with the end of what the process wrote to
// stderr: a program that is no adapter, or an adapter that exits before
// its handshake, usually says why there.
func startError(err error, stderr *tailWriter) error {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if strings.Contains(err.Error(), "Failed to read any lines from plugin's stdout") {
		msg = "it exited or closed its stdout without the go-plugin handshake (is it a Crank adapter?)"
	}
	if tail := stderr.String(); tail != "" {
		return fmt.Errorf("%s; its stderr ends with: %q", msg, tail)
	}
	return errors.New(msg)
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.b))
}
