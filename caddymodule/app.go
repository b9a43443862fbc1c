package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/store"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the `crank` app: the state store every Crank handler shares. Its
// Provision only checks and settles the config; Start opens the store and
// starts the handlers of its config (their adapters and hosts).
type App struct {
	// Etcd connects to an external etcd cluster. When absent, an embedded
	// single-node etcd runs inside the Caddy process.
	Etcd *EtcdConfig `json:"etcd,omitempty"`
	// EmbeddedEtcd configures the embedded etcd (used when Etcd is absent).
	EmbeddedEtcd *EmbeddedEtcdConfig `json:"embedded_etcd,omitempty"`
	// Quotas cap the sessions and jobs running at once in this process
	// (defaults: 1000 each; 0: no cap).
	Quotas *ReplicaQuotas `json:"quotas,omitempty"`
	// CatalogHistory is how many versions each operations catalog keeps
	// (default 100, at most 10000); older ones are deleted as new ones
	// are written.
	CatalogHistory int `json:"catalog_history,omitempty"`
	// Tracing exports the gateway's and its adapters' spans over OTLP;
	// without it nothing is exported (trace context still passes through
	// to adapters and upstreams). Process-wide: the last loaded config's
	// block applies.
	Tracing *telemetry.TracingConfig `json:"tracing,omitempty"`

	store    *pooledStore // from Start on
	poolKey  string
	logger   *zap.Logger
	handlers []*Handler // the config's handlers, which Start starts
}

// EtcdConfig names an external etcd cluster.
type EtcdConfig struct {
	Endpoints   []string       `json:"endpoints"`
	Prefix      string         `json:"prefix,omitempty"`
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	Username    string         `json:"username,omitempty"`
	Password    string         `json:"password,omitempty"`
	// TLS connects to https:// endpoints with these files (PEM); without
	// ca_file the system roots verify the servers.
	TLS *EtcdTLSConfig `json:"tls,omitempty"`
	// OpTimeout bounds one store operation (default 5s); an operation that
	// hits it fails with a retryable "etcd unavailable" error.
	OpTimeout caddy.Duration `json:"op_timeout,omitempty"`
	// OwnerTTL is how long after a replica dies its running sessions and
	// jobs are marked failed (default 10s, at least 2s).
	OwnerTTL caddy.Duration `json:"owner_ttl,omitempty"`
	// ReplicaName names this replica in ownership records (default: the
	// host name).
	ReplicaName string `json:"replica_name,omitempty"`
}

