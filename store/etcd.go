package store

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/crankmcp/crank/plugins/sdk/loopback"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// DefaultPrefix is the key prefix used when EtcdConfig.Prefix is empty.
const DefaultPrefix = "/crank/v1/"

// DefaultDialTimeout bounds the connection check of NewEtcd and a Ping whose
// context has no deadline, when EtcdConfig.DialTimeout is zero.
const DefaultDialTimeout = 5 * time.Second

// DefaultOpTimeout bounds each store operation when EtcdConfig.OpTimeout is
// zero: with etcd unreachable an operation fails with ErrUnavailable after
// at most this long — at once while the connection is known to be down,
// which is the usual case; the timeout covers a silent network and a
// cluster without leader (an election takes a second or two).
const DefaultOpTimeout = 5 * time.Second

// DefaultMaxRequestBytes is etcd's default request size limit
// (--max-request-bytes), used when EtcdConfig.MaxRequestBytes is zero.
const DefaultMaxRequestBytes = 1536 * 1024

// requestOverhead is kept free in every request for keys, the transaction
// envelope and the session record next to items.
const requestOverhead = 16 * 1024

// Key namespaces below the prefix. See the package documentation.
const (
	mcpSessionsDir    = "mcp-sessions/"
	streamSessionsDir = "stream-sessions/"
	itemsDir          = "stream-items/"
	jobsDir           = "jobs/"
	jobResultsDir     = "job-results/"
	runningDir        = "running/"
	ownersDir         = "owners/"
	// sweepLeaderLock is the prefix of the sweep-leader lock's keys
	// (concurrency.Mutex adds "/" and the holder's lease ID in hex).
	sweepLeaderLock = "sweep-leader"
	pingKey         = "ping"
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
	// They are refused with an http:// endpoint that is not a loopback
	// address: the password, and the token etcd returns for it and the
	// client sends with every request, would travel in the clear.
	Username, Password string
	// TLS configures https:// endpoints: the CA to verify the servers
	// with and a client certificate. Nil uses the system roots for
	// https:// endpoints. Setting it with an http:// endpoint is an error.
	TLS *TLSConfig
	// OpTimeout bounds each store operation, so that an unavailable etcd
	// fails calls fast with ErrUnavailable; DefaultOpTimeout when zero.
	OpTimeout time.Duration
	// OwnerTTL is the TTL of this replica's owner lease (see RunSweeper):
	// how long after this process dies its running sessions and jobs are
	// marked failed. DefaultOwnerTTL when zero; at least MinOwnerTTL.
	OwnerTTL time.Duration
	// MaxRequestBytes is the cluster's request size limit (etcd's
	// --max-request-bytes); DefaultMaxRequestBytes when zero. Records and
	// items larger than fits are refused with ErrTooLarge.
	MaxRequestBytes int
	// ReplicaName labels this replica in its owner record (for operators);
	// the host name when empty.
	ReplicaName string
	// Logger receives the etcd client's warnings and errors; nil discards
	// them.
	Logger *zap.Logger
}

