// Package storetest starts real etcd servers for tests of packages that use
// the store package.
package storetest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
)

// TestOpTimeout is the operation timeout of the stores storetest opens
// (unless the test sets one): generous, so that a test on a loaded machine
// does not see a slow etcd as an unavailable one.
const TestOpTimeout = 15 * time.Second

// Embedded starts a single-member etcd server in t.TempDir() on free
// loopback ports (fsync disabled, logs discarded) and an Etcd store
// connected to it under store.DefaultPrefix, with TestOpTimeout. Both are closed when the test
// ends. It fails the test if etcd cannot be started. Safe for parallel tests:
// each call gets its own server.
func Embedded(t testing.TB) (*store.Embedded, *store.Etcd) {
	t.Helper()
	return EmbeddedWith(t, store.EmbeddedConfig{}, store.EtcdConfig{})
}

// EmbeddedWith is Embedded with settings of the server (such as its space
// quota) and of the store (such as a logger) taken from cfg and scfg; the
// data directory, URLs, fsync, start timeout and endpoints are storetest's,
// and scfg's dial and operation timeouts default to storetest's.
func EmbeddedWith(t testing.TB, cfg store.EmbeddedConfig, scfg store.EtcdConfig) (*store.Embedded, *store.Etcd) {
	t.Helper()
	dir := t.TempDir()
	var (
		emb *store.Embedded
		err error
	)
	// Free ports are found by binding to :0 and releasing them, so another
	// process may grab one before etcd binds it: retry on such a clash.
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := FreePorts(2)
		if perr != nil {
			t.Fatalf("storetest: %v", perr)
		}
		cfg.DataDir = fmt.Sprintf("%s/etcd-%d", dir, attempt)
		cfg.ClientURL = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		cfg.PeerURL = fmt.Sprintf("https://127.0.0.1:%d", ports[1])
		cfg.UnsafeNoFsync = true
		cfg.StartTimeout = 30 * time.Second
		emb, err = store.StartEmbedded(cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	return emb, Open(t, emb, scfg)
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Open connects another Etcd store, with its own client, to emb — a second
// replica sharing the first one's etcd. cfg supplies settings such as
// OwnerTTL or OpTimeout (TestOpTimeout when zero); its Endpoints and TLS
// are set to emb's. The store is closed when the test ends.
func Open(t testing.TB, emb *store.Embedded, cfg store.EtcdConfig) *store.Etcd {
	t.Helper()
	cfg.Endpoints, cfg.TLS = emb.Endpoints(), emb.ClientTLS()
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = TestOpTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	st, err := store.NewEtcd(ctx, cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Server is an embedded etcd that a test can stop and start again on the
// same ports and data directory, to exercise outages.
type Server struct {
	t   testing.TB
	cfg store.EmbeddedConfig

	mu  sync.Mutex
	emb *store.Embedded
}

// NewServer starts a restartable embedded etcd in t.TempDir() on free
// loopback ports. It is stopped when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{t: t}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ports, perr := FreePorts(2)
		if perr != nil {
			t.Fatalf("storetest: %v", perr)
		}
		s.cfg = store.EmbeddedConfig{
			DataDir:       fmt.Sprintf("%s/etcd-%d", dir, attempt),
			ClientURL:     fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
			PeerURL:       fmt.Sprintf("https://127.0.0.1:%d", ports[1]),
			UnsafeNoFsync: true,
			StartTimeout:  30 * time.Second,
		}
		s.emb, err = store.StartEmbedded(s.cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Embedded returns the running server (nil while stopped).
func (s *Server) Embedded() *store.Embedded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emb
}

// Endpoints returns the client URLs; they stay the same across restarts.
func (s *Server) Endpoints() []string { return []string{s.cfg.ClientURL} }

// TLS returns the client credentials the server accepts; they stay the
// same across restarts.
func (s *Server) TLS() *store.TLSConfig { return store.EmbeddedClientTLS(s.cfg.DataDir) }

// StoreConfig returns an EtcdConfig with the server's Endpoints and TLS.
func (s *Server) StoreConfig() store.EtcdConfig {
	return store.EtcdConfig{Endpoints: s.Endpoints(), TLS: s.TLS()}
}

// Caddyfile returns the lines of a crank app's etcd block that connect to
// the server: its endpoint and a tls block with its client credentials.
func (s *Server) Caddyfile() string {
	t := s.TLS()
	return fmt.Sprintf("endpoints %s\n\t\t\ttls {\n\t\t\t\tca_file %s\n\t\t\t\tcert_file %s\n\t\t\t\tkey_file %s\n\t\t\t}",
		s.cfg.ClientURL, t.CAFile, t.CertFile, t.KeyFile)
}

// Stop stops the server; stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.emb != nil {
		_ = s.emb.Close()
		s.emb = nil
	}
}

// PeerURL returns the peer URL the server listens on.
func (s *Server) PeerURL() string { return s.cfg.PeerURL }

// Start starts the stopped server again with the same ports and data,
// retrying for a while if a port is still held. It fails the test if the
// server does not come back.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(20 * time.Second); err != nil {
		s.t.Fatalf("storetest: restart: %v", err)
	}
}

// TryStart is Start that returns the error of a single attempt instead
// of failing the test.
func (s *Server) TryStart() error { return s.start(0) }

func (s *Server) start(retry time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.emb != nil {
		return nil
	}
	var err error
	for deadline := time.Now().Add(retry); ; {
		s.emb, err = store.StartEmbedded(s.cfg)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
