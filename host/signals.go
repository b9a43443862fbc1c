package host

import (
	"context"
	"sync"

	"github.com/crankmcp/crank/store"
)

// SignalStore carries the stop and cancel requests made on any replica to
// the runners of this one.
type SignalStore interface {
	WatchSignals(ctx context.Context) (<-chan store.Signal, error)
}

// signalHub hands a store's stop and cancel requests to the session and
// job runners of this process: one store watch (store.WatchSignals) for
// all of them, however many run, instead of one watch each. A Host is
// replaced on every config reload while its runners go on, so hubs belong
// to the store, not to a Host.
type signalHub struct {
	st      SignalStore
	mu      sync.Mutex
	running bool
	waiters map[store.Signal]func()
}

var hubs sync.Map // SignalStore → *signalHub

func hubFor(st SignalStore) *signalHub {
	v, _ := hubs.LoadOrStore(st, &signalHub{st: st, waiters: map[store.Signal]func(){}})
	return v.(*signalHub)
}

// subscribe calls f (once, without blocking) when a stop (or, for a job,
// a cancel) of the entity is requested on any replica. Subscribe before
// the entity's ID leaves this process, so no request can come first. The
// returned function ends the subscription.
func (hb *signalHub) subscribe(job bool, id string, f func()) (release func(), err error) {
	key := store.Signal{Job: job, ID: id}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if !hb.running {
		ch, err := hb.st.WatchSignals(context.Background())
		if err != nil {
			return nil, err
		}
		hb.running = true
		go hb.run(ch)
	}
	hb.waiters[key] = f
	return func() {
		hb.mu.Lock()
		delete(hb.waiters, key)
		hb.mu.Unlock()
	}, nil
}

func (hb *signalHub) run(ch <-chan store.Signal) {
	for s := range ch {
		hb.mu.Lock()
		f := hb.waiters[s]
		delete(hb.waiters, s) // a repeated signal finds nobody
		hb.mu.Unlock()
		if f != nil {
			f()
		}
	}
	// The store closed (its runners end with it): forget the hub, so the
	// next subscription on a store that lives on starts a new watch.
	hb.mu.Lock()
	hb.running = false
	hb.mu.Unlock()
	hubs.CompareAndDelete(hb.st, hb)
}
