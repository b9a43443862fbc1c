package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// Store is what a follower reads: a catalog's head as it changes, and its
// versions (*store.Etcd is one).
type Store interface {
	WatchCatalog(ctx context.Context, name string) (<-chan store.CatalogEvent, error)
	GetCatalogVersion(ctx context.Context, name string, version int64) (*store.CatalogVersion, error)
}

var _ Store = (*store.Etcd)(nil)

// FollowOptions configure a Follower.
type FollowOptions struct {
	// Catalog names the catalog to follow.
	Catalog string
	Store   Store
	// Build builds the host that serves a version's document (nil when
	// the catalog does not exist or its current version is a deletion),
	// without serving it: the caller merges its own operations files and
	// starts the adapters (host.New). An error leaves the current host
	// serving.
	Build func(ctx context.Context, doc *Document, version int64) (*host.Host, error)
	// Serve makes h the host that serves: it attaches it to the MCP
	// endpoint (whose clients get notifications/tools/list_changed) and
	// detaches the previous one; calls that run on the previous one
	// finish there.
	Serve func(h *host.Host, version int64)
	// BuildTimeout bounds one Build (default 2m).
	BuildTimeout time.Duration
	Logger       *zap.Logger
}

// Follower keeps a crank handler serving the current version of its
// catalog: it watches the catalog's head in the store (one etcd watch) and
// builds and serves a host for every new version, without a Caddy reload.
// A version that fails to build is logged, its failure kept in Status,
// and the previous version serves on.
type Follower struct {
	opts   FollowOptions
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status Status
}

// Status is what a follower serves and the last failure.
type Status struct {
	Catalog string `json:"catalog"`
	// Version is the version served (0: none, the catalog does not exist
	// or is deleted); Since when.
	Version int64     `json:"version"`
	Since   time.Time `json:"since"`
	// Failed is the latest version that did not load, and Error why
	// (cleared when a later version loads).
	Failed int64  `json:"failed_version,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Follow builds and serves the catalog's current version, then follows
// its changes until Close. The first version must build: its error fails
// Follow (as a bad operations file fails a config load).
func Follow(ctx context.Context, opts FollowOptions) (*Follower, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.BuildTimeout <= 0 {
		opts.BuildTimeout = 2 * time.Minute
	}
	wctx, cancel := context.WithCancel(context.Background())
	ch, err := opts.Store.WatchCatalog(wctx, opts.Catalog)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("catalog %s: %w", opts.Catalog, err)
	}
	f := &Follower{opts: opts, cancel: cancel, done: make(chan struct{}), status: Status{Catalog: opts.Catalog, Version: -1}}
	var first store.CatalogEvent
	select {
	case first = <-ch:
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	if err := f.apply(ctx, first.Head); err != nil {
		cancel()
		return nil, err
	}
	go f.run(wctx, ch)
	return f, nil
}

func (f *Follower) run(ctx context.Context, ch <-chan store.CatalogEvent) {
	defer close(f.done)
	for ev := range ch {
		if ctx.Err() != nil {
			return
		}
		if err := f.apply(ctx, ev.Head); err != nil && ctx.Err() == nil {
			f.opts.Logger.Error("catalog version not loaded; the previous version serves on",
				zap.String("catalog", f.opts.Catalog), zap.Error(err))
		}
	}
}

// apply builds and serves the version head names, unless it serves it
// already.
func (f *Follower) apply(ctx context.Context, head *store.CatalogHead) error {
	version := int64(0)
	if head != nil && !head.Deleted {
		version = head.Version
	}
	f.mu.Lock()
	same := f.status.Version == version
	f.mu.Unlock()
	if same {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.BuildTimeout)
	defer cancel()
	var doc *Document
	if version > 0 {
		v, err := f.opts.Store.GetCatalogVersion(ctx, f.opts.Catalog, version)
		if errors.Is(err, store.ErrNotFound) {
			return nil // already replaced by a newer one, which comes next
		}
		if err != nil {
			return f.failed(version, fmt.Errorf("catalog %s version %d: %w", f.opts.Catalog, version, err))
		}
		if doc, err = Decode(v.Document); err != nil {
			return f.failed(version, fmt.Errorf("catalog %s version %d: %w", f.opts.Catalog, version, err))
		}
	}
	h, err := f.opts.Build(ctx, doc, version)
	if err != nil {
		return f.failed(version, fmt.Errorf("catalog %s version %d: %w", f.opts.Catalog, version, err))
	}
	f.opts.Serve(h, version)
	f.mu.Lock()
	f.status = Status{Catalog: f.opts.Catalog, Version: version, Since: time.Now().UTC()}
	f.mu.Unlock()
	f.opts.Logger.Info("catalog version serving", zap.String("catalog", f.opts.Catalog), zap.Int64("version", version),
		zap.Int("tools", len(h.Operations())))
	return nil
}

func (f *Follower) failed(version int64, err error) error {
	f.mu.Lock()
	f.status.Failed, f.status.Error = version, err.Error()
	f.mu.Unlock()
	return err
}

// Status returns the version served and the last failure.
func (f *Follower) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.status
	if s.Version < 0 {
		s.Version = 0
	}
	return s
}

// Close stops following and waits until no version is being applied.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}
