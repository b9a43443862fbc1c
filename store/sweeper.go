package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/internal/telemetry"
)

// runningKey is the running index entry of an owned record (kind: its
// ownedKind's index).
func runningKey(kind, id string) string { return runningDir + kind + "/" + id }

// Sweeper defaults.
const (
	// DefaultSweepInterval: how often a sweeper looks for orphans even
	// when it saw no owner disappear (its watch is the fast path).
	DefaultSweepInterval = 10 * time.Second
	// DefaultCleanupInterval: how often the sweep leader deletes expired
	// entities and orphaned items ahead of their leases.
	DefaultCleanupInterval = time.Minute
	// cleanupPage is the range page size of a cleanup scan and of an
	// orphan sweep.
	cleanupPage = 256
)

// Orphan is a running session or job whose owner replica is gone, offered
// to SweeperConfig.Adopt after this replica took it over.
type Orphan struct {
	DeadOwner     string
	StreamSession *StreamSession // set for a stream session
	Job           *AsyncJobHandle
}

// AdoptFunc decides whether this replica resumes an orphan: it is called
// after the store made this replica the owner, and must start the runner
// and return nil, or return why it cannot to have the orphan marked failed
// (owner_lost, the reason in its message).
type AdoptFunc func(ctx context.Context, o Orphan) error

// SweepReport counts what one orphan sweep did.
type SweepReport struct {
	Failed     int // orphans marked failed (stopping sessions: stopped)
	Adopted    int // orphans resumed by this replica
	StaleIndex int // index entries of entities that ended or moved
}

// CleanupReport counts what one cleanup did.
type CleanupReport struct {
	StreamSessions int // expired stream sessions deleted (with their items)
	Jobs           int // expired jobs deleted
	ItemSets       int // item sets of sessions that no longer exist
	StaleIndex     int // running-index, open-entity, job list and retained-job entries, job results and eviction markers, of entities that no longer exist
}

// SweeperConfig configures RunSweeper.
type SweeperConfig struct {
	// Interval between orphan sweeps when the watch on owners reports
	// nothing; DefaultSweepInterval when zero.
	Interval time.Duration
	// CleanupInterval between expiry cleanups, run by one replica (the
	// sweep leader) at a time; DefaultCleanupInterval when zero.
	CleanupInterval time.Duration
	// Adopt, when set, is offered each orphan (see AdoptFunc); otherwise
	// orphans are marked failed.
	Adopt AdoptFunc
	// Logger receives sweep failures; nil discards them.
	Logger *zap.Logger
	// OnSweep, when set, is called after every orphan sweep.
	OnSweep func(SweepReport, error)
	// RecoverSpace: when etcd refuses writes for lack of space (the
	// NOSPACE alarm, ErrNoSpace), delete expired state and run
	// RecoverSpace (compact, defragment, disarm), at most once per
	// SpaceRecoveryInterval until writes succeed again. For an etcd that
	// this process alone uses (the embedded one); a shared cluster's
	// maintenance is its operator's.
	RecoverSpace bool
	// SpaceRecoveryInterval spaces recovery attempts;
	// DefaultSpaceRecoveryInterval when zero.
	SpaceRecoveryInterval time.Duration
}

// ownerLostError is the error_json of an orphan failed; refused, when
// set, is why no other replica took it over.
func ownerLostError(owner string, refused error) json.RawMessage {
	msg := fmt.Sprintf("the replica running it (owner %s) stopped renewing its owner lease", owner)
	if refused != nil {
		msg += "; no other replica can take it over: " + refused.Error()
	}
	b, _ := json.Marshal(map[string]any{
		"code":      "owner_lost",
		"message":   msg,
		"retryable": true,
	})
	return b
}

// errNotOrphan: the entity no longer matches the index entry (ended, moved
// to another owner, expired or gone); only the index entry is stale.
var errNotOrphan = errors.New("not an orphan")

