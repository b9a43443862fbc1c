package store

import (
	"context"
	"github.com/crankmcp/crank/plugins/sdk"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StreamSessionEvent is a change of a watched stream session.
type StreamSessionEvent struct {
	// Session is the session as of this event; nil when Gone.
	StreamSession *StreamSession
	// Gone: the session was deleted or expired. The channel closes after
	// this event.
	Gone bool
}

// JobEvent is a change of a watched job.
type JobEvent struct {
	// Job is the job as of this event; nil when Gone.
	Job *AsyncJobHandle
	// Gone: the job was deleted or expired. The channel closes after this
	// event.
	Gone bool
}

// Re-watch backoff after a watch ends with an error (compaction, lost
// leader, etcd down).
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 2 * time.Second
)

// WatchStreamSession reports the session's changes made through any Etcd (any
// replica): first its current state, then every change, until it is gone or
// ctx ends. This is how a stop requested on one replica reaches the runner
// on another. Events are coalesced: a slow reader skips intermediate states
// and always gets the latest. The watch survives etcd restarts, leader
// changes and compaction (it re-reads the session and resumes). Logical
// expiry is not an event: check StreamSession.Expired.
func (e *Etcd) WatchStreamSession(ctx context.Context, scope Scope, id string) (<-chan StreamSessionEvent, error) {
	return watchOwned(ctx, e, streamSessionKind, scope, id,
		func(s *StreamSession) StreamSessionEvent { return StreamSessionEvent{StreamSession: s} }, StreamSessionEvent{Gone: true})
}

// WatchJob reports the job's changes made through any Etcd, like
// WatchStreamSession: a cancel requested on one replica reaches the runner on
// another.
func (e *Etcd) WatchJob(ctx context.Context, scope Scope, id string) (<-chan JobEvent, error) {
	ch, err := watchOwned(ctx, e, jobKind, scope, id, func(j *AsyncJobHandle) JobEvent { return JobEvent{Job: j} }, JobEvent{Gone: true})
	if err != nil {
		return nil, e.explainMissing(ctx, &scope, id, err)
	}
	return ch, nil
}

// getRev reads key and the store revision of the read.
func (e *Etcd) getRev(ctx context.Context, op, key string) (*mvccpb.KeyValue, int64, error) {
	var kv *mvccpb.KeyValue
	var rev int64
	err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, key)
		if err != nil {
			return err
		}
		rev = resp.Header.GetRevision()
		if len(resp.Kvs) > 0 {
			kv = resp.Kvs[0]
		}
		return nil
	})
	return kv, rev, err
}

// watchKey emits conv(first), then conv of every later version of key, then
// gone when the key is deleted (or undecodable), closing the channel after
// gone or when ctx or the Etcd closes.
func watchKey[T any](e *Etcd, ctx context.Context, op, key string, first *mvccpb.KeyValue, rev int64,
	conv func(*mvccpb.KeyValue) (T, bool), gone T,
) <-chan T {
	out := make(chan T, 1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.bgCtx, cancel)
	go func() {
		defer close(out)
		defer stop()
		defer cancel()
		emit := func(kv *mvccpb.KeyValue) bool {
			v, ok := conv(kv)
			if !ok {
				sendLatest(out, gone)
				return false
			}
			sendLatest(out, v)
			return true
		}
		if !emit(first) {
			return
		}
		sent := first.ModRevision
		e.resumeWatch(ctx, key, rev, nil, func(ev *clientv3.Event) bool {
			if ev.Type == mvccpb.DELETE {
				sendLatest(out, gone)
				return false
			}
			sent = ev.Kv.ModRevision
			return emit(ev.Kv)
		}, func() (int64, bool, error) {
			kv, r, err := e.getRev(ctx, op, key)
			switch {
			case err != nil:
				return 0, true, err
			case kv == nil:
				sendLatest(out, gone)
				return 0, false, nil
			case kv.ModRevision != sent:
				sent = kv.ModRevision
				return r, emit(kv), nil
			}
			return r, true, nil
		})
	}()
	return out
}

// watchBackoff is the wait before a broken watch's state is read again.
var watchBackoff = sdk.Backoff{Initial: watchBackoffMin, Max: watchBackoffMax}

// resumeWatch watches key (with opts: a prefix, a filter) from the
// revision after rev, handing each event to event, until ctx ends or a
// callback says to stop (false). When the watch breaks (compacted, no
// leader, etcd down) it waits out a backoff and calls resync, which reads
// the state again, hands on what changed while the watch was down and
// returns the revision of its read (an error: try again after the next
// backoff); the watch resumes after that revision. The one
// watch-reread-resume loop of the store.
func (e *Etcd) resumeWatch(ctx context.Context, key string, rev int64, opts []clientv3.OpOption,
	event func(*clientv3.Event) bool, resync func() (rev int64, ok bool, err error),
) {
	failures := 0
	for {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range e.watcher.Watch(wctx, key, append([]clientv3.OpOption{clientv3.WithRev(rev + 1)}, opts...)...) {
			if wr.Err() != nil {
				break // compacted, no leader, canceled: re-read below
			}
			failures = 0
			for _, ev := range wr.Events {
				rev = ev.Kv.ModRevision
				if !event(ev) {
					wcancel()
					return
				}
			}
		}
		wcancel()
		for {
			failures++
			if !watchBackoff.Wait(ctx, failures) {
				return
			}
			r, ok, err := resync()
			if err != nil {
				continue
			}
			if !ok {
				return
			}
			rev = r
			break
		}
	}
}

// sendLatest puts v in out (capacity 1) without blocking, replacing a value
// the reader has not taken yet: readers always see the latest state.
func sendLatest[T any](out chan T, v T) {
	for {
		select {
		case out <- v:
			return
		default:
		}
		select {
		case <-out:
		default:
		}
	}
}
