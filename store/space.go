package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcd's space quota. etcd refuses a write that would grow its database
// beyond the quota (--quota-backend-bytes) and raises the NOSPACE alarm;
// from then on it refuses every write and lease grant, on every member,
// until the alarm is disarmed, even after space was freed. Reads, deletes
// and lease renewals keep working. The store reports such refusals as
// ErrNoSpace, counts them (SpaceStatus), logs the first one of an episode,
// and RecoverSpace frees space and disarms the alarm.

// DefaultSpaceRecoveryInterval spaces the RecoverSpace attempts of a
// sweeper configured with SweeperConfig.RecoverSpace.
const DefaultSpaceRecoveryInterval = time.Minute

// spaceState tracks NOSPACE refusals.
type spaceState struct {
	refused atomic.Uint64 // writes refused for NOSPACE since the store opened
	full    atomic.Bool   // the last write refused for NOSPACE, none accepted since
	since   atomic.Int64  // Unix nanoseconds when full last became true
	// notify (capacity 1) tells a sweeper with space recovery that writes
	// started failing.
	notify chan struct{}
}

// SpaceStatus says whether etcd refuses writes for lack of space, for
// health checks and metrics.
type SpaceStatus struct {
	// NoSpace: the store's last write was refused by etcd's NOSPACE alarm
	// and no write has succeeded since (nor has RecoverSpace).
	NoSpace bool
	// Since is when the current NOSPACE episode began (zero without one).
	Since time.Time
	// Refused counts the store operations etcd refused for lack of space
	// since the store was opened (a counter, never reset).
	Refused uint64
}

// SpaceStatus reports the NOSPACE state as this store has seen it.
func (e *Etcd) SpaceStatus() SpaceStatus {
	s := SpaceStatus{NoSpace: e.space.full.Load(), Refused: e.space.refused.Load()}
	if s.NoSpace {
		s.Since = time.Unix(0, e.space.since.Load())
	}
	return s
}

// note records err when it is a NOSPACE refusal and returns it unchanged.
func (e *Etcd) note(err error) error {
	if err == nil || !errors.Is(err, ErrNoSpace) {
		return err
	}
	e.space.refused.Add(1)
	if e.space.full.CompareAndSwap(false, true) {
		e.space.since.Store(e.now().UnixNano())
		e.log.Error("etcd is out of space: its database reached its space quota and it raised the NOSPACE alarm, "+
			"so every write is refused (new sessions, jobs, polls); reads keep working. Free space: compact, defragment "+
			"and disarm the alarm (the embedded etcd does this by itself; see docs/architecture/etcd.md)",
			zap.Error(err))
		select {
		case e.space.notify <- struct{}{}:
		default:
		}
	}
	return err
}

// wrote records a write that etcd accepted: a NOSPACE episode is over.
func (e *Etcd) wrote() {
	if e.space.full.Load() && e.space.full.CompareAndSwap(true, false) {
		e.log.Info("etcd accepts writes again (NOSPACE over)")
	}
}

// SpaceReport says what RecoverSpace did.
type SpaceReport struct {
	// Revision is the revision the key history was compacted to.
	Revision int64
	// DBSizeBefore and DBSizeAfter are the database size of the largest
	// member before and after defragmenting, DBSizeInUse the part of it
	// in use after, in bytes; Quota is its space quota.
	DBSizeBefore, DBSizeAfter, DBSizeInUse, Quota int64
	// Disarmed counts the NOSPACE alarms disarmed.
	Disarmed int
	// Shed is what the space recovery of the embedded etcd dropped when
	// compacting alone left the database nearly full (see RecoverSpace).
	Shed ShedReport
}

// ShedReport counts the retained state a space recovery dropped.
type ShedReport struct {
	EventStreams int   // SSE event logs
	Jobs         int   // finished jobs, with their results
	Bytes        int64 // about how many bytes of values they held
}

// maintenanceTimeout bounds each step of RecoverSpace (defragmenting a
// large database takes a while).
const maintenanceTimeout = 2 * time.Minute

// The space recovery of the embedded etcd drops retained state when, once
// compacted and defragmented, the data in use still takes more than
// shedAbove of the space quota (a database that full would refill at
// once): until about shedTo of the quota is in use.
const (
	shedAbove = 0.75
	shedTo    = 0.5
)

// RecoverSpace frees etcd's space and ends a NOSPACE episode, the
// documented etcd recovery: compact the key history up to the current
// revision, defragment every endpoint (which returns the freed pages to the
// file system; etcd's quota counts the database file), then disarm the
// NOSPACE alarms. Disarming when the live data still exceeds the quota is
// harmless: etcd raises the alarm again at the next write that does not
// fit. Defragmenting blocks a member's reads and writes while it runs
// (milliseconds for a small database, seconds for gigabytes). It needs
// etcd's root permissions when authentication is enabled.
func (e *Etcd) RecoverSpace(ctx context.Context) (SpaceReport, error) {
	return e.recoverSpace(ctx, false)
}

