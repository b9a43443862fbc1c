package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/plugins/sdk"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapio"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// AdapterSpec identifies an adapter executable. Two specs with the same Key
// share one process.
type AdapterSpec struct {
	// Name is the adapter name operations refer to.
	Name    string
	Command string
	Args    []string
	// Env is extra NAME=value environment for the process.
	Env []string
}

// AdapterSpecOf returns how to run the named adapter of f: the file's
// own declaration when it has one, otherwise builtin's answer (nil
// builtin: no built-ins).
func AdapterSpecOf(f *opsfile.File, name string, builtin func(name string) (AdapterSpec, bool)) (AdapterSpec, error) {
	if d, ok := f.Adapters[name]; ok {
		spec := AdapterSpec{Name: name, Command: d.Command, Args: d.Args}
		for k, v := range d.Env {
			spec.Env = append(spec.Env, k+"="+v)
		}
		slices.Sort(spec.Env)
		return spec, nil
	}
	if builtin != nil {
		if spec, ok := builtin(name); ok {
			return spec, nil
		}
	}
	return AdapterSpec{}, fmt.Errorf("no adapter named %q: declare it under adapters: in the operations file or use a built-in one", name)
}

// Key is the identity of the process the spec describes.
func (s AdapterSpec) Key() string {
	env := slices.Clone(s.Env)
	slices.Sort(env)
	return strings.Join([]string{s.Name, s.Command, strings.Join(s.Args, "\x1f"), strings.Join(env, "\x1f")}, "\x1e")
}

// SupervisorOptions tune a Supervisor.
type SupervisorOptions struct {
	Logger *zap.Logger
	// HealthInterval is how often a running adapter is pinged; a failed
	// ping kills it so the next call restarts it. Default 10s; negative
	// disables pinging.
	HealthInterval time.Duration
	// PingTimeout bounds one health ping: an adapter that does not answer
	// in time (stopped, deadlocked) counts as failed. Default 5s.
	PingTimeout time.Duration
	// StartTimeout bounds the process start and handshake. Default 10s.
	StartTimeout time.Duration
	// MaxBackoff caps the wait between failed starts. Default 30s.
	MaxBackoff time.Duration
	// HostVersion is sent to the adapter in Describe.
	HostVersion string
}

// Supervisor runs one adapter process: it starts it through go-plugin,
// describes it, health-pings it, and restarts it on the next call after it
// exits. It is safe for concurrent use.
type Supervisor struct {
	spec AdapterSpec
	opts SupervisorOptions
	log  *zap.Logger

	mu        sync.Mutex
	proc      *client.Process
	desc      *client.Info
	starts    int
	failures  int // consecutive failed starts
	nextStart time.Time
	lastErr   error
	closed    bool
	// pingKilled: the health loop stopped the process (not a crash).
	pingKilled bool
	unwatch    func() // ends crank_adapter_up's report of it

	// stopped ends with Close: the health loop and a ping in flight.
	stopped    context.Context
	stopHealth context.CancelFunc
	done       chan struct{}
}

// NewSupervisor returns a supervisor for spec. The process starts on the
// first call to Start or Client.
func NewSupervisor(spec AdapterSpec, opts SupervisorOptions) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = 10 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.PingTimeout <= 0 {
		opts.PingTimeout = 5 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	s := &Supervisor{
		spec: spec, opts: opts,
		log:  opts.Logger.With(zap.String("adapter", spec.Name)),
		done: make(chan struct{}),
	}
	s.stopped, s.stopHealth = context.WithCancel(context.Background())
	s.unwatch = telemetry.WatchAdapter(s)
	if opts.HealthInterval > 0 {
		go s.healthLoop()
	} else {
		close(s.done)
	}
	return s
}

// Spec returns the adapter spec.
func (s *Supervisor) Spec() AdapterSpec { return s.spec }

// Start starts the process if it is not running and returns its
// description.
func (s *Supervisor) Start(ctx context.Context) (*client.Info, error) {
	if _, err := s.Client(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desc, nil
}

// Description returns what the running adapter said of itself, or nil.
func (s *Supervisor) Description() *client.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desc
}

// Starts is how many times the process has been started.
func (s *Supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// PID is the process id of the running adapter, 0 when none runs.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Health reports the supervisor's view of the process: how many starts
// in a row failed, and the last start error ("" when the last start
// worked). The error may name the command, never the operation config.
func (s *Supervisor) Health() (failures int, lastErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr != nil {
		lastErr = s.lastErr.Error()
	}
	return s.failures, lastErr
}

// Exited reports whether the adapter process is known to have exited
// (or never started).
func (s *Supervisor) Exited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc == nil || s.proc.Exited()
}

// ErrClosed is returned by a closed supervisor.
var ErrClosed = errors.New("adapter supervisor closed")

