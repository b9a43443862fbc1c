package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
// variant's calls per second.
func interleavedRate(b *testing.B, vs []benchVariant, n, callers int) []float64 {
	took := make([]time.Duration, len(vs))
	calls := make([]int, len(vs))
	for done := 0; done < n; done += benchBlock * callers {
		for i, v := range vs {
			todo := int64(min(benchBlock*callers, n-done))
			var left atomic.Int64
			left.Store(todo)
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
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
	return rate
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

// cpuTime is the CPU time the processes have used so far, in nanoseconds
// from the scheduler's accounting of each of their threads (Linux:
// /proc/<pid>/task/*/schedstat), or else in clock ticks of 10ms
// (/proc/<pid>/stat, which also counts threads that ended); 0 elsewhere.
func cpuTime(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		if d, ok := schedCPU(pid); ok {
			total += d
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// The fields after the command name, which is in parentheses.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			return 0
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}

// serverCPU is the CPU time the server processes of a benchmark used
// since it was started: the bare go-sdk server process, and Crank's
// gateway with its adapter processes.
type serverCPU struct {
	bare, gateway          int
	adapters               []int
	bare0, gateway0, adap0 time.Duration
}

func startServerCPU(g *gateway, barePID int) *serverCPU {
	m := &serverCPU{bare: barePID, gateway: g.cmd.Process.Pid}
	for _, a := range g.adapters() {
		m.adapters = append(m.adapters, a.PID)
	}
	m.bare0, m.gateway0, m.adap0 = cpuTime(m.bare), cpuTime(m.gateway), cpuTime(m.adapters...)
	return m
}

// report reports each process's CPU time per unit (b.N units since the
// start) and Crank's over the bare server's as the metric ratio.
func (m *serverCPU) report(b *testing.B, unit, ratio string) {
	bare, gw, ad := cpuTime(m.bare)-m.bare0, cpuTime(m.gateway)-m.gateway0, cpuTime(m.adapters...)-m.adap0
	if bare <= 0 {
		return
	}
	b.ReportMetric(micros(bare)/float64(b.N), "bare-mcp-process-cpu-µs/"+unit)
	b.ReportMetric(micros(gw)/float64(b.N), "crank-gateway-cpu-µs/"+unit)
	b.ReportMetric(micros(ad)/float64(b.N), "crank-adapter-cpu-µs/"+unit)
	b.ReportMetric(float64(gw+ad)/float64(bare), ratio)
}

// schedCPU sums the time on CPU of the process's threads. A Go process
// keeps its threads, so what ended threads used is negligible.
func schedCPU(pid int) (time.Duration, bool) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ns)
	}
	return total, true
}
