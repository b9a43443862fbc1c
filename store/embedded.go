package store

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/crankmcp/crank/plugins/sdk/loopback"
)

// Defaults for EmbeddedConfig.
const (
	DefaultEmbeddedName         = "crank"
	DefaultEmbeddedClientURL    = "https://127.0.0.1:2379"
	DefaultEmbeddedPeerURL      = "https://127.0.0.1:2380"
	DefaultEmbeddedStartTimeout = 15 * time.Second
	DefaultEmbeddedCompaction   = 5 * time.Minute
	// DefaultEmbeddedQuotaBytes is the embedded etcd's space quota, etcd's
	// own default made explicit: the database size at which it refuses
	// writes (the NOSPACE alarm).
	DefaultEmbeddedQuotaBytes = 2 << 30
	// embeddedCloseWait bounds how long StartEmbedded waits for a server
	// that failed to become ready to shut down.
	embeddedCloseWait = 5 * time.Second
)

// EmbeddedConfig configures a single-member etcd server run in-process.
//
// The server is this process's own: it listens on loopback addresses only
// and serves TLS on both its listeners, requiring a client certificate
// signed by a CA made for its data directory. StartEmbedded makes these
// credentials on first start and keeps them in <DataDir>/crank-tls (files
// of mode 0600, reused by later starts); Embedded.ClientTLS names the
// client's files. Only a process that can read the data directory can
// talk to the server.
type EmbeddedConfig struct {
	// DataDir holds the member's WAL and database, and its credentials.
	// Required.
	DataDir string
	// Name is the member name; DefaultEmbeddedName when empty.
	Name string
	// ClientURL is where clients connect: https:// (or http://, the same:
	// the server always serves TLS) on a loopback host (127.0.0.0/8, ::1
	// or localhost) with a port; DefaultEmbeddedClientURL when empty.
	ClientURL string
	// PeerURL is the raft peer URL, like ClientURL; DefaultEmbeddedPeerURL
	// when empty. A single member still listens on it.
	PeerURL string
	// UnsafeNoFsync disables fsync: for tests only, loses data on a crash.
	UnsafeNoFsync bool
	// Logger receives etcd's warnings and errors (etcd is noisy at info);
	// nil discards etcd's logs.
	Logger *zap.Logger
	// StartTimeout bounds the start until the server is ready to serve;
	// DefaultEmbeddedStartTimeout when zero.
	StartTimeout time.Duration
	// CompactionRetention is how much key history the server keeps before
	// compacting it (etcd's periodic auto-compaction); without compaction
	// every put and touch grows the database until etcd's space quota stops
	// all writes. DefaultEmbeddedCompaction when zero.
	CompactionRetention time.Duration
	// QuotaBytes is the space quota (etcd's --quota-backend-bytes): once
	// the database file would grow beyond it, etcd raises its NOSPACE alarm
	// and refuses every write until space is freed and the alarm disarmed
	// (Etcd.RecoverSpace). DefaultEmbeddedQuotaBytes when zero.
	QuotaBytes int64
}

// Embedded is a running in-process etcd server.
type Embedded struct {
	etcd      *embed.Etcd
	endpoints []string
	creds     embeddedCredentials
	closeOnce sync.Once
	// closing quiets the listener errors of a normal Close (embedded_log.go).
	closing *atomic.Bool
}

// StartEmbedded starts an embedded etcd server and waits until it is ready
// to serve, or fails with an error naming the URLs and data directory (port
// in use, data directory unusable, start timeout). It does not hang beyond
// StartTimeout.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	cfg, curl, purl, err := cfg.settle()
	if err != nil {
		return nil, err
	}
	timeout := cfg.StartTimeout
	if timeout <= 0 {
		timeout = DefaultEmbeddedStartTimeout
	}
	what := cfg.describe()
	creds, err := ensureEmbeddedCredentials(cfg.DataDir, certHosts(curl.Hostname(), purl.Hostname()))
	if err != nil {
		return nil, fmt.Errorf("store: start %s: %w", what, err)
	}

	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	closing := new(atomic.Bool)
	lg = lg.Named("etcd").WithOptions(atLeast(zapcore.WarnLevel), quietOnShutdown(closing))

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	ec.ListenPeerUrls = []url.URL{*purl}
	ec.AdvertisePeerUrls = []url.URL{*purl}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	// Both listeners require a client certificate of the data directory's
	// CA; the JSON gateway (plain HTTP requests a browser could send) is
	// off.
	tlsInfo := transport.TLSInfo{CertFile: creds.serverCert, KeyFile: creds.serverKey, TrustedCAFile: creds.ca, ClientCertAuth: true}
	ec.ClientTLSInfo = tlsInfo
	ec.PeerTLSInfo = tlsInfo
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.LogLevel = "warn"
	retention := cfg.CompactionRetention
	if retention == 0 {
		retention = DefaultEmbeddedCompaction
	}
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = retention.String()
	ec.QuotaBackendBytes = cfg.QuotaBytes

	// embed.StartEtcd can block (e.g. on the database file lock when another
	// process uses the data directory), so it too runs under the timeout.
	type started struct {
		e   *embed.Etcd
		err error
	}
	startc := make(chan started, 1)
	abandon := make(chan struct{})
	go func() {
		e, err := embed.StartEtcd(ec)
		select {
		case startc <- started{e, err}:
		case <-abandon:
			if e != nil {
				e.Close()
			}
		}
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var e *embed.Etcd
	select {
	case s := <-startc:
		if s.err != nil {
			if errors.Is(s.err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("store: start %s: %w (another gateway with an embedded etcd, such as a second `make run`, may be running: stop it, or give this one its own client_url, peer_url and data_dir)", what, s.err)
			}
			return nil, fmt.Errorf("store: start %s: %w", what, s.err)
		}
		e = s.e
	case <-timer.C:
		close(abandon)
		// The goroutine may have sent just before abandon was closed.
		select {
		case s := <-startc:
			if s.e != nil {
				closeBounded(s.e)
			}
		default:
		}
		return nil, fmt.Errorf("store: start %s: not started within %s (is the data directory in use by another etcd?)", what, timeout)
	}

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closeBounded(e)
		return nil, fmt.Errorf("store: start %s: %w", what, err)
	case <-e.Server.StopNotify():
		closeBounded(e)
		return nil, fmt.Errorf("store: start %s: server stopped before it became ready", what)
	case <-timer.C:
		closeBounded(e)
		return nil, fmt.Errorf("store: start %s: not ready within %s", what, timeout)
	}
	return &Embedded{etcd: e, endpoints: []string{curl.String()}, creds: creds, closing: closing}, nil
}