// Etcd holds Crank's shared state in etcd: MCP sessions, SSE event logs,
// stream sessions and async jobs, so that any replica can serve any of them.
// It is safe for concurrent use. Its users declare the few methods they
// need as interfaces of their own.
//
// Errors: ErrNotFound, ErrUnavailable (etcd unreachable: retryable, returned
// within the operation timeout), ErrConflict (a lost race or a moved
// cursor), ErrIllegalTransition, ErrBufferFull, ErrTooLarge, ErrNotOwner and
// ErrInvalid (a bad argument, named in the message); test with errors.Is.
type Etcd struct {
	cli         *clientv3.Client
	ownsClient  bool
	kv          clientv3.KV      // namespaced under prefix
	watcher     clientv3.Watcher // namespaced under prefix
	prefix      string
	leases      *leaseManager
	pingTimeout time.Duration
	opTimeout   time.Duration
	now         func() time.Time

	// Request limits: maxRequest is etcd's; maxValue bounds one record,
	// maxItem one buffered item.
	maxRequest, maxValue, maxItem int

	ownerTTL    time.Duration
	replicaName string
	log         *zap.Logger                      // the store's own messages (NOSPACE)
	space       spaceState                       // see SpaceStatus
	events      *lru.Cache[string, cachedStream] // see AppendEvents
	ownerMu     sync.Mutex
	own         *ownerState
	keys        sync.Map     // shared key name → []byte (SharedKey)
	fleet       fleetFormats // the record format to write (format.go)
	// members are per-member clients for reads retried on another
	// member (reads.go); nil with one endpoint or a caller's client.
	members *memberReads

	// bgCtx ends background work (keep-alives, watches, sweepers) on Close.
	bgCtx    context.Context
	bgCancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// NewEtcd connects to etcd and checks, within cfg.DialTimeout, that the
// cluster answers a consistent read. ctx bounds only that check; the
// returned Etcd lives until Close.
func NewEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	tlsCfg, opts, err := cfg.settle()
	if err != nil {
		return nil, err
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	opts.log = lg.Named("store")
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
	ccfg := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: timeout, // bounds authentication when credentials are set
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         tlsCfg,
		Logger:      lg,
		// Notice a dead connection (e.g. etcd killed) within seconds, and
		// reconnect quickly once it is back: gRPC's default backoff grows
		// to two minutes. A member that hangs (stopped, partitioned) is
		// left for the others after 5s+1s: 5s is the least ping interval
		// an etcd server accepts (--grpc-keepalive-min-time).
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: timeout,
		}), grpc.WithChainUnaryInterceptor(metricsInterceptor, peerInterceptor)}, // metrics.go, reads.go
		MaxCallSendMsgSize: opts.maxRequest + requestOverhead,
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, unreachable(err, "")
	}
	opts.pingTimeout = timeout
	e := newEtcd(cli, cfg.Prefix, opts)
	e.ownsClient = true

	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := e.ping(pctx); err != nil {
		state := " (connection " + strings.ToLower(cli.ActiveConnection().GetState().String()) + ")"
		_ = cli.Close()
		return nil, unreachable(err, state)
	}
	e.members = newMemberReads(e.bgCtx, ccfg, e.prefix)
	return e, nil
}

// NewEtcdFromClient wraps an existing client with default settings. The
// caller keeps ownership of cli: Close does not close it. An empty prefix
// means DefaultPrefix.
func NewEtcdFromClient(cli *clientv3.Client, prefix string) *Etcd {
	opts, _ := EtcdConfig{}.options()
	opts.pingTimeout = DefaultDialTimeout
	return newEtcd(cli, prefix, opts)
}

// Check reports what NewEtcd would refuse in cfg (no endpoints, a user
// without a password, bad endpoint URLs, unreadable TLS files, an owner_ttl
// out of bounds) without connecting to anything: for validating a
// configuration before it runs.
func (cfg EtcdConfig) Check() error {
	_, _, err := cfg.settle()
	return err
}

// settle checks cfg and returns its TLS configuration and options.
func (cfg EtcdConfig) settle() (*tls.Config, etcdOptions, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, etcdOptions{}, errors.New("store: no etcd endpoints configured")
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, etcdOptions{}, errors.New("store: etcd username and password must be set together")
	}
	if cfg.Username != "" {
		if ep := clearTextEndpoint(cfg.Endpoints); ep != "" {
			return nil, etcdOptions{}, fmt.Errorf("store: %w: etcd username and password would cross the network in the clear to %s: use https:// endpoints (with tls), or a loopback address", ErrInvalid, ep)
		}
	}
	tlsCfg, err := cfg.TLS.build(cfg.Endpoints)
	if err != nil {
		return nil, etcdOptions{}, err
	}
	opts, err := cfg.options()
	return tlsCfg, opts, err
}

// clearTextEndpoint returns the first endpoint that is reached without TLS
// over a network — http:// (or a bare host:port) to a host other than a
// loopback address — or "".
func clearTextEndpoint(endpoints []string) string {
	for _, ep := range endpoints {
		host := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			if scheme != "http" {
				continue // https, or a unix socket
			}
			host = rest
		}
		host, _, _ = strings.Cut(host, "/")
		if !loopback.HostPort(host) {
			return ep
		}
	}
	return ""
}

