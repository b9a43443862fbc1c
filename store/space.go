package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
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
			"and disarm the alarm (the embedded etcd does this by itself; see docs/architecture.md)",
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
	// in use after, in bytes.
	DBSizeBefore, DBSizeAfter, DBSizeInUse int64
	// Disarmed counts the NOSPACE alarms disarmed.
	Disarmed int
}

// maintenanceTimeout bounds each step of RecoverSpace (defragmenting a
// large database takes a while).
const maintenanceTimeout = 2 * time.Minute

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
	var rep SpaceReport
	step := func(op string, f func(ctx context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, max(e.opTimeout, maintenanceTimeout))
		defer cancel()
		return classify(ctx, op, f(sctx))
	}
	err := step("recover space: read the revision", func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, pingKey, clientv3.WithCountOnly())
		if err == nil {
			rep.Revision = resp.Header.GetRevision()
		}
		return err
	})
	if err != nil {
		return rep, err
	}
	err = step("recover space: compact", func(ctx context.Context) error {
		_, err := e.cli.Compact(ctx, rep.Revision, clientv3.WithCompactPhysical())
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil // compacted at or beyond it already
		}
		return err
	})
	if err != nil {
		return rep, err
	}
	for _, ep := range e.cli.Endpoints() {
		err := step("recover space: defragment "+ep, func(ctx context.Context) error {
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
				rep.DBSizeAfter, rep.DBSizeInUse = st.DbSize, st.DbSizeInUse
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
	}
	err = step("recover space: disarm the NOSPACE alarm", func(ctx context.Context) error {
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
	return rep, nil
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
// etcd allows under the alarm) whenever the store sees writes refused for
// lack of space, at most once per interval, until ctx ends.
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
		if _, err := e.RecoverSpace(ctx); err != nil && ctx.Err() == nil {
			lg.Warn("etcd space recovery failed; it is retried", zap.Duration("retry_in", interval), zap.Error(err))
		}
	}
}