// EtcdTLSConfig holds the TLS files for an external etcd cluster.
type EtcdTLSConfig struct {
	CAFile     string `json:"ca_file,omitempty"`
	CertFile   string `json:"cert_file,omitempty"`
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// EmbeddedEtcdConfig configures the embedded single-node etcd. It serves
// this Caddy process alone: it listens on loopback addresses only, and
// both its listeners require TLS with a client certificate that it makes
// on its first start and keeps in <data_dir>/crank-tls (mode 0600).
type EmbeddedEtcdConfig struct {
	// DataDir defaults to crank/etcd under Caddy's data directory.
	DataDir string `json:"data_dir,omitempty"`
	// ClientURL defaults to https://127.0.0.1:2379; the host must be a
	// loopback address. http:// is accepted and served as https://.
	ClientURL string `json:"client_url,omitempty"`
	// PeerURL defaults to https://127.0.0.1:2380, like ClientURL.
	PeerURL string `json:"peer_url,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	// QuotaBackendBytes is etcd's space quota: the database size at which
	// it refuses every write (its NOSPACE alarm) until space is recovered
	// (default 2 GiB). The crank app recovers by itself once expired state
	// is gone: it compacts, defragments and disarms the alarm.
	QuotaBackendBytes int64 `json:"quota_backend_bytes,omitempty"`
	// AutoCompactionRetention is how much key history etcd keeps before
	// compacting it (default 5m).
	AutoCompactionRetention caddy.Duration `json:"auto_compaction_retention,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "crank", New: func() caddy.Module { return new(App) }}
}

// storePool keeps store clients alive across reloads, keyed by the app
// config; embeddedPool keeps embedded etcd servers alive, keyed by data
// directory, so a reload that changes only client settings (a prefix)
// reuses the running server.
var (
	storePool    = caddy.NewUsagePool()
	embeddedPool = caddy.NewUsagePool()
)

type pooledStore struct {
	*store.Etcd
	embeddedKey string
	// adopters are the endpoints' hosts that may take over the store's
	// orphaned jobs (its sweeper asks them).
	adopters *host.Adopters

	stopSweeper context.CancelFunc
	sweeperDone chan struct{}
}

// newPooledStore wraps s and starts its sweeper: one per store, for as long
// as any config uses it (not once per reload). The sweeper takes over the
// jobs of dead replicas that an endpoint here can follow (host.Adopters),
// marks their other sessions and jobs failed and deletes expired entries;
// it logs
// through Caddy's default logger, which outlives any one config.
//
// For the embedded etcd, which only this process uses, the sweeper also
// recovers from a full database (NOSPACE): it deletes expired state, then
// compacts, defragments and disarms the alarm. An external cluster's space
// is its operator's to manage.
func newPooledStore(s *store.Etcd, embeddedKey string) *pooledStore {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pooledStore{Etcd: s, embeddedKey: embeddedKey, adopters: &host.Adopters{}, stopSweeper: cancel, sweeperDone: make(chan struct{})}
	lg := caddy.Log().Named("crank.sweeper")
	go func() {
		defer close(p.sweeperDone)
		cfg := store.SweeperConfig{Logger: lg, RecoverSpace: embeddedKey != "", Adopt: p.adopters.Adopt}
		if err := s.RunSweeper(ctx, cfg); err != nil && ctx.Err() == nil {
			lg.Warn("store sweeper stopped", zap.Error(err))
		}
	}()
	return p
}

func (p *pooledStore) Destruct() error {
	p.stopSweeper()
	<-p.sweeperDone
	err := p.Etcd.Close()
	if p.embeddedKey != "" {
		_, _ = embeddedPool.Delete(p.embeddedKey)
	}
	return err
}

type pooledEmbedded struct {
	*store.Embedded
	cfg EmbeddedEtcdConfig
}

func (p pooledEmbedded) Destruct() error { return p.Close() }

// Provision settles the store config: defaults, placeholders and the key
// under which the store is pooled. It opens nothing.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	if err := a.provisionTelemetry(ctx); err != nil { // telemetry.go
		return err
	}
	repl := caddy.NewReplacer()
	if a.Etcd != nil {
		a.Etcd.Password = repl.ReplaceKnown(a.Etcd.Password, "")
	} else {
		if a.EmbeddedEtcd == nil {
			a.EmbeddedEtcd = &EmbeddedEtcdConfig{}
		}
		e := a.EmbeddedEtcd
		if e.DataDir == "" {
			e.DataDir = filepath.Join(caddy.AppDataDir(), "crank", "etcd")
		}
		e.DataDir = repl.ReplaceKnown(e.DataDir, "")
	}
	// The store's pool key is its config: quotas do not make a store.
	key, _ := json.Marshal(App{Etcd: a.Etcd, EmbeddedEtcd: a.EmbeddedEtcd})
	a.poolKey = string(key)
	return stopOnExit(ctx, a.logger)
}

// errBothEtcd refuses a config naming both an external and the embedded
// etcd.
var errBothEtcd = errors.New("crank: use either etcd (an external cluster) or embedded_etcd, not both")

// Validate checks what the Caddyfile parser checks, for JSON config too.
func (a *App) Validate() error {
	if a.Etcd != nil && a.EmbeddedEtcd != nil {
		return errBothEtcd
	}
	if err := a.Quotas.validate(); err != nil {
		return err
	}
	if a.CatalogHistory < 0 || a.CatalogHistory > store.MaxCatalogHistory {
		return fmt.Errorf("crank: catalog_history: must be from 1 to %d (got %d)", store.MaxCatalogHistory, a.CatalogHistory)
	}
	if a.Tracing != nil {
		if err := a.Tracing.Check(); err != nil {
			return fmt.Errorf("crank: tracing: %w", err)
		}
	}
	if a.Etcd != nil && len(a.Etcd.Endpoints) == 0 {
		return errors.New("crank: etcd: endpoints: at least one endpoint is required")
	}
	if a.Etcd != nil {
		if err := a.etcdConfig().Check(); err != nil {
			return fmt.Errorf("crank: etcd: %w", err)
		}
	} else if a.EmbeddedEtcd != nil {
		if err := a.embeddedConfig().Check(); err != nil {
			return fmt.Errorf("crank: embedded_etcd: %w", err)
		}
	}
	return nil
}