// etcdOptions are the validated settings of an Etcd.
type etcdOptions struct {
	pingTimeout, opTimeout, ownerTTL time.Duration
	maxRequest                       int
	replicaName                      string
	log                              *zap.Logger
}

func (cfg EtcdConfig) options() (etcdOptions, error) {
	o := etcdOptions{opTimeout: cfg.OpTimeout, ownerTTL: cfg.OwnerTTL, maxRequest: cfg.MaxRequestBytes, replicaName: cfg.ReplicaName}
	if o.opTimeout < 0 || o.ownerTTL < 0 || o.maxRequest < 0 {
		return o, fmt.Errorf("store: %w: op_timeout, owner_ttl and max_request_bytes must not be negative", ErrInvalid)
	}
	if o.opTimeout == 0 {
		o.opTimeout = DefaultOpTimeout
	}
	if o.ownerTTL == 0 {
		o.ownerTTL = DefaultOwnerTTL
	}
	if o.ownerTTL < MinOwnerTTL || o.ownerTTL%time.Second != 0 {
		return o, fmt.Errorf("store: %w: owner_ttl must be whole seconds and at least %s, got %s", ErrInvalid, MinOwnerTTL, o.ownerTTL)
	}
	if o.maxRequest == 0 {
		o.maxRequest = DefaultMaxRequestBytes
	}
	if o.maxRequest < 4*requestOverhead {
		return o, fmt.Errorf("store: %w: max_request_bytes %d is below the minimum %d", ErrInvalid, o.maxRequest, 4*requestOverhead)
	}
	if o.replicaName == "" {
		o.replicaName, _ = os.Hostname()
	}
	return o, nil
}

func newEtcd(cli *clientv3.Client, prefix string, o etcdOptions) *Etcd {
	prefix = normalizePrefix(prefix)
	bg, cancel := context.WithCancel(context.Background())
	maxValue := o.maxRequest - requestOverhead
	if o.log == nil {
		o.log = zap.NewNop()
	}
	return &Etcd{
		cli:         cli,
		kv:          namespace.NewKV(cli.KV, prefix),
		watcher:     namespace.NewWatcher(cli.Watcher, prefix),
		prefix:      prefix,
		leases:      newLeaseManager(cli.Lease),
		events:      lru.New[string, cachedStream](maxEventCache, nil),
		pingTimeout: o.pingTimeout,
		opTimeout:   o.opTimeout,
		now:         time.Now,
		maxRequest:  o.maxRequest,
		maxValue:    maxValue,
		maxItem:     maxValue - 4*1024,
		ownerTTL:    o.ownerTTL,
		replicaName: o.replicaName,
		log:         o.log,
		space:       spaceState{notify: make(chan struct{}, 1)},
		bgCtx:       bg,
		bgCancel:    cancel,
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
// A failure is an *UnavailableError (ErrUnavailable) unless ctx itself
// ended.
func (e *Etcd) Ping(ctx context.Context) error {
	pctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, e.pingTimeout)
		defer cancel()
	}
	if err := e.precheck("ping etcd"); err != nil {
		return err
	}
	return classify(ctx, "ping etcd", e.ping(pctx))
}

// Revision is etcd's current revision, which every write moves (a
// count-only read): how a test shows that something wrote nothing.
func (e *Etcd) Revision(ctx context.Context) (int64, error) {
	var rev int64
	err := e.read(ctx, "read revision", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, pingKey, clientv3.WithCountOnly())
		if err == nil {
			rev = resp.Header.GetRevision()
		}
		return err
	})
	return rev, err
}

func (e *Etcd) ping(ctx context.Context) error {
	_, err := e.kv.Get(ctx, pingKey, clientv3.WithCountOnly())
	return err
}

