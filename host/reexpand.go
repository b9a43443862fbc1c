package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Re-expansion.
//
// An adapter whose expansions can change while it runs (the mcp adapter,
// when an upstream's tools change) tells the host through the optional
// WatchOperations stream (Capabilities.Watch), naming the entries to
// expand again. The host then expands each such entry again, checks its
// tools as a load does (names, descriptions, schemas, windows, collisions
// with other entries' tools, naming both) and, if they differ, replaces
// the table of tools served in one step, so that a call sees either the
// old tools or the new ones. An expansion that fails keeps the last good
// tools and is logged. Entries of session and async_job families keep
// their tools until the next load.

// toolTable is the tools a host serves, and the resources, resource
// templates and prompts (published.go).
type toolTable struct {
	ops  map[string]*boundOp
	list []*opsfile.Operation
	pubs []*Publication
	// pubIndex indexes pubs.
	pubIndex map[pubKey]*Publication
	// families are the session and async_job operations whose family
	// tools the table has, by operation name.
	families map[string]*boundOp
}

// addPublications adds an entry's publications to the table, failing on
// one another entry publishes already (naming it).
func (t *toolTable) addPublications(pubs []*Publication) error {
	if t.pubIndex == nil {
		t.pubIndex = map[pubKey]*Publication{}
	}
	for _, p := range pubs {
		k := pubKey{p.Kind, p.Key}
		if was := t.pubIndex[k]; was != nil {
			if was.Entry == p.Entry {
				return fmt.Errorf("it publishes %s %q twice", p.Kind, p.Key)
			}
			return fmt.Errorf("%s %q: entry %q publishes it too", p.Kind, p.Key, was.Entry)
		}
		t.pubIndex[k] = p
		t.pubs = append(t.pubs, p)
	}
	return nil
}

// entryTools is one operations-file entry and the tools it stands for.
type entryTools struct {
	entry    *opsfile.Operation
	sup      *Supervisor
	expanded bool // the adapter expanded it (Capabilities.Expand)
	// publishes: the adapter publishes resources or prompts
	// (Capabilities.Resources, Capabilities.Prompts).
	publishes bool
	tools     []string
	// failed: the entry could not load (load.go); it serves no tools.
	failed bool
}

// op is the bound operation of the tool name.
func (h *Host) op(name string) (*boundOp, bool) {
	b, ok := h.tab.Load().ops[name]
	return b, ok
}

// opOrNil is op without ok.
func (h *Host) opOrNil(name string) *boundOp {
	b, _ := h.op(name)
	return b
}

