package host

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/internal/telemetry"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// Loading entries, one at a time.
//
// A load binds each operations-file entry to its adapter. What is wrong
// with an entry as written (an adapter it may not use, a mode its adapter
// does not serve, the adapter's own checks of its config, a tool name two
// entries publish) fails the load. What keeps an entry from loading now —
// its adapter does not start, or its expansion fails: a document that
// cannot be read or parsed, a reflection or introspection server that
// cannot be used, an expansion over the adapter protocol's message limit —
// is its load error: under LoadRetry (what a gateway serves with) the
// other entries serve, the entry is reported (the log, FailedEntries, a
// metric) and loaded again with backoff while the host is watched (Watch),
// its tools published when a load works; under LoadFail (and Check) it
// fails the load like any problem.

// LoadPolicy is what a load does with an entry that cannot load.
type LoadPolicy string

// Load policies: the values of on_load_error (LoadConfig).
const (
	// LoadFail fails the whole load (all or nothing): the zero value.
	LoadFail LoadPolicy = "fail"
	// LoadRetry serves the other entries and loads the entry again with
	// backoff.
	LoadRetry LoadPolicy = "retry"
)

// LoadConfig is how an endpoint loads its entries, declared once: its
// json tags name the JSON config's fields and the Caddyfile's
// subdirectives, its jsonschema tags document them, its enum tags list
// their values (host/configblock).
type LoadConfig struct {
	OnLoadError string `json:"on_load_error,omitempty" jsonschema:"What the endpoint does with an entry that cannot load (its adapter does not start; its expansion fails: a document that cannot be read or parsed, a reflection or introspection server that cannot be used, an expansion over the adapter message limit): retry (the default) serves the other entries, reports it (log, /crank/tools, the console, crank_entries_failed) and loads it again with backoff; fail fails the config's load, all or nothing." enum:"retry,fail"`
}

// Policy is the load policy the config says (LoadRetry when it says none).
func (c LoadConfig) Policy() LoadPolicy {
	if c.OnLoadError == "" {
		return LoadRetry
	}
	return LoadPolicy(c.OnLoadError)
}

// Backoff of the loads of an entry that failed to load.
const (
	loadRetry    = time.Second
	loadMaxRetry = 2 * time.Minute
)