// etcdConfig is the store config of an external cluster.
func (a *App) etcdConfig() store.EtcdConfig {
	cfg := store.EtcdConfig{
		Endpoints: a.Etcd.Endpoints, Prefix: a.Etcd.Prefix, DialTimeout: time.Duration(a.Etcd.DialTimeout),
		Username: a.Etcd.Username, Password: a.Etcd.Password, Logger: a.logger,
		OpTimeout: time.Duration(a.Etcd.OpTimeout), OwnerTTL: time.Duration(a.Etcd.OwnerTTL),
		ReplicaName: a.Etcd.ReplicaName,
	}
	if t := a.Etcd.TLS; t != nil {
		cfg.TLS = &store.TLSConfig{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	}
	return cfg
}

// embeddedConfig is the config of the embedded etcd server.
func (a *App) embeddedConfig() store.EmbeddedConfig {
	e := a.EmbeddedEtcd
	return store.EmbeddedConfig{DataDir: e.DataDir, ClientURL: e.ClientURL, PeerURL: e.PeerURL, Logger: a.logger.Named("etcd"),
		QuotaBytes: e.QuotaBackendBytes, CompactionRetention: time.Duration(e.AutoCompactionRetention)}
}

// register adds a handler of this config for Start to start.
func (a *App) register(h *Handler) { a.handlers = append(a.handlers, h) }

// Start opens (or reuses) the store, then starts the config's handlers.
// Caddy starts apps in no fixed order: a request that reaches a handler
// before its start waits for it (see Handler.ServeHTTP). An error fails
// the config's load or reload.
func (a *App) Start() error {
	replicaLimits.Set(a.Quotas.limits())
	if err := a.startTracing(); err != nil { // telemetry.go
		return err
	}
	val, _, err := storePool.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		return a.openStore()
	})
	if err != nil {
		return err
	}
	a.store = val.(*pooledStore)
	// The admin API serves this app's store from now on: a handler's
	// endpoint answers as soon as it starts, so a client (or a test) that
	// saw it answer may call the admin API next.
	if err := a.checkMeshAgents(); err != nil { // mesh.go
		return err
	}
	prev := runningApp.Swap(a)
	for _, h := range a.handlers {
		if err := h.start(a.store.Etcd, a.store.adopters); err != nil {
			runningApp.CompareAndSwap(a, prev) // the previous config serves on
			return err
		}
	}
	return nil
}

func (a *App) openStore() (*pooledStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.Etcd != nil {
		s, err := store.NewEtcd(ctx, a.etcdConfig())
		if err != nil {
			return nil, fmt.Errorf("crank: etcd: %w", err)
		}
		return newPooledStore(s, ""), nil
	}
	e := a.EmbeddedEtcd
	embKey, err := filepath.Abs(e.DataDir)
	if err != nil {
		return nil, fmt.Errorf("crank: embedded_etcd: data_dir: %w", err)
	}
	val, _, err := embeddedPool.LoadOrNew(embKey, func() (caddy.Destructor, error) {
		emb, err := store.StartEmbedded(a.embeddedConfig())
		if err != nil {
			return nil, err
		}
		a.logger.Info("embedded etcd ready", zap.String("data_dir", e.DataDir), zap.Strings("endpoints", emb.Endpoints()))
		return pooledEmbedded{Embedded: emb, cfg: *e}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("crank: embedded_etcd: %w", err)
	}
	emb := val.(pooledEmbedded)
	if emb.cfg.ClientURL != e.ClientURL || emb.cfg.PeerURL != e.PeerURL {
		_, _ = embeddedPool.Delete(embKey)
		return nil, fmt.Errorf("crank: embedded_etcd: the etcd with data_dir %s already runs with client_url %q and peer_url %q; changing its URLs needs a restart of Caddy",
			e.DataDir, emb.cfg.ClientURL, emb.cfg.PeerURL)
	}
	if emb.cfg.QuotaBackendBytes != e.QuotaBackendBytes || emb.cfg.AutoCompactionRetention != e.AutoCompactionRetention {
		_, _ = embeddedPool.Delete(embKey)
		return nil, fmt.Errorf("crank: embedded_etcd: the etcd with data_dir %s already runs with quota_backend_bytes %d and auto_compaction_retention %s; changing them needs a restart of Caddy",
			e.DataDir, emb.cfg.QuotaBackendBytes, time.Duration(emb.cfg.AutoCompactionRetention))
	}
	cfg := emb.StoreConfig()
	cfg.Prefix, cfg.Logger = e.Prefix, a.logger
	s, err := store.NewEtcd(ctx, cfg)
	if err != nil {
		_, _ = embeddedPool.Delete(embKey)
		return nil, fmt.Errorf("crank: embedded_etcd: %w", err)
	}
	return newPooledStore(s, embKey), nil
}

// Store returns the app's state store (nil before Start).
func (a *App) Store() *store.Etcd {
	if a.store == nil {
		return nil
	}
	return a.store.Etcd
}

// Stop implements caddy.App.
func (a *App) Stop() error { return nil }

// Cleanup releases this config's reference to the store.
func (a *App) Cleanup() error {
	runningApp.CompareAndSwap(a, nil)
	if a.store != nil {
		_, err := storePool.Delete(a.poolKey)
		return err
	}
	return nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
