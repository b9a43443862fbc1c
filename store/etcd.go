package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultPrefix is the key prefix used when EtcdConfig.Prefix is empty.
const DefaultPrefix = "/crank/v1/"

// DefaultDialTimeout bounds the connection check of NewEtcd and a Ping whose
// context has no deadline, when EtcdConfig.DialTimeout is zero.
const DefaultDialTimeout = 5 * time.Second

// Key namespaces below the prefix. See the package documentation.
const (
	mcpSessionsDir = "mcp-sessions/"
	pingKey        = "ping"
)

// EtcdConfig configures NewEtcd.
type EtcdConfig struct {
	// Endpoints are the etcd client URLs, e.g. "http://127.0.0.1:2379".
	Endpoints []string
	// Prefix is prepended to every key; DefaultPrefix when empty. A missing
	// trailing "/" is added.
	Prefix string
	// DialTimeout bounds the initial connection check (and authentication);
	// DefaultDialTimeout when zero.
	DialTimeout time.Duration
	// Username and Password enable etcd authentication when both are set.
	Username, Password string
	// Logger receives the etcd client's warnings and errors; nil discards
	// them.
	Logger *zap.Logger
}

// Etcd is the etcd implementation of Store.
type Etcd struct {
	cli         *clientv3.Client
	ownsClient  bool
	kv          clientv3.KV // namespaced under prefix
	prefix      string
	leases      *leaseManager
	pingTimeout time.Duration
	closeOnce   sync.Once
	closeErr    error
}

var _ Store = (*Etcd)(nil)

// NewEtcd connects to etcd and checks, within cfg.DialTimeout, that the
// cluster answers a consistent read. ctx bounds only that check; the
// returned Etcd lives until Close.
func NewEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("store: no etcd endpoints configured")
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("store: etcd username and password must be set together")
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	// The client logs every retry at info/warn; keep warnings and up.
	lg = lg.Named("etcd-client").WithOptions(atLeast(zapcore.WarnLevel))

	deadline := time.Now().Add(timeout)
	eps := strings.Join(cfg.Endpoints, ",")
	unreachable := func(err error, state string) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("store: etcd at %s not reachable within %s%s: %w", eps, timeout, state, err)
		}
		return fmt.Errorf("store: etcd at %s: %w", eps, err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: timeout, // bounds authentication when credentials are set
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      lg,
	})
	if err != nil {
		return nil, unreachable(err, "")
	}
	e := newEtcd(cli, cfg.Prefix, timeout)
	e.ownsClient = true

	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := e.ping(pctx); err != nil {
		state := " (connection " + strings.ToLower(cli.ActiveConnection().GetState().String()) + ")"
		_ = cli.Close()
		return nil, unreachable(err, state)
	}
	return e, nil
}

// NewEtcdFromClient wraps an existing client. The caller keeps ownership of
// cli: Close does not close it. An empty prefix means DefaultPrefix.
func NewEtcdFromClient(cli *clientv3.Client, prefix string) *Etcd {
	return newEtcd(cli, prefix, DefaultDialTimeout)
}

func newEtcd(cli *clientv3.Client, prefix string, pingTimeout time.Duration) *Etcd {
	prefix = normalizePrefix(prefix)
	return &Etcd{
		cli:         cli,
		kv:          namespace.NewKV(cli.KV, prefix),
		prefix:      prefix,
		leases:      newLeaseManager(cli.Lease),
		pingTimeout: pingTimeout,
	}
}

func normalizePrefix(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// Prefix returns the key prefix in use (with its trailing "/").
func (e *Etcd) Prefix() string { return e.prefix }

// Ping performs a linearizable read under the prefix, which needs a leader
// and a quorum. Without a deadline on ctx it gives up after the dial timeout.
func (e *Etcd) Ping(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.pingTimeout)
		defer cancel()
	}
	if err := e.ping(ctx); err != nil {
		return fmt.Errorf("store: ping etcd: %w", err)
	}
	return nil
}

func (e *Etcd) ping(ctx context.Context) error {
	_, err := e.kv.Get(ctx, pingKey, clientv3.WithCountOnly())
	return err
}

// Close closes the client if NewEtcd created it. It does not revoke leases:
// stored entries stay visible to other replicas until they expire.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() {
		if e.ownsClient {
			e.closeErr = e.cli.Close()
		}
	})
	return e.closeErr
}