// Reexpand expands the entry named entry again and serves its new tools
// when they differ from the ones it serves; changed says whether they
// did. An entry the host does not have, or whose adapter does not
// expand, is left alone; on an error the host keeps the tools it had.
func (h *Host) Reexpand(ctx context.Context, entry string) (changed bool, err error) {
	h.reexpand.Lock()
	defer h.reexpand.Unlock()
	et := h.entries[entry]
	if et == nil || !et.expanded || et.failed {
		return false, nil // a failed entry is loaded again by its own retry (load.go)
	}
	if et.entry.Family != nil {
		return false, fmt.Errorf("entry %q is a %s family: its tools change at the next reload", entry, et.entry.Mode)
	}
	c, err := et.sup.Client(ctx)
	if err != nil {
		return false, fmt.Errorf("entry %q: %v", entry, err)
	}
	b := h.bind(et.entry, et.sup)
	tools, pub, diags, err := expandEntry(ctx, c, &b.call, et.publishes)
	if err != nil {
		return false, fmt.Errorf("entry %q: the adapter could not expand it: %v", entry, err)
	}
	var problems []string
	for _, d := range diags {
		if d.Severity == sdk.SeverityWarning {
			h.log.Warn("operation config", zap.String("operation", entry), zap.String("field", "config."+d.Field),
				zap.String("warning", h.redact.String(d.Message)))
			continue
		}
		problems = append(problems, "config."+d.Field+": "+d.Message)
	}
	if len(problems) > 0 {
		return false, fmt.Errorf("entry %q: %s", entry, h.redact.String(strings.Join(problems, "; ")))
	}
	pubs, err := h.publications(et.entry, et.sup, pub)
	if err != nil {
		return false, fmt.Errorf("entry %q: %s", entry, h.redact.String(err.Error()))
	}
	bound, err := h.expand(et.entry, et.sup, tools, len(pubs) > 0)
	if err != nil {
		return false, fmt.Errorf("entry %q: %s", entry, h.redact.String(err.Error()))
	}
	old := h.tab.Load()
	next := &toolTable{ops: make(map[string]*boundOp, len(old.ops)), families: old.families}
	for _, p := range old.pubs {
		if p.Entry != entry {
			_ = next.addPublications([]*Publication{p}) // they did not collide before
		}
	}
	if err := next.addPublications(pubs); err != nil {
		return false, fmt.Errorf("entry %q: %s", entry, err)
	}
	for n, o := range old.ops {
		if !slices.Contains(et.tools, n) {
			next.ops[n] = o
		}
	}
	var names []string
	var added []*opsfile.Operation
	for _, x := range bound {
		if x.Mode == opsfile.ModeWindow {
			op, err := prepareWindow(x.Operation)
			if err != nil {
				return false, fmt.Errorf("tool %q of entry %q: input_schema: %v", x.Name, entry, err)
			}
			x.Operation = op
		}
		switch {
		case x.Family != nil:
			return false, fmt.Errorf("tool %q of entry %q is a %s family: its tools change at the next reload", x.Name, entry, x.Mode)
		case x.Description == "":
			return false, fmt.Errorf("tool %q of entry %q: description is required (clients show it to the model)", x.Name, entry)
		case next.ops[x.Name] != nil:
			return false, fmt.Errorf("tool %q of entry %q: duplicate tool name: entry %q serves it too", x.Name, entry, h.entryOf(x.Name))
		}
		next.ops[x.Name] = x
		names = append(names, x.Name)
	}
	var kept []*opsfile.Operation
	for _, o := range old.list {
		if !slices.Contains(et.tools, o.Name) {
			kept = append(kept, o)
		}
	}
	uniqueTitles(bound, kept)
	for _, x := range bound {
		added = append(added, x.Operation)
	}
	if sameTools(old, et.tools, added) && samePublications(old.pubs, next.pubs) {
		return false, nil
	}
	inserted := false
	for _, o := range old.list {
		if !slices.Contains(et.tools, o.Name) {
			next.list = append(next.list, o)
		} else if !inserted {
			next.list, inserted = append(next.list, added...), true
		}
	}
	if !inserted {
		next.list = append(next.list, added...)
	}
	h.tab.Store(next)
	et.tools = names
	return true, nil
}

// entryOf names the entry that serves the tool name.
func (h *Host) entryOf(name string) string {
	for n, et := range h.entries {
		if slices.Contains(et.tools, name) {
			return n
		}
	}
	return name
}

// sameTools reports whether the tools added publish exactly what the
// tools named had in old.
func sameTools(old *toolTable, had []string, added []*opsfile.Operation) bool {
	if len(had) != len(added) {
		return false
	}
	for i, op := range added {
		was := old.ops[had[i]]
		if was == nil || !bytes.Equal(published(was.Operation), published(op)) {
			return false
		}
	}
	return true
}

// samePublications reports whether two lists publish the same things.
func samePublications(a, b []*Publication) bool {
	return slices.EqualFunc(a, b, func(x, y *Publication) bool {
		return x.Kind == y.Kind && x.Key == y.Key && bytes.Equal(x.Definition, y.Definition) &&
			bytes.Equal(x.op.Config, y.op.Config)
	})
}

