package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/benchproc"
)

// benchBeforeEnv names another crank executable, typically built from the
// commit before a change, and benchBeforeEnvEnv the environment of a
// gateway to compare with (NAME=value, space-separated: GOGC=200), of that
// executable or of this one: with either, BenchmarkUnaryREST and
// BenchmarkStreamingTool add that gateway as the variant "crank-before",
// taking turns with the others, and report the ratios of Crank to it
// (measured under the same load) and both gateways' peak RSS.
const (
	benchBeforeEnv    = "CRANK_BENCH_BEFORE"
	benchBeforeEnvEnv = "CRANK_BENCH_BEFORE_ENV"
)

// startBeforeGateway starts the gateway to compare with, as the
// environment asks; nil when it does not.
func startBeforeGateway(b *testing.B, opts gatewayOptions) *gateway {
	opts.Binary = os.Getenv(benchBeforeEnv)
	opts.Env = strings.Fields(os.Getenv(benchBeforeEnvEnv))
	if opts.Binary == "" && len(opts.Env) == 0 {
		return nil
	}
	return startGateway(b, opts)
}

// reportPeakRSS reports the peak resident memory of the two gateway
// processes (Linux: VmHWM), for a setting traded against memory.
func reportPeakRSS(b *testing.B, crank, before *gateway) {
	for _, g := range []struct {
		name string
		g    *gateway
	}{{"crank", crank}, {"before", before}} {
		if kb := procStatus(g.g.cmd.Process.Pid, "VmHWM"); kb >= 0 { // not Linux: none
			b.ReportMetric(float64(kb)/1024, g.name+"-peak-rss-MiB")
		}
	}
}

// A benchmark variant: one way to make the same call (directly, through
// a bare go-sdk server, through Crank, ...).
type benchVariant struct {
	name string
	call func() error
	// meter, if set, reads what the variant's server processes use:
	// interleavedRate reports it per call.
	meter *serverMeter
}

// variantAt is the index in vs of the variant named name.
func variantAt(vs []benchVariant, name string) int {
	i := slices.IndexFunc(vs, func(v benchVariant) bool { return v.name == name })
	if i < 0 {
		panic("no benchmark variant " + name)
	}
	return i
}

// The variants of a benchmark take turns in blocks of calls within one
// run, so that a loaded machine (other builds, other benchmarks) weighs on
// each alike and their ratios mean something; measured one after the
// other, a load spike lands on one variant only.
const benchBlock = 50

// interleavedLatency makes n sequential calls of each variant, in turns of
// benchBlock, and returns each variant's latencies, sorted.
func interleavedLatency(b *testing.B, vs []benchVariant, n int) [][]time.Duration {
	lat := make([][]time.Duration, len(vs))
	for i := range vs {
		lat[i] = make([]time.Duration, 0, n)
	}
	for done := 0; done < n; done += benchBlock {
		for i, v := range vs {
			for range min(benchBlock, n-done) {
				start := time.Now()
				if err := v.call(); err != nil {
					b.Fatalf("%s: %v", v.name, err)
				}
				lat[i] = append(lat[i], time.Since(start))
			}
		}
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	return lat
}

// interleavedRate makes n calls of each variant from callers concurrent
// callers, in turns of benchBlock calls per caller, and returns each
// variant's calls per second and what its server processes used during
// its turns (for a variant with a meter: the turns of others, on the same
// server or not, are not counted).
func interleavedRate(b *testing.B, vs []benchVariant, n, callers int) ([]float64, []serverUse) {
	took := make([]time.Duration, len(vs))
	calls := make([]int, len(vs))
	use := make([]serverUse, len(vs))
	for done := 0; done < n; done += benchBlock * callers {
		for i, v := range vs {
			todo := int64(min(benchBlock*callers, n-done))
			var left atomic.Int64
			left.Store(todo)
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			var use0 serverUse
			if v.meter != nil {
				use0 = v.meter.read(b)
			}
			start := time.Now()
			for range callers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := v.call(); err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
					}
				})
			}
			wg.Wait()
			took[i] += time.Since(start)
			if v.meter != nil {
				use[i] = use[i].plus(v.meter.read(b).minus(use0))
			}
			calls[i] += int(todo)
			if err := failed.Load(); err != nil {
				b.Fatalf("%s: %v", v.name, *err)
			}
		}
	}
	rate := make([]float64, len(vs))
	for i := range vs {
		rate[i] = float64(calls[i]) / took[i].Seconds()
	}
	return rate, use
}

