package store

import (
	"context"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// signalsDir holds pending stop and cancel requests of running sessions
// and jobs: signals/sessions/<id>, signals/jobs/<id>.
const signalsDir = "signals/"

func signalKey(kind, id string) string { return signalsDir + kind + "/" + id }

// signalBuffer is how many signals WatchSignals holds for a slow reader
// before it waits for it.
const signalBuffer = 64

// Signal is a stop request for a running stream session or a cancel
// request for a running job, made on any replica.
type Signal struct {
	Job bool // a job (cancel); otherwise a stream session (stop)
	ID  string
}

// WatchSignals reports the stop requests of running stream sessions and
// the cancel requests of running jobs made through any Etcd: first those
// pending, then each new one, until ctx or the Etcd closes. It is one watch
// for a whole replica: its runners take the signals of the entities they
// run, so a replica running ten thousand sessions holds one watch, not ten
// thousand. A request stays pending until the entity finishes, so a signal
// may be reported again after the watch resumes (after compaction, a lost
// leader or an etcd restart); readers must treat repeats as no-ops.
func (e *Etcd) WatchSignals(ctx context.Context) (<-chan Signal, error) {
	const op = "watch stop and cancel requests"
	kvs, rev, err := e.listRev(ctx, op, signalsDir)
	if err != nil {
		return nil, err
	}
	out := make(chan Signal, signalBuffer)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.bgCtx, cancel)
	go func() {
		defer close(out)
		defer stop()
		defer cancel()
		send := func(kv *mvccpb.KeyValue) bool {
			kind, id, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), signalsDir), "/")
			if !ok {
				return true
			}
			select {
			case out <- Signal{Job: kind == jobKind.index, ID: id}:
				return true
			case <-ctx.Done():
				return false
			}
		}
		sendAll := func() bool {
			for _, kv := range kvs {
				if !send(kv) {
					return false
				}
			}
			return true
		}
		if !sendAll() {
			return
		}
		e.resumeWatch(ctx, signalsDir, rev, []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterDelete()},
			func(ev *clientv3.Event) bool { return send(ev.Kv) },
			func() (int64, bool, error) {
				var err error
				if kvs, rev, err = e.listRev(ctx, op, signalsDir); err != nil {
					return 0, true, err
				}
				return rev, sendAll(), nil
			})
	}()
	return out, nil
}

// listRev reads the keys (not the values) under prefix and the store
// revision of the read.
func (e *Etcd) listRev(ctx context.Context, op, prefix string) ([]*mvccpb.KeyValue, int64, error) {
	var kvs []*mvccpb.KeyValue
	var rev int64
	err := e.do(ctx, op, func(ctx context.Context) error {
		resp, err := e.kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return err
		}
		kvs, rev = resp.Kvs, resp.Header.GetRevision()
		return nil
	})
	return kvs, rev, err
}
