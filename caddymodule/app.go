package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the `crank` app: the state store every Crank handler shares.
type App struct {
	// Etcd connects to an external etcd cluster. When absent, an embedded
	// single-node etcd runs inside the Caddy process.
	Etcd *EtcdConfig `json:"etcd,omitempty"`
	// EmbeddedEtcd configures the embedded etcd (used when Etcd is absent).
	EmbeddedEtcd *EmbeddedEtcdConfig `json:"embedded_etcd,omitempty"`

	store   store.Store
	poolKey string
	logger  *zap.Logger
}

// EtcdConfig names an external etcd cluster.
type EtcdConfig struct {
	Endpoints   []string       `json:"endpoints"`
	Prefix      string         `json:"prefix,omitempty"`
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	Username    string         `json:"username,omitempty"`
	Password    string         `json:"password,omitempty"`
}

// EmbeddedEtcdConfig configures the embedded single-node etcd.
type EmbeddedEtcdConfig struct {
	// DataDir defaults to crank/etcd under Caddy's data directory.
	DataDir string `json:"data_dir,omitempty"`
	// ClientURL defaults to http://127.0.0.1:2379.
	ClientURL string `json:"client_url,omitempty"`
	// PeerURL defaults to http://127.0.0.1:2380.
	PeerURL string `json:"peer_url,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "crank", New: func() caddy.Module { return new(App) }}
}

// storePool keeps the store (and the embedded etcd) alive across reloads.
var storePool = caddy.NewUsagePool()

type pooledStore struct {
	store.Store
	embedded *store.Embedded
}

func (p *pooledStore) Destruct() error {
	err := p.Store.Close()
	if p.embedded != nil {
		p.embedded.Close()
	}
	return err
}

// Provision opens (or reuses) the store.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	repl := caddy.NewReplacer()
	if a.Etcd != nil {
		if len(a.Etcd.Endpoints) == 0 {
			return fmt.Errorf("crank: etcd: endpoints: at least one endpoint is required")
		}
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
	key, _ := json.Marshal(a)
	a.poolKey = string(key)
	val, _, err := storePool.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		return a.openStore()
	})
	if err != nil {
		return err
	}
	a.store = val.(*pooledStore)
	return nil
}

func (a *App) openStore() (*pooledStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.Etcd != nil {
		s, err := store.NewEtcd(ctx, store.EtcdConfig{
			Endpoints: a.Etcd.Endpoints, Prefix: a.Etcd.Prefix, DialTimeout: time.Duration(a.Etcd.DialTimeout),
			Username: a.Etcd.Username, Password: a.Etcd.Password, Logger: a.logger,
		})
		if err != nil {
			return nil, fmt.Errorf("crank: etcd: %w", err)
		}
		return &pooledStore{Store: s}, nil
	}
	e := a.EmbeddedEtcd
	emb, err := store.StartEmbedded(store.EmbeddedConfig{
		DataDir: e.DataDir, ClientURL: e.ClientURL, PeerURL: e.PeerURL, Logger: a.logger.Named("etcd"),
	})
	if err != nil {
		return nil, fmt.Errorf("crank: embedded_etcd: %w", err)
	}
	s, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: emb.Endpoints(), Prefix: e.Prefix, Logger: a.logger})
	if err != nil {
		emb.Close()
		return nil, fmt.Errorf("crank: embedded_etcd: %w", err)
	}
	a.logger.Info("embedded etcd ready", zap.String("data_dir", e.DataDir), zap.Strings("endpoints", emb.Endpoints()))
	return &pooledStore{Store: s, embedded: emb}, nil
}

// Store returns the app's state store.
func (a *App) Store() store.Store { return a.store }

// Start implements caddy.App.
func (a *App) Start() error { return nil }

// Stop implements caddy.App.
func (a *App) Stop() error { return nil }

// Cleanup releases this config's reference to the store.
func (a *App) Cleanup() error {
	if a.poolKey != "" {
		_, err := storePool.Delete(a.poolKey)
		return err
	}
	return nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