// SweepOrphans finds running sessions and jobs whose owner replica is gone
// (its owner key expired with its lease) and marks them failed — stopping
// sessions become stopped — or, with adopt, hands them to this replica.
// Every change is a compare-and-swap, so concurrent sweepers on several
// replicas are safe.
func (e *Etcd) SweepOrphans(ctx context.Context, adopt AdoptFunc) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	from, end := runningDir, clientv3.GetPrefixRangeEnd(runningDir)
	for {
		// A page of the running index and the owners in one read at one
		// revision: an index entry names an owner registered before it was
		// written, so an owner missing at that revision is gone for good
		// (owner IDs are never reused).
		var running, owners []*mvccpb.KeyValue
		var more bool
		err := e.do(ctx, "sweep orphans", func(ctx context.Context) error {
			resp, err := e.kv.Txn(ctx).Then(
				clientv3.OpGet(from, clientv3.WithRange(end), clientv3.WithLimit(cleanupPage)),
				clientv3.OpGet(ownersDir, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			).Commit()
			if err != nil {
				return err
			}
			page := resp.Responses[0].GetResponseRange()
			running, more = page.GetKvs(), page.GetMore()
			owners = resp.Responses[1].GetResponseRange().GetKvs()
			return nil
		})
		if err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		errs = append(errs, e.sweepPage(ctx, running, owners, adopt, &rep))
		if !more || len(running) == 0 {
			return rep, errors.Join(errs...)
		}
		from = string(running[len(running)-1].Key) + "\x00"
	}
}

// sweepPage sweeps the orphans among one page of the running index.
func (e *Etcd) sweepPage(ctx context.Context, running, owners []*mvccpb.KeyValue, adopt AdoptFunc, rep *SweepReport) error {
	live := make(map[string]bool, len(owners))
	for _, kv := range owners {
		live[strings.TrimPrefix(string(kv.Key), ownersDir)] = true
	}
	var errs []error
	for _, kv := range running {
		owner := string(kv.Value)
		if live[owner] {
			continue
		}
		kind, id, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), runningDir), "/")
		k, known := ownedKinds[kind]
		if !ok || !known {
			continue
		}
		res, err := k.sweep(ctx, e, id, owner, adopt)
		if errors.Is(err, errNotOrphan) {
			var deleted bool
			if deleted, err = e.deleteIndex(ctx, string(kv.Key), kv.ModRevision); deleted {
				rep.StaleIndex++
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch res {
		case sweptFailed:
			rep.Failed++
		case sweptAdopted:
			rep.Adopted++
		}
	}
	return errors.Join(errs...)
}

type sweepResult int

const (
	sweptNone sweepResult = iota
	sweptFailed
	sweptAdopted
)

// deleteIndex deletes a running-index entry if it is still at rev.
func (e *Etcd) deleteIndex(ctx context.Context, key string, rev int64) (bool, error) {
	return e.deleteAt(ctx, "delete running index "+key, key, rev, clientv3.OpDelete(key))
}

// CleanupExpired deletes what has expired ahead of its lease
// (delete_expired_stream_sessions): sessions and jobs past ExpiresAt (a
// session with its items and index entry), item sets whose session no
// longer exists, and index entries whose entity no longer exists. Leases
// delete all of these anyway, a little later (see the package
// documentation); reads already treat them as absent.
func (e *Etcd) CleanupExpired(ctx context.Context) (CleanupReport, error) {
	var rep CleanupReport
	now := e.now()
	var errs []error
	var err error
	rep.StreamSessions, err = streamSessionKind.cleanup(ctx, e, now)
	errs = append(errs, err)
	rep.Jobs, err = jobKind.cleanup(ctx, e, now)
	errs = append(errs, err)
	errs = append(errs, e.cleanupItemSets(ctx, &rep))
	// Index entries left by entities that no longer exist: the open-entity
	// indexes (active/<kind>/<workspace>/<agent>/<id>, active-client/…)
	// and the running index (running/<kind>/<id>).
	lastIsID := func(kind, rest string) string { return entityKey(kind, rest[strings.LastIndexByte(rest, '/')+1:]) }
	errs = append(errs, e.cleanupIndex(ctx, activeDir, &rep, lastIsID))
	errs = append(errs, e.cleanupIndex(ctx, activeClientDir, &rep, lastIsID))
	errs = append(errs, e.cleanupIndex(ctx, runningDir, &rep, entityKey))
	// The job list index (job-list/<workspace>/…/<id>) and job results
	// (job-results/<id>).
	errs = append(errs, e.cleanupIndex(ctx, jobListDir, &rep, func(_, rest string) string {
		return jobKind.key(rest[strings.LastIndexByte(rest, '/')+1:])
	}))
	errs = append(errs, e.cleanupIndex(ctx, jobResultsDir, &rep, func(id, _ string) string { return jobKind.key(id) }))
	// What finished jobs keep (retained.go): index entries of jobs gone,
	// and expired eviction markers with the byte units of their jobs.
	errs = append(errs, e.cleanupIndex(ctx, retainedDir, &rep, lastIsID))
	errs = append(errs, e.cleanupIndex(ctx, retainedClientDir, &rep, lastIsID))
	errs = append(errs, e.cleanupEvicted(ctx, now, &rep))
	return rep, errors.Join(errs...)
}