// recoverSpace is RecoverSpace; with shed, when the database is still
// nearly full once compacted and defragmented — what fills it is live,
// not history — it first drops the oldest retained state (shedRetained:
// SSE event logs, then finished jobs), compacts and defragments again,
// and after disarming leaves an eviction marker for each job dropped.
func (e *Etcd) recoverSpace(ctx context.Context, shed bool) (SpaceReport, error) {
	var rep SpaceReport
	if err := e.compactAndDefragment(ctx, &rep); err != nil {
		return rep, err
	}
	var dropped []*jobRecord
	if shed && rep.Quota > 0 && float64(rep.DBSizeInUse) > shedAbove*float64(rep.Quota) {
		var err error
		rep.Shed, dropped, err = e.shedRetained(ctx, rep.DBSizeInUse-int64(shedTo*float64(rep.Quota)))
		if err != nil {
			return rep, err
		}
		e.log.Warn("etcd was still nearly full after compacting: the oldest retained state was dropped (SSE event logs, then finished jobs)",
			zap.Int64("db_size_in_use", rep.DBSizeInUse), zap.Int64("quota", rep.Quota),
			zap.Int("event_streams", rep.Shed.EventStreams), zap.Int("jobs", rep.Shed.Jobs), zap.Int64("bytes", rep.Shed.Bytes))
		before := rep.DBSizeBefore
		if err := e.compactAndDefragment(ctx, &rep); err != nil {
			return rep, err
		}
		rep.DBSizeBefore = before
	}
	err := e.maintain(ctx, "recover space: disarm the NOSPACE alarm", func(ctx context.Context) error {
		alarms, err := e.cli.AlarmList(ctx)
		if err != nil {
			return err
		}
		for _, a := range alarms.Alarms {
			if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
				continue
			}
			if _, err := e.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
				return fmt.Errorf("member %x: %w", a.MemberID, err)
			}
			rep.Disarmed++
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if e.space.full.CompareAndSwap(true, false) || rep.Disarmed > 0 {
		e.log.Info("etcd space recovered: history compacted, database defragmented, NOSPACE alarm disarmed",
			zap.Int64("revision", rep.Revision), zap.Int64("db_size_before", rep.DBSizeBefore),
			zap.Int64("db_size_after", rep.DBSizeAfter), zap.Int64("db_size_in_use", rep.DBSizeInUse),
			zap.Int("alarms_disarmed", rep.Disarmed))
	}
	// Writes work again: tell the owners of the jobs dropped why they are
	// gone (best effort; without a marker a job reads as expired).
	for _, r := range dropped {
		p := e.newPlan(ctx)
		if err := p.putEvicted(r, EvictedSpaceRecovery, 0, e.now().UTC()); err != nil || len(p.ops) == 0 {
			continue
		}
		_ = e.do(ctx, "mark evicted job "+r.ID, func(ctx context.Context) error {
			_, err := e.kv.Txn(ctx).Then(p.ops...).Commit()
			return err
		})
	}
	return rep, nil
}

// maintain runs one maintenance step under maintenanceTimeout.
func (e *Etcd) maintain(ctx context.Context, op string, f func(ctx context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, max(e.opTimeout, maintenanceTimeout))
	defer cancel()
	return classify(ctx, op, f(sctx))
}

// compactAndDefragment compacts the key history to the current revision
// and defragments every endpoint, noting sizes in rep.
func (e *Etcd) compactAndDefragment(ctx context.Context, rep *SpaceReport) error {
	err := e.maintain(ctx, "recover space: read the revision", func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, pingKey, clientv3.WithCountOnly())
		if err == nil {
			rep.Revision = resp.Header.GetRevision()
		}
		return err
	})
	if err != nil {
		return err
	}
	err = e.maintain(ctx, "recover space: compact", func(ctx context.Context) error {
		_, err := e.cli.Compact(ctx, rep.Revision, clientv3.WithCompactPhysical())
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil // compacted at or beyond it already
		}
		return err
	})
	if err != nil {
		return err
	}
	rep.DBSizeAfter, rep.DBSizeInUse = 0, 0
	for _, ep := range e.cli.Endpoints() {
		err := e.maintain(ctx, "recover space: defragment "+ep, func(ctx context.Context) error {
			if st, err := e.cli.Status(ctx, ep); err == nil {
				rep.DBSizeBefore = max(rep.DBSizeBefore, st.DbSize)
			}
			if _, err := e.cli.Defragment(ctx, ep); err != nil {
				return err
			}
			st, err := e.cli.Status(ctx, ep)
			if err != nil {
				return err
			}
			if st.DbSize >= rep.DBSizeAfter {
				rep.DBSizeAfter, rep.DBSizeInUse, rep.Quota = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// shedRetained drops the oldest retained state until about want bytes of
// values are gone: SSE event logs first (oldest last write first: they only
// serve a client resuming a dropped stream), then finished jobs (oldest
// finish first), with their results. Deletes only, which etcd allows under
// the NOSPACE alarm; it returns the jobs dropped, for their markers. A
// scan of the event logs and of the retained-job index: this runs only
// when etcd is full.
func (e *Etcd) shedRetained(ctx context.Context, want int64) (ShedReport, []*jobRecord, error) {
	var rep ShedReport
	streams, err := e.eventStreams(ctx)
	if err != nil {
		return rep, nil, err
	}
	slices.SortFunc(streams, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.ModRevision, b.ModRevision) })
	for _, kv := range streams {
		if rep.Bytes >= want {
			return rep, nil, nil
		}
		mk := string(kv.Key)
		e.events.Delete(mk)
		err := e.do(ctx, "drop event log "+truncate(mk), func(ctx context.Context) error {
			_, err := e.kv.Txn(ctx).Then(clientv3.OpDelete(mk), clientv3.OpDelete(mk+"/ev/", clientv3.WithPrefix())).Commit()
			return err
		})
		if err != nil {
			return rep, nil, err
		}
		rec, _ := decodeEventStream(kv.Value)
		rep.EventStreams++
		rep.Bytes += rec.Bytes + int64(len(kv.Value))
	}
	var keys []string
	err = e.scan(ctx, retainedJobsDir, true, func(kv *mvccpb.KeyValue) error {
		keys = append(keys, string(kv.Key))
		return nil
	})
	if err != nil {
		return rep, nil, err
	}
	// <t>/<id> ends every key: the oldest finish first.
	pos := func(k string) string {
		i := strings.LastIndexByte(k, '/')
		return k[strings.LastIndexByte(k[:i], '/')+1:]
	}
	slices.SortFunc(keys, func(a, b string) int { return strings.Compare(pos(a), pos(b)) })
	var dropped []*jobRecord
	for _, k := range keys {
		if rep.Bytes >= want {
			break
		}
		r, err := e.evictJob(ctx, k, EvictedSpaceRecovery, 0, false)
		if err != nil {
			return rep, dropped, err
		}
		if r != nil {
			dropped = append(dropped, r)
			rep.Jobs++
			rep.Bytes += retainedBytes(r.ResultBytes, len(r.Error)+len(r.Progress)+512)
		}
	}
	return rep, dropped, nil
}

// eventStreams reads the records of every SSE event log, skipping their
// events: keys a page at a time, then the records' values.
func (e *Etcd) eventStreams(ctx context.Context) ([]*mvccpb.KeyValue, error) {
	var keys []string
	from, end := streamsDir, clientv3.GetPrefixRangeEnd(streamsDir)
	for {
		var kvs []*mvccpb.KeyValue
		var more bool
		err := e.do(ctx, "list event logs", func(ctx context.Context) error {
			resp, err := e.kv.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(cleanupPage))
			if err != nil {
				return err
			}
			kvs, more = resp.Kvs, resp.More
			return nil
		})
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			if k := string(kv.Key); !strings.Contains(k[len(streamsDir):], "/ev/") {
				keys = append(keys, k)
			}
		}
		if !more || len(kvs) == 0 {
			break
		}
		last := string(kvs[len(kvs)-1].Key)
		from = last + "\x00"
		if i := strings.Index(last[len(streamsDir):], "/ev/"); i >= 0 {
			// Skip the rest of this log's events.
			from = clientv3.GetPrefixRangeEnd(last[:len(streamsDir)+i+len("/ev/")])
		}
	}
	kvs, err := e.getKeys(ctx, "read event logs", keys)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(kvs, func(kv *mvccpb.KeyValue) bool { return kv == nil }), nil
}

