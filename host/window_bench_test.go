package host_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sse "github.com/tmaxmax/go-sse"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
)

// maxWindowIterations bounds the windows one benchmark run may be asked
// for.
const maxWindowIterations = 50

// benchStream is a loopback SSE server that replays a pre-rendered stream
// of n events of the given data size, then ends (204 on a reconnect).
func benchStream(b *testing.B, n, size int) *httptest.Server {
	var buf bytes.Buffer
	pad := strings.Repeat("x", max(size-40, 0))
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&buf, "id: %d\ndata: {\"n\":%d,\"level\":\"info\",\"msg\":\"%s\"}\n\n", i, i, pad)
	}
	body := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Last-Event-ID") != "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// heapPeak samples the live heap until stopped and returns its peak growth
// over the heap at the start.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load() - min(base, peak.Load())
	}
}

// cpuTime is the CPU time of this process plus the adapter process.
func cpuTime(pid int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 13 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				d += time.Duration(u+s) * time.Second / 100 // USER_HZ
			}
		}
	}
	return d
}

// BenchmarkWindow measures a window end to end: a loopback SSE upstream,
// the REST adapter process reading it with go-sse, the gRPC stream and the
// host's window engine (safety layer, raw_items aggregation). It reports
// events/s, events per CPU-second (host and adapter processes), the peak
// growth of the host's heap during one window run with an eager GC (what
// the window holds, compared with max_bytes), and the ratio of its events/s
// to BenchmarkSSEBaseline's (parsing the same stream directly) measured in
// the same run.
//
// One iteration is a whole window: run it as
//
//	go test -run '^$' -bench BenchmarkWindow -benchtime 5x ./host/
//
// (it skips itself under a larger fixed -benchtime such as make bench's).
func BenchmarkWindow(b *testing.B) {
	for _, c := range []struct {
		name            string
		events, size    int
		maxBytes, items int
	}{
		// Below every limit: all 100k events arrive (zero loss).
		{"100k_small", 100_000, 64, 32 << 20, 200_000},
		// Cut by max_bytes after about 60 of 400 events.
		{"large_64KiB", 400, 64 << 10, 4 << 20, 100_000},
	} {
		b.Run(c.name, func(b *testing.B) {
			if b.N > maxWindowIterations {
				b.Skipf("one iteration is a whole window (%d events): run with -benchtime 5x, not %dx", c.events, b.N)
			}
			srv := benchStream(b, c.events, c.size)
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			ops := fmt.Sprintf(`
adapters:
  rest: {command: %s, env: {CRANK_HOST_TEST_ADAPTER: rest}}
operations:
  - name: bench
    description: bench
    adapter: rest
    mode: window
    limits: {window_duration_ms: 120000, max_items: %d, max_bytes: %d}
    safety: {max_field_length: %d}
    config: {method: GET, url: "%s/", stream: {max_event_bytes: 1048576, reconnect: false}}
`, exe, c.items, c.maxBytes, 1<<20, srv.URL)
			cat, err := opsfile.Parse("ops.yaml", []byte(ops), opsfile.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			var sup *host.Supervisor
			h, err := host.New(context.Background(), host.Options{File: cat, Logger: zap.NewNop(), Adapter: func(name string) (*host.Supervisor, error) {
				spec, _ := host.AdapterSpecOf(cat, name, nil)
				sup = host.NewSupervisor(spec, host.SupervisorOptions{HealthInterval: -1})
				b.Cleanup(func() { sup.Close() })
				return sup, nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			baseline := sseBaseline(b, srv.URL, c.events)
			var received int
			var elapsed, cpu time.Duration
			var peak uint64
			runtime.GC()
			b.ResetTimer()
			for range b.N {
				c0, t0 := cpuTime(sup.PID()), time.Now()
				res, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool("bench"), Arguments: json.RawMessage(`{}`)})
				elapsed += time.Since(t0)
				cpu += cpuTime(sup.PID()) - c0
				if err != nil || res.IsError {
					b.Fatal(err, res.Text[:min(len(res.Text), 300)])
				}
				var w struct {
					Stats     struct{ Received, Counted int } `json:"stats"`
					EndReason string                          `json:"end_reason"`
				}
				_ = json.Unmarshal(res.Structured, &w)
				received += w.Stats.Received
				if c.events*(c.size+40) < c.maxBytes && (w.Stats.Counted != c.events || w.EndReason != "upstream_end") {
					b.Fatalf("lost events below the limits: counted %d of %d, end %s", w.Stats.Counted, c.events, w.EndReason)
				}
			}
			b.StopTimer()
			// Memory: one more window with an eager GC, so the heap's
			// growth shows what the window holds rather than garbage
			// waiting for a collection.
			old := debug.SetGCPercent(5)
			runtime.GC()
			stop := heapPeak()
			if _, err := h.Call(context.Background(), host.CallRequest{Tool: h.Tool("bench"), Arguments: json.RawMessage(`{}`)}); err != nil {
				b.Fatal(err)
			}
			peak = stop()
			debug.SetGCPercent(old)
			rate := float64(received) / elapsed.Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(received)/cpu.Seconds(), "events/cpu-s")
			b.ReportMetric(float64(peak)/(1<<20), "heap-growth-MiB")
			b.ReportMetric(float64(c.maxBytes)/(1<<20), "max_bytes-MiB")
			b.ReportMetric(rate/baseline, "x-baseline")
		})
	}
}

// sseBaseline parses the stream directly with go-sse (no gateway) and
// returns its events/s: the ceiling a window is compared with.
func sseBaseline(b *testing.B, url string, want int) float64 {
	best := 0.0
	for range 3 {
		t0 := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for ev, err := range sse.Read(bufio.NewReader(resp.Body), &sse.ReadConfig{MaxEventSize: 1 << 20}) {
			if err != nil {
				b.Fatal(err)
			}
			if json.Valid([]byte(ev.Data)) {
				n++
			}
		}
		resp.Body.Close()
		if n != want {
			b.Fatalf("baseline read %d events, want %d", n, want)
		}
		best = max(best, float64(n)/time.Since(t0).Seconds())
	}
	return best
}