// entityKey is the record key of an index entry's entity ("" for an
// unknown kind): the indexes name kinds by their ownedKind's index.
func entityKey(kind, id string) string {
	if k, ok := ownedKinds[kind]; ok {
		return k.key(id)
	}
	return ""
}

// cleanupIndex deletes the entries under an index dir (<dir><kind>/<rest>)
// whose entity no longer exists.
func (e *Etcd) cleanupIndex(ctx context.Context, dir string, rep *CleanupReport, key func(kind, rest string) string) error {
	return e.scan(ctx, dir, true, func(kv *mvccpb.KeyValue) error {
		kind, rest, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), dir), "/")
		k := key(kind, rest)
		if k == "" {
			return nil
		}
		exists, err := e.exists(ctx, k)
		if err != nil || exists {
			return err
		}
		deleted, err := e.deleteIndex(ctx, string(kv.Key), kv.ModRevision)
		if deleted {
			rep.StaleIndex++
		}
		return err
	})
}

// cleanupItemSets deletes the items of sessions that no longer exist: one
// keys-only read per item set, skipping to the next set.
func (e *Etcd) cleanupItemSets(ctx context.Context, rep *CleanupReport) error {
	end := clientv3.GetPrefixRangeEnd(itemsDir)
	from := itemsDir
	for {
		var key string
		err := e.do(ctx, "clean up stream items", func(ctx context.Context) error {
			resp, err := e.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
			if err != nil {
				return err
			}
			if len(resp.Kvs) > 0 {
				key = string(resp.Kvs[0].Key)
			}
			return nil
		})
		if err != nil || key == "" {
			return err
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(key, itemsDir), "/")
		exists, err := e.exists(ctx, streamSessionKind.key(id))
		if err != nil {
			return err
		}
		if !exists {
			// A session's items are only written while its record exists,
			// so items without a record are orphaned for good.
			err := e.do(ctx, "clean up stream items", func(ctx context.Context) error {
				_, err := e.kv.Delete(ctx, itemsPrefix(id), clientv3.WithPrefix())
				return err
			})
			if err != nil {
				return err
			}
			rep.ItemSets++
		}
		from = clientv3.GetPrefixRangeEnd(itemsPrefix(id))
	}
}

func (e *Etcd) exists(ctx context.Context, key string) (bool, error) {
	var n int64
	err := e.do(ctx, "read "+key, func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		n = resp.Count
		return nil
	})
	return n > 0, err
}

// scan calls f for every key under dir, a page at a time.
func (e *Etcd) scan(ctx context.Context, dir string, keysOnly bool, f func(*mvccpb.KeyValue) error) error {
	end := clientv3.GetPrefixRangeEnd(dir)
	from := dir
	var errs []error
	for {
		var kvs []*mvccpb.KeyValue
		var more bool
		err := e.do(ctx, "scan "+dir, func(ctx context.Context) error {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(cleanupPage)}
			if keysOnly {
				opts = append(opts, clientv3.WithKeysOnly())
			}
			resp, err := e.kv.Get(ctx, from, opts...)
			if err != nil {
				return err
			}
			kvs, more = resp.Kvs, resp.More
			return nil
		})
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, kv := range kvs {
			if err := f(kv); err != nil {
				errs = append(errs, err)
			}
		}
		if !more || len(kvs) == 0 {
			return errors.Join(errs...)
		}
		from = string(kvs[len(kvs)-1].Key) + "\x00"
	}
}