// reportedLatency runs interleavedLatency and reports each variant's p50
// and p99.
func reportedLatency(b *testing.B, vs []benchVariant) [][]time.Duration {
	lat := interleavedLatency(b, vs, b.N)
	for i, v := range vs {
		b.ReportMetric(micros(pct(lat[i], 50)), v.name+"-p50-µs")
		b.ReportMetric(micros(pct(lat[i], 99)), v.name+"-p99-µs")
	}
	return lat
}

// reportedRate runs interleavedRate with 8 callers and reports each
// variant's throughput and, where metered, its servers' use per call.
func reportedRate(b *testing.B, vs []benchVariant) ([]float64, []serverUse) {
	rate, use := interleavedRate(b, vs, b.N, 8)
	for i, v := range vs {
		b.ReportMetric(rate[i], v.name+"-calls/s")
		if v.meter != nil {
			use[i].report(b, v.name, "call", b.N, len(v.meter.adapters) > 0)
		}
	}
	return rate, use
}

// warmUp makes calls of each variant before measuring: connections, the
// adapter process, the sessions.
func warmUp(b *testing.B, vs []benchVariant, calls int) {
	for _, v := range vs {
		for range calls {
			if err := v.call(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
	}
}

// pct is the p-th percentile (0..100) of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// micros is d in microseconds, for b.ReportMetric.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cpuTime is the CPU time the processes have used so far (benchproc.CPU).
func cpuTime(pids ...int) time.Duration { return benchproc.CPU(pids...) }

// A serverMeter reads what the processes serving a benchmark variant
// have used so far: the server process's CPU time (Crank's gateway with
// its embedded etcd, or a bare go-sdk server), its adapter processes' and
// the server's allocation, from its expvar endpoint (/debug/vars: Caddy's
// admin endpoint serves it, and so does bareMCP's process).
type serverMeter struct {
	server   int
	adapters []int
	vars     string
	// gateway, if set, is the gateway whose adapter processes the first
	// read finds (they start with it, or at its first call).
	gateway *gateway
}

// serverUse is what a variant's server processes used: totals, or their
// growth over an interval.
type serverUse struct {
	cpu, adapterCPU    time.Duration
	allocBytes, allocs uint64 // the server process's, not its adapters'
}

func (u serverUse) plus(v serverUse) serverUse {
	return serverUse{u.cpu + v.cpu, u.adapterCPU + v.adapterCPU, u.allocBytes + v.allocBytes, u.allocs + v.allocs}
}

func (u serverUse) minus(v serverUse) serverUse {
	return serverUse{u.cpu - v.cpu, u.adapterCPU - v.adapterCPU, u.allocBytes - v.allocBytes, u.allocs - v.allocs}
}

// meter reads what the gateway process and its adapter processes (those
// running at the first read) used.
func (g *gateway) meter() *serverMeter {
	return &serverMeter{server: g.cmd.Process.Pid, vars: g.AdminURL + "/debug/vars", gateway: g}
}

// read returns the processes' totals so far.
func (m *serverMeter) read(b *testing.B) serverUse {
	if m.gateway != nil && m.adapters == nil {
		for _, a := range m.gateway.adapters() {
			m.adapters = append(m.adapters, a.PID)
		}
	}
	u := serverUse{cpu: cpuTime(m.server), adapterCPU: cpuTime(m.adapters...)}
	resp, err := http.Get(m.vars)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var vars struct {
		Memstats struct{ TotalAlloc, Mallocs uint64 }
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		b.Fatalf("GET %s: %v", m.vars, err)
	}
	u.allocBytes, u.allocs = vars.Memstats.TotalAlloc, vars.Memstats.Mallocs
	return u
}

// report reports the use per unit (n units): the server's CPU time, its
// adapters' (if any) and the server's allocation in bytes and objects,
// as the metrics name-cpu-µs/unit, name-adapter-cpu-µs/unit,
// name-alloc-B/unit and name-allocs/unit.
func (u serverUse) report(b *testing.B, name, unit string, n int, adapters bool) {
	b.ReportMetric(micros(u.cpu)/float64(n), name+"-cpu-µs/"+unit)
	if adapters {
		b.ReportMetric(micros(u.adapterCPU)/float64(n), name+"-adapter-cpu-µs/"+unit)
	}
	b.ReportMetric(float64(u.allocBytes)/float64(n), name+"-alloc-B/"+unit)
	b.ReportMetric(float64(u.allocs)/float64(n), name+"-allocs/"+unit)
}