// NoSpaceAlarm reports whether etcd has a NOSPACE alarm raised (one read
// of its alarm list; needs root permissions with authentication).
func (e *Etcd) NoSpaceAlarm(ctx context.Context) (bool, error) {
	var raised bool
	err := e.do(ctx, "list alarms", func(ctx context.Context) error {
		resp, err := e.cli.AlarmList(ctx)
		if err != nil {
			return err
		}
		for _, a := range resp.Alarms {
			raised = raised || a.Alarm == etcdserverpb.AlarmType_NOSPACE
		}
		return nil
	})
	return raised, err
}

// recoverSpaceLoop runs RecoverSpace (after deleting expired state, which
// etcd allows under the alarm, and shedding the oldest retained state when
// compacting frees too little: recoverSpace) whenever the store sees
// writes refused for lack of space, at most once per interval, until ctx
// ends.
func (e *Etcd) recoverSpaceLoop(ctx context.Context, interval time.Duration, lg *zap.Logger) {
	var last time.Time
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.space.notify:
		case <-tick.C:
		}
		if !e.space.full.Load() || time.Since(last) < interval {
			continue
		}
		last = time.Now()
		if rep, err := e.CleanupExpired(ctx); err != nil && ctx.Err() == nil {
			lg.Debug("expiry cleanup before space recovery incomplete", zap.Error(err))
		} else if rep != (CleanupReport{}) {
			lg.Info("expired state deleted to free etcd space", zap.Int("sessions", rep.StreamSessions), zap.Int("jobs", rep.Jobs),
				zap.Int("item_sets", rep.ItemSets), zap.Int("stale_index", rep.StaleIndex))
		}
		if _, err := e.recoverSpace(ctx, true); err != nil && ctx.Err() == nil {
			lg.Warn("etcd space recovery failed; it is retried", zap.Duration("retry_in", interval), zap.Error(err))
		}
	}
}
