package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// AdapterProcess is a supervised adapter process, as crank_adapter_up
// reports it.
type AdapterProcess interface {
	// AdapterName is the adapter's name in the operations files.
	AdapterName() string
	// Running reports whether its process runs now.
	Running() bool
}

// WatchAdapter makes crank_adapter_up report p until the returned
// function is called, and makes the adapter's counters exist (at 0) from
// now on, so that a dashboard or an alert sees 0 rather than nothing.
func WatchAdapter(p AdapterProcess) (unwatch func()) {
	name := p.AdapterName()
	for _, c := range []*prometheus.CounterVec{adapterStarts, adapterRestarts, adapterStartFailures, adapterCrashes, adapterPingFailures} {
		c.WithLabelValues(name)
	}
	adapterUp.mu.Lock()
	adapterUp.procs[p] = struct{}{}
	adapterUp.mu.Unlock()
	return func() {
		adapterUp.mu.Lock()
		delete(adapterUp.procs, p)
		adapterUp.mu.Unlock()
	}
}

// adapterUpCollector reports, at each scrape, how many processes of each
// supervised adapter run.
type adapterUpCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	procs map[AdapterProcess]struct{}
}

var adapterUp = &adapterUpCollector{
	desc: prometheus.NewDesc(ns+"_adapter_up", "Running processes of each supervised adapter (normally 1; 0 while it is down until the next call restarts it).",
		[]string{"adapter"}, nil),
	procs: map[AdapterProcess]struct{}{},
}

func (c *adapterUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *adapterUpCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	procs := make([]AdapterProcess, 0, len(c.procs))
	for p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	up := map[string]int{}
	for _, p := range procs {
		n := p.AdapterName()
		if p.Running() {
			up[n]++
		} else {
			up[n] += 0
		}
	}
	for name, n := range up {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), name)
	}
}

// LoadFailures is a host whose entries may have failed to load, as
// crank_entries_failed reports it.
type LoadFailures interface {
	// FailedEntryNames names the entries that could not load.
	FailedEntryNames() []string
}

// WatchLoadFailures makes crank_entries_failed report the failed entries
// of p until the returned function is called.
func WatchLoadFailures(p LoadFailures) (unwatch func()) {
	entriesFailed.mu.Lock()
	entriesFailed.srcs[p]++
	entriesFailed.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			entriesFailed.mu.Lock()
			defer entriesFailed.mu.Unlock()
			if entriesFailed.srcs[p]--; entriesFailed.srcs[p] <= 0 {
				delete(entriesFailed.srcs, p)
			}
		})
	}
}

// EntryLoadFailed counts a failed load of the entry.
func EntryLoadFailed(entry string) {
	if metricsOff.Load() {
		return
	}
	entryLoadFailures.WithLabelValues(entry).Inc()
}

// entriesFailedCollector reports, at each scrape, the entries of the
// watched hosts that could not load.
type entriesFailedCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	srcs map[LoadFailures]int
}

var entriesFailed = &entriesFailedCollector{
	desc: prometheus.NewDesc(ns+"_entries_failed", "Operations-file and catalog entries that could not load and serve no tools (on_load_error retry loads them again with backoff), by entry; 0 for none.",
		[]string{"entry"}, nil),
	srcs: map[LoadFailures]int{},
}

func (c *entriesFailedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *entriesFailedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	srcs := make([]LoadFailures, 0, len(c.srcs))
	for p := range c.srcs {
		srcs = append(srcs, p)
	}
	c.mu.Unlock()
	n := map[string]int{}
	for _, p := range srcs {
		for _, e := range p.FailedEntryNames() {
			n[e]++
		}
	}
	for e, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), e)
	}
}