// Close stops background work (watches, sweepers, the owner keep-alive),
// revokes this replica's owner lease — so that other replicas see its
// running sessions and jobs as orphaned at once — and closes the client if
// NewEtcd created it. It does not revoke bucket leases: stored entries stay
// visible to other replicas until they expire.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() {
		e.releaseOwner()
		e.bgCancel()
		if e.members != nil {
			e.members.close()
		}
		if e.ownsClient {
			e.closeErr = e.cli.Close()
		}
	})
	return e.closeErr
}

// mcpSessionRecord is the stored JSON form of an MCPSession. It is kept
// separate from the API type so that the storage schema changes only on
// purpose. Fields added after the first version are optional, so records
// written by older replicas still decode.
type mcpSessionRecord struct {
	ID                 string          `json:"id"`
	ProtocolVersion    string          `json:"protocol_version,omitempty"`
	ClientName         string          `json:"client_name,omitempty"`
	ClientVersion      string          `json:"client_version,omitempty"`
	ClientTitle        string          `json:"client_title,omitempty"`
	ClientCapabilities json.RawMessage `json:"client_capabilities,omitempty"`
	InitializeParams   json.RawMessage `json:"initialize_params,omitempty"`
	Initialized        bool            `json:"initialized,omitempty"`
	LogLevel           string          `json:"log_level,omitempty"`
	WorkspaceID        string          `json:"workspace_id,omitempty"`
	AgentID            string          `json:"agent_id,omitempty"`
	CreatedAt          time.Time       `json:"created_at"`
	TTLMillis          int64           `json:"ttl_ms"`
}

func mcpSessionKey(id string) string { return mcpSessionsDir + url.PathEscape(id) }

func validID(id string) bool { return id != "" && len(id) <= maxIDLen }

// PutMCPSession records (or overwrites) the state of an MCP session,
// recorded when a client initializes, so that another replica can accept
// its Mcp-Session-Id. The entry expires after s.TTL unless it is touched or
// put again.
func (e *Etcd) PutMCPSession(ctx context.Context, s MCPSession) error {
	if !validID(s.ID) {
		return fmt.Errorf("store: invalid MCP session ID: must be 1-%d bytes, got %d", maxIDLen, len(s.ID))
	}
	// Errors name the session by its digest: the ID is a credential.
	name := MCPSessionDigest(s.ID)
	if s.TTL <= 0 {
		return fmt.Errorf("store: MCP session %s: TTL must be positive, got %s", name, s.TTL)
	}
	if err := validJSONField("client_capabilities", s.ClientCapabilities); err != nil {
		return fmt.Errorf("store: MCP session %s: %w", name, err)
	}
	if err := validJSONField("initialize_params", s.InitializeParams); err != nil {
		return fmt.Errorf("store: MCP session %s: %w", name, err)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = time.Now()
	}
	val, err := e.encodeRecord(mcpSessionRecord{
		ID:                 s.ID,
		ProtocolVersion:    s.ProtocolVersion,
		ClientName:         s.ClientName,
		ClientVersion:      s.ClientVersion,
		ClientTitle:        s.ClientTitle,
		ClientCapabilities: s.ClientCapabilities,
		InitializeParams:   s.InitializeParams,
		Initialized:        s.Initialized,
		LogLevel:           s.LogLevel,
		WorkspaceID:        s.WorkspaceID,
		AgentID:            s.AgentID,
		CreatedAt:          s.CreatedAt.UTC(),
		TTLMillis:          int64((s.TTL + time.Millisecond - 1) / time.Millisecond),
	})
	if err != nil {
		return fmt.Errorf("store: encode MCP session %s: %w", name, err)
	}
	if len(val) > e.maxValue {
		return fmt.Errorf("store: MCP session %s: %w: record is %d bytes, over the %d-byte limit", name, ErrTooLarge, len(val), e.maxValue)
	}
	key := mcpSessionKey(s.ID)
	err = e.do(ctx, "put MCP session "+name, func(ctx context.Context) error {
		return e.leases.withLease(ctx, s.TTL, func(lease clientv3.LeaseID) error {
			_, err := e.kv.Txn(ctx).Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease)),
				mcpSessionIndexPut(s.WorkspaceID, s.ID, lease)).Commit()
			return err
		})
	})
	if err == nil {
		e.wrote()
	}
	return err
}