// parseListenURL parses a listener URL of the embedded etcd: http:// or
// https:// (served as https://), a loopback host and a port.
func parseListenURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%q: must be an https:// URL", s)
	}
	if u.Port() == "" {
		return nil, fmt.Errorf("%q: a port is required", s)
	}
	if u.Path != "" && u.Path != "/" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: must be scheme, host and port only", s)
	}
	if !loopback.Host(u.Hostname()) {
		return nil, fmt.Errorf("%q: the embedded etcd listens on a loopback address only (127.0.0.1, [::1] or localhost): "+
			"it serves this process alone; replicas share an external etcd cluster (the etcd block)", s)
	}
	return &url.URL{Scheme: "https", Host: u.Host}, nil
}

// closeBounded closes e, giving up waiting after embeddedCloseWait.
func closeBounded(e *embed.Etcd) {
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(embeddedCloseWait):
	}
}

// Endpoints returns the client URLs to pass to EtcdConfig.Endpoints.
func (e *Embedded) Endpoints() []string {
	return append([]string(nil), e.endpoints...)
}

// ClientTLS returns the client credentials to pass to EtcdConfig.TLS: the
// CA that signed the server's certificate, and a client certificate and
// key the server accepts (files in the data directory).
func (e *Embedded) ClientTLS() *TLSConfig { return e.creds.clientTLS() }

// StoreConfig returns an EtcdConfig that connects to the server: its
// Endpoints and ClientTLS; the rest is left for the caller.
func (e *Embedded) StoreConfig() EtcdConfig {
	return EtcdConfig{Endpoints: e.Endpoints(), TLS: e.ClientTLS()}
}

// EmbeddedClientTLS returns the client credentials of the embedded etcd
// whose data directory is dataDir, as StartEmbedded made them (for tools
// and tests that connect to a server another process runs); they exist
// once it has started.
func EmbeddedClientTLS(dataDir string) *TLSConfig { return credentialsIn(dataDir).clientTLS() }

// Close stops the server gracefully and waits for it. It is idempotent and
// always returns nil; the error result lets Embedded serve as an io.Closer.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
	})
	return nil
}

// Check reports what StartEmbedded would refuse in cfg (no data directory,
// client or peer URLs it cannot serve) without starting anything: for
// validating a configuration before it runs.
func (cfg EmbeddedConfig) Check() error {
	_, _, _, err := cfg.settle()
	return err
}

// settle fills in cfg's defaults and parses its URLs.
func (cfg EmbeddedConfig) settle() (_ EmbeddedConfig, client, peer *url.URL, err error) {
	if cfg.DataDir == "" {
		return cfg, nil, nil, errors.New("store: embedded etcd: DataDir is required")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultEmbeddedName
	}
	if cfg.ClientURL == "" {
		cfg.ClientURL = DefaultEmbeddedClientURL
	}
	if cfg.PeerURL == "" {
		cfg.PeerURL = DefaultEmbeddedPeerURL
	}
	if cfg.QuotaBytes < 0 || cfg.CompactionRetention < 0 {
		return cfg, nil, nil, fmt.Errorf("store: %s: %w: quota_backend_bytes and auto_compaction_retention must not be negative", cfg.describe(), ErrInvalid)
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultEmbeddedQuotaBytes
	}
	if client, err = parseListenURL(cfg.ClientURL); err != nil {
		return cfg, nil, nil, fmt.Errorf("store: %s: client URL: %w", cfg.describe(), err)
	}
	if peer, err = parseListenURL(cfg.PeerURL); err != nil {
		return cfg, nil, nil, fmt.Errorf("store: %s: peer URL: %w", cfg.describe(), err)
	}
	return cfg, client, peer, nil
}

func (cfg EmbeddedConfig) describe() string {
	return fmt.Sprintf("embedded etcd (client %s, peer %s, data dir %s)", cfg.ClientURL, cfg.PeerURL, cfg.DataDir)
}