// RunSweeper watches for replicas whose owner lease ends and sweeps their
// orphans at once (SweepOrphans), sweeps every Interval in case a watch
// event was missed, and — on the one replica holding the sweep-leader key —
// runs CleanupExpired every CleanupInterval. Run it on every replica; it
// returns when ctx ends or the Etcd closes.
//
// A dead replica's running entities are marked failed about OwnerTTL after
// its last keep-alive (plus etcd's ~0.5s expiry scan and one sweep), or at
// the latest OwnerTTL + Interval when the watch missed the expiry.
func (e *Etcd) RunSweeper(ctx context.Context, cfg SweeperConfig) error {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = DefaultCleanupInterval
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.bgCtx, cancel)
	defer stop()

	sweep := func() {
		rep, err := e.SweepOrphans(ctx, cfg.Adopt)
		if err != nil && ctx.Err() == nil {
			lvl := zap.WarnLevel
			if errors.Is(err, ErrUnavailable) {
				lvl = zap.DebugLevel
			}
			lg.Log(lvl, "orphan sweep failed", zap.Error(err))
		}
		if rep.Failed+rep.Adopted > 0 {
			lg.Info("orphaned sessions and jobs swept", zap.Int("failed", rep.Failed), zap.Int("adopted", rep.Adopted))
		}
		if cfg.OnSweep != nil && ctx.Err() == nil {
			cfg.OnSweep(rep, err)
		}
	}
	cleanup := func() {
		if !e.sweepLeader(ctx) {
			return
		}
		rep, err := e.CleanupExpired(ctx)
		telemetry.ExpiredDeleted(rep.StreamSessions, rep.Jobs)
		if err != nil && ctx.Err() == nil {
			lg.Debug("expiry cleanup incomplete", zap.Error(err))
		}
		if rep != (CleanupReport{}) {
			lg.Debug("expired state cleaned up", zap.Int("sessions", rep.StreamSessions), zap.Int("jobs", rep.Jobs),
				zap.Int("item_sets", rep.ItemSets), zap.Int("stale_index", rep.StaleIndex))
		}
	}

	deleted := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before Wait: ends the watch
	wg.Go(func() { e.watchOwners(ctx, deleted) })
	// Register as an owner from the start, so that the fleet learns the
	// record formats this replica reads (format.go) before it writes.
	if _, err := e.owner(ctx); err != nil && ctx.Err() == nil {
		lg.Debug("owner registration failed; retried when needed", zap.Error(err))
	}
	e.WriteFormat()
	if cfg.RecoverSpace {
		interval := cfg.SpaceRecoveryInterval
		if interval <= 0 {
			interval = DefaultSpaceRecoveryInterval
		}
		wg.Go(func() { e.recoverSpaceLoop(ctx, interval, lg) })
	}

	sweep()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	ctick := time.NewTicker(cfg.CleanupInterval)
	defer ctick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deleted:
			sweep()
		case <-tick.C:
			sweep()
		case <-ctick.C:
			cleanup()
		}
	}
}

// watchOwners signals deleted whenever an owner key disappears (its lease
// expired or was revoked), re-watching after errors.
func (e *Etcd) watchOwners(ctx context.Context, deleted chan<- struct{}) {
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range e.watcher.Watch(wctx, ownersDir, clientv3.WithPrefix(), clientv3.WithFilterPut()) {
			if wr.Err() != nil {
				break
			}
			backoff = watchBackoffMin
			if len(wr.Events) > 0 {
				select {
				case deleted <- struct{}{}:
				default: // a sweep is already pending
				}
			}
		}
		wcancel()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
		// Owners may have gone while the watch was down: sweep once.
		select {
		case deleted <- struct{}{}:
		default:
		}
	}
}

// sweepLeader reports whether this replica holds (or just took) the
// sweep-leader lock: the duty (duty.go) of the expiry cleanups, under
// sweep-leader/.
func (e *Etcd) sweepLeader(ctx context.Context) bool {
	held, _ := e.holdLock(ctx, sweepLeaderLock)
	return held
}
