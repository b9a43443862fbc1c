package mcp

import (
	"context"
	"slices"
	"sync"
)

// Re-expansion.
//
// The adapter remembers which entries it expanded against which upstream
// connection, and which of them publish its resources or prompts. When
// the upstream says its tools changed (notifications/tools/list_changed),
// or a session is opened again after one was lost (the upstream may have
// restarted with other tools), the entries of that connection are named
// to every host watching (sdk.OperationWatcher), which expands them again;
// when it says its resources or prompts changed
// (notifications/resources/list_changed, notifications/prompts/list_changed),
// the entries that publish them are.

// watchHub fans the changes of upstreams out to the hosts' watches.
type watchHub struct {
	mu      sync.Mutex
	entries map[string][]string // connection key -> entry names
	// lists: connection key -> entry name -> the lists it publishes.
	lists map[string]map[string]lists
	subs  map[*watcher]bool
}

// lists is a set of the upstream lists an entry publishes besides tools.
type lists uint8

const (
	listResources lists = 1 << iota // resources and resource templates
	listPrompts
)

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

// publishing records that the entry name, expanded against the
// connection key, publishes l.
func (w *watchHub) publishing(key, name string, l lists) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lists == nil {
		w.lists = map[string]map[string]lists{}
	}
	if w.lists[key] == nil {
		w.lists[key] = map[string]lists{}
	}
	w.lists[key][name] = l
}

// changed names the entries of the connection key to every watch, without
// waiting.
func (w *watchHub) changed(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.name(w.entries[key])
}

// listChanged names the entries of the connection key that publish l to
// every watch, without waiting.
func (w *watchHub) listChanged(key string, l lists) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for _, n := range w.entries[key] {
		if w.lists[key][n]&l != 0 {
			names = append(names, n)
		}
	}
	w.name(names)
}

// name names the entries to every watch (w.mu held).
func (w *watchHub) name(names []string) {
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