// published is what clients see of a tool, for comparison.
func published(op *opsfile.Operation) []byte {
	b, _ := json.Marshal(struct {
		Name, Title, Description string
		In, Out                  json.RawMessage
		Annotations              *opsfile.Annotations
		Mode                     opsfile.Mode
		Meta                     map[string]any
		Config                   json.RawMessage
	}{op.Name, op.Title, op.Description, op.InputSchema, op.OutputSchema, op.Annotations, op.Mode, op.ToolMeta(), op.Config})
	return b
}

// watchState is the host's watch of its adapters (Watch).
type watchState struct {
	mu     sync.Mutex
	cancel context.CancelFunc
}

// Watch listens to the adapters of the host's expanded entries that
// watch their expansions (Capabilities.Watch) and expands an entry again
// when its adapter says it changed (see Reexpand); changed is called after
// each re-expansion that changed the tools served. A failed re-expansion
// is logged and changes nothing. When an adapter restarts, its entries
// are expanded again (the upstream may have changed meanwhile, and a new
// process knows of no entry until it expands it). Entries that could not
// load are loaded again with backoff (load.go), changed called after each
// that loads, and crank_entries_failed reports them. The watch runs until
// Unwatch or ctx ends; a second Watch replaces the first.
func (h *Host) Watch(ctx context.Context, changed func()) {
	ctx, cancel := context.WithCancel(ctx)
	h.watch.mu.Lock()
	if h.watch.cancel != nil {
		h.watch.cancel()
	}
	h.watch.cancel = cancel
	h.watch.mu.Unlock()
	h.retryFailed(ctx, changed) // load.go
	unwatch := telemetry.WatchLoadFailures(h)
	context.AfterFunc(ctx, unwatch)
	var sups []*Supervisor
	for _, et := range h.entries {
		d := et.sup.Description()
		if et.expanded && et.entry.Family == nil && d != nil && d.Capabilities.Watch && !slices.Contains(sups, et.sup) {
			sups = append(sups, et.sup)
		}
	}
	for _, sup := range sups {
		go h.watchAdapter(ctx, sup, changed)
	}
}

// Unwatch ends the watch of Watch.
func (h *Host) Unwatch() {
	h.watch.mu.Lock()
	defer h.watch.mu.Unlock()
	if h.watch.cancel != nil {
		h.watch.cancel()
		h.watch.cancel = nil
	}
}

// Backoff of a watch that could not be opened or ended.
const (
	watchRetry    = time.Second
	watchMaxRetry = 30 * time.Second
)

// watchAdapter watches one adapter until ctx ends.
func (h *Host) watchAdapter(ctx context.Context, sup *Supervisor, changed func()) {
	log := h.log.With(zap.String("adapter", sup.Spec().Name))
	entries := func() []string {
		var out []string
		for n, et := range h.entries {
			if et.sup == sup && et.expanded && et.entry.Family == nil {
				out = append(out, n)
			}
		}
		return out
	}
	reexpand := func(names []string) {
		for _, n := range names {
			if et := h.entries[n]; et == nil || et.sup != sup || et.entry.Family != nil {
				continue // not this host's, or a family's (its tools change at the next load)
			}
			ok, err := h.Reexpand(ctx, n)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("an entry could not be expanded again: it keeps its tools", zap.String("operation", n), zap.Error(err))
			case ok:
				log.Info("an entry's tools changed", zap.String("operation", n))
				changed()
			}
		}
	}
	var pid int
	retry := watchRetry
	for ctx.Err() == nil {
		c, err := sup.Client(ctx)
		if err == nil {
			if d := sup.Description(); d == nil || !d.Capabilities.Watch {
				return
			}
			if p := sup.PID(); pid != 0 && p != pid {
				reexpand(entries()) // a new adapter process
			}
			pid = sup.PID()
			opened := time.Now()
			err = c.WatchOperations(ctx, "crank", reexpand)
			if client.CodeOf(err) == client.Unimplemented {
				return
			}
			if time.Since(opened) > watchMaxRetry {
				retry = watchRetry
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Debug("watch of the adapter ended; opening it again", zap.Duration("in", retry), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(retry*2, watchMaxRetry)
	}
}