// EntryFailure is an entry that could not load: it serves no tools until
// a load of it works.
type EntryFailure struct {
	// Entry is the entry's name, File where it is written (a file, or
	// "catalog <name>"), Adapter its adapter.
	Entry   string `json:"entry"`
	File    string `json:"file,omitempty"`
	Adapter string `json:"adapter"`
	// Error says why, with the field of each problem (redacted).
	Error string `json:"error"`
	// Since is when its first load failed, Attempts how many loads
	// failed, NextAttempt when the next one runs (zero while the host is
	// not watched: it serves no endpoint).
	Since       time.Time `json:"since"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// failures is a host's entries that could not load.
type failures struct {
	mu   sync.Mutex
	byOp map[string]*EntryFailure
}

// FailedEntries lists the entries that could not load (LoadRetry), by
// name; none once each has loaded.
func (h *Host) FailedEntries() []EntryFailure {
	h.failed.mu.Lock()
	defer h.failed.mu.Unlock()
	out := make([]EntryFailure, 0, len(h.failed.byOp))
	for _, n := range slices.Sorted(maps.Keys(h.failed.byOp)) {
		out = append(out, *h.failed.byOp[n])
	}
	return out
}

// FailedEntryNames names the entries that could not load
// (telemetry.LoadFailures).
func (h *Host) FailedEntryNames() []string {
	h.failed.mu.Lock()
	defer h.failed.mu.Unlock()
	return slices.Sorted(maps.Keys(h.failed.byOp))
}

// recordFailure notes a failed load of op.
func (h *Host) recordFailure(op *opsfile.Operation, probs opsfile.Problems) *EntryFailure {
	telemetry.EntryLoadFailed(op.Name)
	h.failed.mu.Lock()
	defer h.failed.mu.Unlock()
	if h.failed.byOp == nil {
		h.failed.byOp = map[string]*EntryFailure{}
	}
	f := h.failed.byOp[op.Name]
	if f == nil {
		f = &EntryFailure{Entry: op.Name, File: op.File, Adapter: op.Adapter, Since: time.Now()}
		h.failed.byOp[op.Name] = f
	}
	msgs := make([]string, len(probs))
	for i, p := range probs {
		p.File, p.Line = "", 0
		if p.Operation == op.Name { // the entry is named apart
			p.Operation, p.Pointer = "", within(p.Pointer)
		}
		msgs[i] = p.Error()
	}
	f.Error = strings.Join(msgs, "; ")
	f.Attempts++
	f.NextAttempt = time.Time{}
	cp := *f
	return &cp
}

// within is the part of an entry's problem pointer within the entry.
func within(ptr string) string {
	_, w := opsfile.EntryOf(ptr)
	return w
}

// entryLoad is what loading one entry gave: its tools (a session's or
// job's operation stands for its family's tools), the session and
// async_job operations among them, what it publishes; or the problems of
// the entry as written (config) and why it could not load now (load).
type entryLoad struct {
	et       *entryTools
	tools    []*boundOp
	families []*boundOp
	pubs     []*Publication
	config   opsfile.Problems
	load     opsfile.Problems
}

// problem is a problem of op, redacted, placed in the host's file when
// op names none.
func (h *Host) problem(op *opsfile.Operation, ptr, reason string) opsfile.Problem {
	p := op.Problem(ptr, h.redact.String(reason))
	if p.File == "" {
		p.File = h.file.Source
	}
	return p
}

// loadEntry binds one entry to its adapter: it starts the adapter, has it
// check the entry's config and expand it into the tools it stands for.
func (h *Host) loadEntry(ctx context.Context, op *opsfile.Operation, adapter func(string) (*Supervisor, error)) *entryLoad {
	res := &entryLoad{}
	config := func(ptr, reason string) { res.config = append(res.config, h.problem(op, ptr, reason)) }
	load := func(x *opsfile.Operation, ptr, reason string) { res.load = append(res.load, h.problem(x, ptr, reason)) }
	sup, err := adapter(op.Adapter)
	if err != nil {
		config("/adapter", err.Error())
		return res
	}
	res.et = &entryTools{entry: op, sup: sup}
	desc, err := sup.Start(ctx)
	if err != nil {
		load(op, "/adapter", err.Error())
		return res
	}
	if op.CheckReach(desc.ConfigSchema, config) { // a catalog's entry
		return res
	}
	if op.Egress() != nil && !desc.Capabilities.Egress {
		config("/adapter", fmt.Sprintf("adapter %q does not hold its connections to a catalog's upstreams where it dials them (sdk.Description.Egress), so catalog entries cannot use it: use it from an operations file", op.Adapter))
		return res
	}
	b := h.bind(op, sup)
	if !desc.Serves(b.call.Mode) {
		config("/mode", fmt.Sprintf("adapter %q does not serve mode %q", op.Adapter, op.Mode))
		return res
	}
	if op.Execution != nil && op.Execution.TransportBehavior == window.ServerStream && !desc.Capabilities.Stream {
		config("/transport_behavior", fmt.Sprintf("adapter %q cannot stream: use request_response to poll it", op.Adapter))
		return res
	}
	c, err := sup.Client(ctx)
	if err != nil {
		load(op, "/adapter", err.Error())
		return res
	}
	if desc.Capabilities.Validate {
		diags, err := c.Validate(ctx, &b.call)
		if err != nil && client.CodeOf(err) != client.Unimplemented {
			load(op, "/config", "adapter could not validate it: "+err.Error())
			return res
		}
		if h.report(op, diags, func(_ *opsfile.Operation, ptr, reason string) { config(ptr, reason) }) {
			return res
		}
	}
	bound := []*boundOp{b}
	publishes := desc.Capabilities.Resources || desc.Capabilities.Prompts
	res.et.expanded, res.et.publishes = desc.Capabilities.Expand, publishes
	if desc.Capabilities.Expand {
		tools, pub, diags, err := expandEntry(ctx, c, &b.call, publishes)
		switch {
		case client.CodeOf(err) == client.Unimplemented:
		case err != nil:
			load(op, "/config", expandFailure(err))
			return res
		default:
			if h.report(op, diags, load) {
				return res
			}
			if res.pubs, err = h.publications(op, sup, pub); err != nil { // published.go
				load(op, "/config", err.Error())
				return res
			}
			if bound, err = h.expand(op, sup, tools, len(res.pubs) > 0); err != nil {
				load(op, "/config", err.Error())
				return res
			}
		}
	}
	for _, x := range bound {
		if x.Mode == opsfile.ModeWindow {
			op, err := prepareWindow(x.Operation)
			if err != nil {
				load(x.Operation, "/input_schema", err.Error())
				continue
			}
			x.Operation = op
		}
		if x.Family == nil {
			res.tools = append(res.tools, x)
			continue
		}
		if x.Description == "" {
			load(x.Operation, "/description", "is required (clients show it to the model)")
			continue
		}
		fam, err := familyTools(x)
		if err != nil {
			load(x.Operation, "/family", err.Error())
			continue
		}
		res.tools = append(res.tools, fam...)
		res.families = append(res.families, x)
	}
	return res
}

// expandFailure says why an expansion failed: for one over the adapter
// protocol's message limit (gRPC's ResourceExhausted), that and what to do.
func expandFailure(err error) string {
	if msg := err.Error(); strings.Contains(msg, "ResourceExhausted") {
		return "adapter could not expand it: the expansion is over the adapter protocol's message limit (" + msg +
			"): serve part of it (include or exclude what the adapter imports, or split it into several entries)"
	}
	return "adapter could not expand it: " + err.Error()
}

// add adds an entry's tools, publications and families to the table,
// reporting a tool or publication another entry has already.
func (t *toolTable) add(h *Host, res *entryLoad) opsfile.Problems {
	var probs opsfile.Problems
	op := res.et.entry
	if err := t.addPublications(res.pubs); err != nil {
		probs = append(probs, h.problem(op, "/config", err.Error()))
	}
	for _, x := range res.tools {
		switch {
		case x.Description == "":
			probs = append(probs, h.problem(x.Operation, "/description", "is required (clients show it to the model)"))
		case t.ops[x.Name] != nil:
			probs = append(probs, h.problem(x.Operation, "/name", "duplicate tool name"+sameName(t.ops[x.Name].Operation, x.Operation)))
		default:
			t.ops[x.Name] = x
			t.list = append(t.list, x.Operation)
			res.et.tools = append(res.et.tools, x.Name)
		}
	}
	if t.families == nil {
		t.families = map[string]*boundOp{}
	}
	for _, x := range res.families {
		t.families[x.Name] = x
	}
	return probs
}

// clone is a copy of the table to change.
func (t *toolTable) clone() *toolTable {
	c := &toolTable{ops: maps.Clone(t.ops), list: slices.Clone(t.list), pubs: slices.Clone(t.pubs),
		pubIndex: maps.Clone(t.pubIndex), families: maps.Clone(t.families)}
	if c.ops == nil {
		c.ops = map[string]*boundOp{}
	}
	return c
}

// failEntry notes an entry that could not load at the host's load and
// logs it.
func (h *Host) failEntry(res *entryLoad) {
	op := res.et.entry
	res.et.failed = true
	h.entries[op.Name] = res.et
	f := h.recordFailure(op, res.load)
	h.log.Error("an entry could not load: the endpoint serves the others and loads it again with backoff (on_load_error fail fails the load instead)",
		zap.String("file", op.File), zap.String("operation", op.Name), zap.String("adapter", op.Adapter), zap.String("error", f.Error))
}

// retryFailed loads the entries that could not load again until each
// loads or ctx ends, with backoff; changed is called after each that
// loaded.
func (h *Host) retryFailed(ctx context.Context, changed func()) {
	for _, name := range h.FailedEntryNames() {
		go h.retryEntry(ctx, name, changed)
	}
}

func (h *Host) retryEntry(ctx context.Context, name string, changed func()) {
	wait := loadRetry
	for {
		h.failed.mu.Lock()
		f := h.failed.byOp[name]
		if f == nil {
			h.failed.mu.Unlock()
			return // loaded (by another watch of the host)
		}
		f.NextAttempt = time.Now().Add(wait)
		h.failed.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		loaded, err := h.loadAgain(ctx, name)
		if ctx.Err() != nil {
			return
		}
		if loaded {
			h.log.Info("an entry that could not load has loaded: its tools are served", zap.String("operation", name))
			changed()
			return
		}
		if err != nil {
			f := h.failedEntry(name)
			h.log.Warn("an entry still cannot load; it is loaded again with backoff", zap.String("operation", name),
				zap.Int("attempts", f.Attempts), zap.Duration("next_in", min(wait*2, loadMaxRetry)), zap.String("error", f.Error))
		}
		wait = min(wait*2, loadMaxRetry)
	}
}

// failedEntry is the failure of the entry name (zero when it loaded).
func (h *Host) failedEntry(name string) EntryFailure {
	h.failed.mu.Lock()
	defer h.failed.mu.Unlock()
	if f := h.failed.byOp[name]; f != nil {
		return *f
	}
	return EntryFailure{}
}

// loadAgain loads an entry that could not load; loaded says whether its
// tools are served now. A problem keeps it failed (recorded) and is
// returned.
func (h *Host) loadAgain(ctx context.Context, name string) (loaded bool, err error) {
	h.reexpand.Lock()
	defer h.reexpand.Unlock()
	et := h.entries[name]
	if et == nil || !et.failed {
		return false, nil
	}
	res := h.loadEntry(ctx, et.entry, func(string) (*Supervisor, error) { return et.sup, nil })
	probs := append(res.config, res.load...)
	var next *toolTable
	if len(probs) == 0 {
		next = h.tab.Load().clone()
		probs = next.add(h, res)
	}
	if len(probs) == 0 {
		probs = h.checkFamilies(next, res.families)
	}
	if len(probs) > 0 {
		h.recordFailure(et.entry, probs)
		return false, probs
	}
	h.tab.Store(next)
	et.tools, et.expanded, et.publishes, et.failed = res.et.tools, res.et.expanded, res.et.publishes, false
	h.failed.mu.Lock()
	delete(h.failed.byOp, name)
	h.failed.mu.Unlock()
	return true, nil
}

// loadPolicy is the policy the host loads with: a Check fails on every
// problem.
func (o Options) loadPolicy() LoadPolicy {
	if o.OnLoadError == "" || o.check {
		return LoadFail
	}
	return o.OnLoadError
}

// Check runs a load of the file as New does, without serving it: every
// adapter started, every entry checked and expanded (documents read,
// schemas parsed, reflection and introspection tried); every problem, a
// load error included, is returned (Problems). It needs no store: a
// session or job entry is checked without one. The adapters are the
// caller's (opts.Adapter), and the caller stops them. The host returned
// is for checks of what it would serve (an endpoint's view), never to
// serve.
func Check(ctx context.Context, opts Options) (*Host, error) {
	opts.check = true
	return New(ctx, opts)
}