// mcpSessionRecord is the stored JSON form of an MCPSession. It is kept
// separate from the API type so that the storage schema changes only on
// purpose.
type mcpSessionRecord struct {
	ID              string    `json:"id"`
	ProtocolVersion string    `json:"protocol_version,omitempty"`
	ClientName      string    `json:"client_name,omitempty"`
	ClientVersion   string    `json:"client_version,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	TTLMillis       int64     `json:"ttl_ms"`
}

func mcpSessionKey(id string) string { return mcpSessionsDir + url.PathEscape(id) }

func validID(id string) bool { return id != "" && len(id) <= maxIDLen }

// PutMCPSession implements Store.
func (e *Etcd) PutMCPSession(ctx context.Context, s MCPSession) error {
	if !validID(s.ID) {
		return fmt.Errorf("store: invalid MCP session ID %q (must be 1-%d bytes)", truncate(s.ID), maxIDLen)
	}
	if s.TTL <= 0 {
		return fmt.Errorf("store: MCP session %s: TTL must be positive, got %s", s.ID, s.TTL)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now()
	}
	val, err := json.Marshal(mcpSessionRecord{
		ID:              s.ID,
		ProtocolVersion: s.ProtocolVersion,
		ClientName:      s.ClientName,
		ClientVersion:   s.ClientVersion,
		CreatedAt:       s.CreatedAt.UTC(),
		TTLMillis:       int64((s.TTL + time.Millisecond - 1) / time.Millisecond),
	})
	if err != nil {
		return fmt.Errorf("store: encode MCP session %s: %w", s.ID, err)
	}
	key := mcpSessionKey(s.ID)
	err = e.leases.withLease(ctx, s.TTL, func(lease clientv3.LeaseID) error {
		_, err := e.kv.Put(ctx, key, string(val), clientv3.WithLease(lease))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put MCP session %s: %w", s.ID, err)
	}
	return nil
}

// GetMCPSession implements Store.
func (e *Etcd) GetMCPSession(ctx context.Context, id string) (*MCPSession, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	resp, err := e.kv.Get(ctx, mcpSessionKey(id))
	if err != nil {
		return nil, fmt.Errorf("store: get MCP session %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotFound
	}
	rec, err := decodeMCPSession(id, resp.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	return &MCPSession{
		ID:              rec.ID,
		ProtocolVersion: rec.ProtocolVersion,
		ClientName:      rec.ClientName,
		ClientVersion:   rec.ClientVersion,
		CreatedAt:       rec.CreatedAt,
		TTL:             time.Duration(rec.TTLMillis) * time.Millisecond,
	}, nil
}

func decodeMCPSession(id string, val []byte) (*mcpSessionRecord, error) {
	var rec mcpSessionRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		return nil, fmt.Errorf("store: decode MCP session %s: %w", id, err)
	}
	if rec.TTLMillis <= 0 {
		return nil, fmt.Errorf("store: decode MCP session %s: invalid TTL %dms", id, rec.TTLMillis)
	}
	return &rec, nil
}

// TouchMCPSession implements Store. It costs one read, plus one
// compare-and-swap write when the entry is not already on the current bucket
// lease of its TTL (at most about once per lease window, TTL/10).
func (e *Etcd) TouchMCPSession(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	key := mcpSessionKey(id)
	resp, err := e.kv.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("store: touch MCP session %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return ErrNotFound
	}
	kv := resp.Kvs[0]
	rec, err := decodeMCPSession(id, kv.Value)
	if err != nil {
		return err
	}
	ttl := time.Duration(rec.TTLMillis) * time.Millisecond
	var gone bool
	err = e.leases.withLease(ctx, ttl, func(lease clientv3.LeaseID) error {
		if clientv3.LeaseID(kv.Lease) == lease {
			return nil // already on a lease that outlives now+TTL
		}
		// Only re-put the version we read: a concurrent delete must not be
		// undone, and a concurrent put has refreshed the entry anyway.
		tr, err := e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key, clientv3.WithCountOnly())).
			Commit()
		if err != nil {
			return err
		}
		if !tr.Succeeded {
			gone = tr.Responses[0].GetResponseRange().GetCount() == 0
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: touch MCP session %s: %w", id, err)
	}
	if gone {
		return ErrNotFound
	}
	return nil
}

// DeleteMCPSession implements Store.
func (e *Etcd) DeleteMCPSession(ctx context.Context, id string) error {
	if !validID(id) {
		return nil
	}
	if _, err := e.kv.Delete(ctx, mcpSessionKey(id)); err != nil {
		return fmt.Errorf("store: delete MCP session %s: %w", id, err)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// atLeast raises a logger's minimum level to lvl, leaving loggers that are
// already stricter alone.
func atLeast(lvl zapcore.Level) zap.Option {
	return zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		if ic, err := zapcore.NewIncreaseLevelCore(c, lvl); err == nil {
			return ic
		}
		return c
	})
}