// GetMCPSession returns the session with the given ID, or ErrNotFound when
// it is absent or has expired.
func (e *Etcd) GetMCPSession(ctx context.Context, id string) (*MCPSession, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	kv, err := e.get(ctx, "get MCP session "+MCPSessionDigest(id), mcpSessionKey(id))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, ErrNotFound
	}
	rec, err := decodeMCPSession(id, kv.Value)
	if err != nil {
		return nil, err
	}
	return &MCPSession{
		ID:                 rec.ID,
		ProtocolVersion:    rec.ProtocolVersion,
		ClientName:         rec.ClientName,
		ClientVersion:      rec.ClientVersion,
		ClientTitle:        rec.ClientTitle,
		ClientCapabilities: rec.ClientCapabilities,
		InitializeParams:   rec.InitializeParams,
		Initialized:        rec.Initialized,
		LogLevel:           rec.LogLevel,
		WorkspaceID:        rec.WorkspaceID,
		AgentID:            rec.AgentID,
		CreatedAt:          rec.CreatedAt,
		TTL:                time.Duration(rec.TTLMillis) * time.Millisecond,
	}, nil
}

func decodeMCPSession(id string, val []byte) (*mcpSessionRecord, error) {
	var rec mcpSessionRecord
	if err := decodeRecord("MCP session "+MCPSessionDigest(id), val, &rec); err != nil {
		return nil, err
	}
	if rec.TTLMillis <= 0 {
		return nil, fmt.Errorf("store: decode MCP session %s: invalid TTL %dms", MCPSessionDigest(id), rec.TTLMillis)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("store: decode MCP session %s: corrupt record: it names session %s", MCPSessionDigest(id), MCPSessionDigest(rec.ID))
	}
	return &rec, nil
}

// TouchMCPSession pushes the session's expiry to at least its TTL from now,
// or returns ErrNotFound when the session is absent or has expired. It
// costs one read, plus one
// compare-and-swap write when the entry is not already on the current bucket
// lease of its TTL (at most about once per lease window, TTL/10).
func (e *Etcd) TouchMCPSession(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	op := "touch MCP session " + MCPSessionDigest(id)
	key := mcpSessionKey(id)
	kv, err := e.get(ctx, op, key)
	if err != nil {
		return err
	}
	if kv == nil {
		return ErrNotFound
	}
	rec, err := decodeMCPSession(id, kv.Value)
	if err != nil {
		return err
	}
	ttl := time.Duration(rec.TTLMillis) * time.Millisecond
	var gone bool
	err = e.do(ctx, op, func(ctx context.Context) error {
		return e.leases.withLease(ctx, ttl, func(lease clientv3.LeaseID) error {
			if clientv3.LeaseID(kv.Lease) == lease {
				return nil // already on a lease that outlives now+TTL
			}
			// Only re-put the version we read: a concurrent delete must not
			// be undone, and a concurrent put has refreshed the entry anyway.
			tr, err := e.kv.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
				Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithLease(lease)),
					mcpSessionIndexPut(rec.WorkspaceID, id, lease)).
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
	})
	if err != nil {
		return err
	}
	if gone {
		return ErrNotFound
	}
	return nil
}

// DeleteMCPSession removes the session. Deleting an absent session is not
// an error.
func (e *Etcd) DeleteMCPSession(ctx context.Context, id string) error {
	if !validID(id) {
		return nil
	}
	return e.do(ctx, "delete MCP session "+MCPSessionDigest(id), func(ctx context.Context) error {
		resp, err := e.kv.Delete(ctx, mcpSessionKey(id), clientv3.WithPrevKV())
		if err != nil || len(resp.PrevKvs) == 0 {
			return err
		}
		// Its listing entry goes too (live.go); one left behind by a
		// failure here expires with the record's lease.
		if rec, err := decodeMCPSession(id, resp.PrevKvs[0].Value); err == nil {
			_, err = e.kv.Delete(ctx, mcpSessionIndexKey(rec.WorkspaceID, id))
			return err
		}
		return nil
	})
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