// Client returns a client of a live adapter process, starting or
// restarting it when needed. After failed starts it waits out a backoff
// and, meanwhile, fails fast with the last start error.
func (s *Supervisor) Client(ctx context.Context) (*client.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.proc != nil && s.proc.Alive() {
		return s.proc.Client, nil
	}
	if s.proc != nil {
		if !s.pingKilled {
			telemetry.AdapterCrashed(s.spec.Name)
		}
		s.log.Warn("adapter process is gone; restarting", zap.Int("starts", s.starts))
		s.proc.Kill()
		s.proc = nil
	}
	if wait := time.Until(s.nextStart); wait > 0 {
		return nil, fmt.Errorf("adapter %q failed to start %d time(s); next attempt in %s: %w",
			s.spec.Name, s.failures, wait.Round(time.Millisecond), s.lastErr)
	}
	if err := s.startLocked(ctx); err != nil {
		telemetry.AdapterStartFailed(s.spec.Name)
		s.failures++
		s.lastErr = err
		s.nextStart = time.Now().Add(sdk.Backoff{Initial: 100 * time.Millisecond, Max: s.opts.MaxBackoff}.Delay(s.failures))
		return nil, err
	}
	s.failures, s.lastErr, s.nextStart = 0, nil, time.Time{}
	return s.proc.Client, nil
}

// startLocked launches the adapter, or attaches to it when the
// environment variable sdk.ReattachEnv names it, and describes it.
func (s *Supervisor) startLocked(ctx context.Context) error {
	cfg := client.Config{
		StartTimeout: s.opts.StartTimeout,
		// Telemetry of every call and the adapter's spans (telemetry.go).
		Observe: s.observe, OnSpans: s.exportSpans,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "adapter." + s.spec.Name,
			Output: &zapio.Writer{Log: s.log, Level: zap.InfoLevel},
			Level:  hclog.Info,
		}),
	}
	rc, err := client.ReattachFromEnv(s.spec.Name)
	if err != nil {
		return fmt.Errorf("adapter %q: %w", s.spec.Name, err)
	}
	what := s.spec.Command
	if rc != nil {
		cfg.Reattach = rc
		what = fmt.Sprintf("the process to attach to (pid %d, %s %s)", rc.PID, rc.Network, rc.Address)
	} else {
		cfg.Cmd = exec.Command(s.spec.Command, s.spec.Args...)
		cfg.Cmd.Env = append(adapterBaseEnv(), s.spec.Env...)
	}
	proc, err := client.Start(cfg)
	if err != nil {
		return fmt.Errorf("adapter %q: cannot start %s: %w", s.spec.Name, what, err)
	}
	// The start serves every caller waiting for the adapter, not only the
	// one that triggered it: that caller giving up (a window cut short, a
	// client gone) must not fail the start for the others and put the
	// adapter into backoff.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.StartTimeout)
	defer cancel()
	desc, err := proc.Describe(dctx, s.opts.HostVersion)
	if err != nil {
		proc.Kill()
		return fmt.Errorf("adapter %q: describe: %w", s.spec.Name, err)
	}
	telemetry.AdapterStarted(s.spec.Name, s.starts > 0)
	s.proc, s.desc, s.pingKilled = proc, desc, false
	s.starts++
	s.log.Info("adapter started",
		zap.String("name", desc.Name), zap.String("version", desc.Version),
		zap.Int("protocol", desc.ProtocolVersion), zap.Int("pid", proc.PID()),
		zap.Bool("attached", rc != nil), zap.Int("starts", s.starts))
	return nil
}

func (s *Supervisor) healthLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stopped.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p == nil || p.Exited() {
			continue
		}
		ctx, cancel := context.WithTimeout(s.stopped, s.opts.PingTimeout)
		err := p.Ping(ctx)
		cancel()
		if s.stopped.Err() != nil {
			return
		}
		if err != nil {
			telemetry.AdapterPingFailed(s.spec.Name)
			s.mu.Lock()
			if s.proc == p {
				s.pingKilled = true
			}
			s.mu.Unlock()
			s.log.Warn("adapter failed its health ping; stopping it so the next call restarts it", zap.Error(err))
			p.Kill()
		}
	}
}

// Close stops the health loop and the process.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	s.unwatch()
	s.stopHealth()
	<-s.done
	if p != nil {
		p.Kill()
	}
	return nil
}

// inheritedEnv are the gateway environment variables an adapter process
// inherits. Everything else (API tokens above all) stays with the gateway:
// secrets reach an adapter only through the operation config it needs.
var inheritedEnv = []string{
	"PATH", "HOME", "TMPDIR", "TZ", "LANG", "LC_ALL",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"GODEBUG", "GOMAXPROCS", "GOMEMLIMIT",
}

func adapterBaseEnv() []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
