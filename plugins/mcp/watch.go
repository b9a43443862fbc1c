package mcp

import (
	"context"
	"slices"
	"sync"
)

// Re-expansion.
//
// The adapter remembers which entries it expanded against which upstream
// connection. When the upstream says its tools changed
// (notifications/tools/list_changed), or a session is opened again after
// one was lost (the upstream may have restarted with other tools), the
// entries of that connection are named to every host watching
// (sdk.OperationWatcher), which expands them again.

// watchHub fans the changes of upstreams out to the hosts' watches.
type watchHub struct {
	mu      sync.Mutex
	entries map[string][]string // connection key -> entry names
	subs    map[*watcher]bool
}

// watcher is one host's watch: the entries named since it last sent,
// and a signal that there are some.
type watcher struct {
	mu      sync.Mutex
	pending []string
	signal  chan struct{}
}

// expanded records that the entry name was expanded against the
// connection key.
func (w *watchHub) expanded(key, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.entries == nil {
		w.entries = map[string][]string{}
	}
	if !slices.Contains(w.entries[key], name) {
		w.entries[key] = append(w.entries[key], name)
	}
}

// changed names the entries of the connection key to every watch, without
// waiting.
func (w *watchHub) changed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := w.entries[key]
	if len(names) == 0 {
		return
	}
	for s := range w.subs {
		s.mu.Lock()
		for _, n := range names {
			if !slices.Contains(s.pending, n) {
				s.pending = append(s.pending, n)
			}
		}
		s.mu.Unlock()
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
}

// WatchOperations implements sdk.OperationWatcher.
func (a *adapter) WatchOperations(ctx context.Context, changed func([]string) error) error {
	w := &a.pool.watch
	s := &watcher{signal: make(chan struct{}, 1)}
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[*watcher]bool{}
	}
	w.subs[s] = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.subs, s)
		w.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.signal:
		}
		s.mu.Lock()
		names := s.pending
		s.pending = nil
		s.mu.Unlock()
		if len(names) > 0 {
			if err := changed(names); err != nil {
				return nil // the host has gone
			}
		}
	}
}
