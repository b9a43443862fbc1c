package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/internal/benchproc"
	"github.com/crankmcp/crank/store"
)

// Benchmarks of the session and async_job families, each against a
// baseline measured in the same run:
//
//	go test -run '^$' -bench 'BenchmarkStreamSessionPoll|BenchmarkJobStart' -benchtime 2000x ./host/
//	go test -run '^$' -bench BenchmarkStreamSessionMemory -benchtime 1x ./host/
//	CRANK_BENCH_SESSIONS=10000 go test -run '^$' -bench BenchmarkStreamSessionMemory -benchtime 1x -timeout 30m ./host/
//
// CRANK_BENCH_PROFILE=<dir> makes BenchmarkStreamSessionMemory record every
// allocation and write, while its sessions are live, a heap profile
// (<dir>/heap.prof: go tool pprof -sample_index inuse_space -top host.test
// <dir>/heap.prof) and the goroutines (<dir>/goroutines.txt).

// familyBenchOps are the operations the family benchmarks call: the family
// tests' (report is the async job) and a few of their own. QUIET is the
// quiet upstream's URL (BenchmarkStreamSessionMemory), UPSTREAM the fixture's.
const familyBenchOps = familyOps + `
  - name: feed
    description: Follow the endless feed (an event every 10ms) for up to an hour.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 600000, max_session_lifetime_ms: 3600000, max_items: 20}
    config: {method: GET, url: "UPSTREAM/endless"}
  - name: quiet
    description: Follow a feed that sends one event, then rarely.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 3600000, max_session_lifetime_ms: 3600000, max_items: 100}
    config: {method: GET, url: "QUIET/quiet"}
  - name: report_now
    description: Build a report and wait for it (the report job's request, unary).
    adapter: rest
    input_schema: {type: object, properties: {delay_ms: {type: integer}}}
    config: {method: GET, url: "UPSTREAM/report", query: [delay_ms]}
`

// benchScope is the workspace and agent every benchmark call runs as.
var benchScope = store.Scope{WorkspaceID: "ws", AgentID: "a1"}

// quietUpstreamEnv makes the test binary serve the quiet upstream instead
// of running tests (see init).
const quietUpstreamEnv = "CRANK_BENCH_QUIET_UPSTREAM"

// quietEvery is how often the quiet upstream sends an event after the
// first.
const quietEvery = 30 * time.Second

func init() {
	if os.Getenv(quietUpstreamEnv) != "" {
		serveQuietUpstream()
		os.Exit(0)
	}
	if url := os.Getenv(bareReaderEnv); url != "" {
		serveBareReader(url)
		os.Exit(0)
	}
}

// bareReaderEnv makes the test binary the baseline of the adapter's side
// of a live session (see serveBareReader) for the quiet upstream it names.
const bareReaderEnv = "CRANK_BENCH_BARE_READER"

// serveBareReader is the floor of holding a live SSE upstream in Go: for
// every number n read from stdin it opens n streams of url with a plain
// net/http client (a keep-alive pool as large as the REST adapter's),
// reads each in a goroutine of its own with a bufio.Scanner, and prints
// "ok" once every stream has delivered its first event. It ends when stdin
// closes.
func serveBareReader(url string) {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, err := strconv.Atoi(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var first sync.WaitGroup
		for range n {
			first.Add(1)
			go func() {
				resp, err := httpc.Get(url)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				sc := bufio.NewScanner(resp.Body)
				got := false
				for sc.Scan() {
					if !got && strings.HasPrefix(sc.Text(), "data:") {
						got = true
						first.Done()
					}
				}
			}()
		}
		first.Wait()
		fmt.Println("ok")
	}
}

// bareReader is a running serveBareReader process.
type bareReader struct {
	pid int
	in  io.Writer
	out *bufio.Reader
}

func startBareReader(b *testing.B, url string) *bareReader {
	pid, in, out := startSelf(b, bareReaderEnv+"="+url)
	return &bareReader{pid: pid, in: in, out: out}
}

// open opens n more streams and waits for their first events.
func (r *bareReader) open(b *testing.B, n int) {
	if _, err := fmt.Fprintln(r.in, n); err != nil {
		b.Fatal(err)
	}
	if line, err := r.out.ReadString('\n'); err != nil || line != "ok\n" {
		b.Fatalf("bare reader: %q %v", line, err)
	}
}

// serveQuietUpstream serves GET /quiet — an SSE stream with one event at
// once, then one every quietEvery — on a free loopback port, prints its URL
// and serves until its stdin closes (the benchmark ended or died).
func serveQuietUpstream() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /quiet", func(w http.ResponseWriter, r *http.Request) {
		f := startSSE(w)
		t := time.NewTicker(quietEvery)
		defer t.Stop()
		for i := 1; ; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"n\":%d,\"msg\":\"still here\"}\n\n", i, i)
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
		}
	})
	go func() { _ = http.Serve(l, mux) }()
	fmt.Printf("http://%s\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startQuietUpstream runs the quiet upstream in a process of its own, so
// that its connections do not count in this process's memory, and returns
// its URL.
func startQuietUpstream(b *testing.B) string {
	_, _, out := startSelf(b, quietUpstreamEnv+"=1")
	line, err := out.ReadString('\n')
	if err != nil {
		b.Fatalf("quiet upstream: %v", err)
	}
	return strings.TrimSpace(line)
}

// startSelf runs this test binary with env added (init then serves what
// env asks for instead of running tests) and returns its process id,
// stdin and stdout. Closing stdin ends it; the benchmark's end does.
func startSelf(b *testing.B, env string) (int, io.Writer, *bufio.Reader) {
	return benchproc.StartSelf(b, env)
}

// newFamilyBench is a family fixture serving familyBenchOps; quiet is the
// quiet upstream's URL, if any.
func newFamilyBench(b *testing.B, quiet string) *familyFixture {
	if quiet == "" {
		quiet = "UPSTREAM" // unused: any valid URL
	}
	f := newFamilyFixture(b, strings.ReplaceAll(familyBenchOps, "QUIET", quiet), host.Quotas{})
	// The report endpoint signals each start on a small channel: take them.
	done := make(chan struct{})
	b.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-f.up.reportStarted:
			case <-done:
				return
			}
		}
	}()
	return f
}

// benchCall calls a tool as benchScope and decodes its structured answer
// into out (when not nil).
func benchCall(ctx context.Context, h *host.Host, tool, args string, out any) error {
	res, err := h.Call(ctx, host.CallRequest{Tool: h.Tool(tool), Arguments: json.RawMessage(args),
		WorkspaceID: benchScope.WorkspaceID, AgentID: benchScope.AgentID})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", tool, res.Text)
	}
	if out != nil {
		return json.Unmarshal(res.Structured, out)
	}
	return nil
}

// spread runs op n times over the given number of workers, each taking the
// next call as it finishes one, and returns the wall time and each call's
// latency. op learns its worker (0 to workers-1) and call index.
func spread(n, workers int, op func(worker, i int) error) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				err := op(w, i)
				lat[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), lat, first
}

// percentile returns the p-th percentile (0-100) of d, sorting d.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*p/100)]
}

func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// startSessions starts n sessions of the given family over the given
// number of workers and returns their IDs.
func startSessions(b *testing.B, h *host.Host, family string, n, workers int) []string {
	ids := make([]string, n)
	_, _, err := spread(n, workers, func(_, i int) error {
		var s struct {
			SessionID string `json:"session_id"`
		}
		err := benchCall(context.Background(), h, family+"_start", `{}`, &s)
		ids[i] = s.SessionID
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// awaitItems waits until every session has stored at least one item: its
// reader is connected to the upstream and its writer has run.
func awaitItems(b *testing.B, st *store.Etcd, ids []string) {
	deadline := time.Now().Add(5 * time.Minute)
	_, _, err := spread(len(ids), 8, func(_, i int) error {
		for {
			ss, err := st.GetStreamSession(context.Background(), benchScope, ids[i])
			if err != nil {
				return err
			}
			if ss.BufferedItems > 0 || ss.LastSeq > 0 {
				return nil
			}
			if ss.Status != store.StreamSessionActive || time.Now().After(deadline) {
				return fmt.Errorf("session %s: no item stored (status %s, state %s)", ids[i], ss.Status, ss.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
}

// stopSessions stops sessions so that their readers do not outlive the
// benchmark.
func stopSessions(b *testing.B, h *host.Host, family string, ids []string) {
	_, _, err := spread(len(ids), 8, func(_, i int) error {
		return benchCall(context.Background(), h, family+"_stop", `{"session_id":"`+ids[i]+`"}`, nil)
	})
	if err != nil {
		b.Error(err)
	}
}

// BenchmarkStreamSessionPoll's shape: live sessions polled at once, items asked
// per poll (fewer than the upstream delivers between two polls, so every
// poll of either side gets as many), and alternating rounds.
const (
	pollSessions = 100
	pollItems    = 5
	pollRounds   = 8
)

// BenchmarkStreamSessionPoll polls pollSessions live sessions concurrently (one
// poller each, following its cursor) while their readers keep appending
// items from a loopback SSE upstream (an event every 10ms each, through the
// REST adapter process). It reports polls/s and p50/p99 of feed_poll
// through the host (schema check, store poll, answer, audit), and its
// throughput as a multiple of a baseline of raw store.PollStreamSession calls on
// the other half of those sessions (a poll consumes what it acknowledges) and
// the same embedded etcd, measured in the same run. b.N is the number of polls
// of each.
func BenchmarkStreamSessionPoll(b *testing.B) {
	f := newFamilyBench(b, "")
	ids := startSessions(b, f.h, "feed", pollSessions, 8)
	b.Cleanup(func() { stopSessions(b, f.h, "feed", ids) })
	awaitItems(b, f.st, ids)
	// Each side polls sessions of its own, half of them each: a poll
	// consumes what it acknowledges, and the two sides' cursors differ
	// (the store's are its raw positions, the host's are sealed, crank2:,
	// bound to the workspace, session and agent, and it takes no other).
	rawIDs, hostIDs := ids[:len(ids)/2], ids[len(ids)/2:]
	cursors := make([]string, len(hostIDs))
	rawCursors := make([]string, len(rawIDs))
	var items atomic.Int64
	ctx := context.Background()

	raw := func(w, _ int) error {
		res, err := f.st.PollStreamSession(ctx, benchScope, rawIDs[w], store.PollRequest{Cursor: rawCursors[w], MaxItems: pollItems})
		if err != nil {
			return err
		}
		rawCursors[w] = res.Cursor
		items.Add(int64(len(res.Items)))
		return nil
	}
	viaHost := func(w, _ int) error {
		var p struct {
			Cursor string            `json:"cursor"`
			Items  []json.RawMessage `json:"items"`
		}
		args := fmt.Sprintf(`{"session_id":%q,"cursor":%q,"max_items":%d}`, hostIDs[w], cursors[w], pollItems)
		if err := benchCall(ctx, f.h, "feed_poll", args, &p); err != nil {
			return err
		}
		cursors[w] = p.Cursor
		items.Add(int64(len(p.Items)))
		return nil
	}
	// Alternate rounds of each (ABBA), so that both see the same
	// conditions.
	var baseT, hostT time.Duration
	var baseLat, hostLat []time.Duration
	var baseItems, hostItems int64
	b.ResetTimer()
	for r := range pollRounds {
		n := b.N / pollRounds
		if r < b.N%pollRounds {
			n++
		}
		type side struct {
			poll  func(w, i int) error
			t     *time.Duration
			lat   *[]time.Duration
			items *int64
		}
		sides := []side{{raw, &baseT, &baseLat, &baseItems}, {viaHost, &hostT, &hostLat, &hostItems}}
		if r%2 == 1 {
			slices.Reverse(sides) // ABBA: whichever runs second has no edge
		}
		for _, side := range sides {
			t, lat, err := spread(n, len(hostIDs), side.poll)
			if err != nil {
				b.Fatal(err)
			}
			*side.t += t
			*side.lat = append(*side.lat, lat...)
			*side.items += items.Swap(0)
		}
	}
	b.StopTimer()
	base, rate := float64(b.N)/baseT.Seconds(), float64(b.N)/hostT.Seconds()
	b.Logf("%d sessions a side: store.PollStreamSession %.0f polls/s (p99 %s, %.1f items/poll); feed_poll %.0f polls/s (p99 %s, %.1f items/poll)",
		len(hostIDs), base, percentile(baseLat, 99), float64(baseItems)/float64(b.N), rate, percentile(hostLat, 99), float64(hostItems)/float64(b.N))
	b.ReportMetric(rate, "polls/s")
	b.ReportMetric(ms64(percentile(hostLat, 50)), "p50-ms")
	b.ReportMetric(ms64(percentile(hostLat, 99)), "p99-ms")
	b.ReportMetric(base, "base-polls/s")
	b.ReportMetric(ms64(percentile(baseLat, 99)), "base-p99-ms")
	b.ReportMetric(rate/base, "x-baseline")
}

// defaultMemorySessions is BenchmarkStreamSessionMemory's session count unless
// CRANK_BENCH_SESSIONS sets one.
const defaultMemorySessions = 1000

// goalSessions and goalBytes are the goal: 10k live sessions in
// 256 MiB for the gateway process.
const (
	goalSessions = 10_000
	goalBytes    = 256 << 20
)

// liveBytes is this process's live heap and goroutine stacks after a full
// collection.
func liveBytes() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// rssBytes is the resident set size of process pid (0: this process).
func rssBytes(pid int) uint64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// memorySample is what one measurement point holds.
type memorySample struct {
	live, stack, rss, adapterRSS uint64
	goroutines                   int
}

func sampleMemory(adapterPID int) memorySample {
	heap, stack := liveBytes()
	return memorySample{live: heap + stack, stack: stack, rss: rssBytes(0), adapterRSS: rssBytes(adapterPID), goroutines: runtime.NumGoroutine()}
}

func perItem(after, before uint64, n int) float64 {
	if after < before {
		return 0
	}
	return float64(after-before) / float64(n)
}

// memoryFigures are BenchmarkStreamSessionMemory's results.
type memoryFigures struct {
	sessions                                   int
	hostPer, stackPer, rssPer, storePer, adPer float64
	goroutinesPer, idleMiB, adIdleMiB          float64
	// barePer is the RSS per stream of serveBareReader: the floor of the
	// adapter's share.
	barePer float64
}

// memoryOnce measures once per process: a benchmark is invoked again with
// a larger b.N, and the measurement is a whole run, not an iteration.
var memoryOnce struct {
	sync.Mutex
	fig *memoryFigures
}

// BenchmarkStreamSessionMemory measures what a live session costs. It starts K
// sessions (CRANK_BENCH_SESSIONS, 1000 by default) of an upstream that
// sends one event and then one every 30s — served by a process of its own,
// so that only the gateway's side counts — and waits until each has stored
// its first item. It reports, per live session: the growth of this
// process's live heap plus stacks after a full GC (host, store client and
// the embedded etcd the gateway runs by default), of its RSS, and of the
// REST adapter process's RSS (each session holds a gRPC stream and an
// upstream connection there); the same live heap growth for a baseline of
// bare store sessions (create and one item — the store's share) and
// the ratio; and the gateway's projected live heap for 10k sessions
// against the 256 MiB goal. One measurement per run: use -benchtime 1x.
func BenchmarkStreamSessionMemory(b *testing.B) {
	memoryOnce.Lock()
	defer memoryOnce.Unlock()
	if memoryOnce.fig == nil {
		memoryOnce.fig = measureSessionMemory(b)
	}
	fig := memoryOnce.fig
	k := float64(goalSessions)
	hostGoal := (fig.idleMiB*(1<<20) + k*fig.hostPer) / (1 << 20)
	b.Logf("%d live sessions: gateway live heap %.1f KiB/session (%.1f KiB of it stacks; bare store sessions %.1f KiB), RSS %.1f KiB/session, "+
		"%.1f goroutines/session; adapter RSS %.1f KiB/session (a bare net/http SSE reader %.1f KiB/stream); idle gateway %.1f MiB, idle adapter %.1f MiB; "+
		"10k sessions: gateway live heap %.0f MiB (goal %d MiB), adapter RSS %.0f MiB",
		fig.sessions, fig.hostPer/1024, fig.stackPer/1024, fig.storePer/1024, fig.rssPer/1024, fig.goroutinesPer, fig.adPer/1024, fig.barePer/1024,
		fig.idleMiB, fig.adIdleMiB, hostGoal, goalBytes>>20, fig.adIdleMiB+k*fig.adPer/(1<<20))
	b.ReportMetric(float64(fig.sessions), "sessions")
	b.ReportMetric(fig.hostPer, "heap-B/session")
	b.ReportMetric(fig.stackPer, "stack-B/session")
	b.ReportMetric(fig.rssPer, "rss-B/session")
	b.ReportMetric(fig.storePer, "store-heap-B/session")
	b.ReportMetric(fig.hostPer/max(fig.storePer, 1), "x-store")
	b.ReportMetric(fig.adPer, "adapter-rss-B/session")
	b.ReportMetric(fig.barePer, "bare-reader-rss-B/stream")
	b.ReportMetric(fig.adPer/max(fig.barePer, 1), "adapter/bare-reader-rss")
	b.ReportMetric(fig.goroutinesPer, "goroutines/session")
	b.ReportMetric(hostGoal, "10k-heap-MiB")
	b.ReportMetric(hostGoal/float64(goalBytes>>20), "x-goal")
}

func measureSessionMemory(b *testing.B) *memoryFigures {
	n := defaultMemorySessions
	if s := os.Getenv("CRANK_BENCH_SESSIONS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("CRANK_BENCH_SESSIONS: want a positive number of sessions, got %q", s)
		}
		n = v
	}
	dir := os.Getenv("CRANK_BENCH_PROFILE")
	if dir != "" {
		runtime.MemProfileRate = 1
	}
	quiet := startQuietUpstream(b)
	f := newFamilyBench(b, quiet)
	ctx := context.Background()
	// The floor of the adapter's share, as many streams again.
	br := startBareReader(b, quiet+"/quiet")
	br.open(b, 20)
	bareIdle := rssBytes(br.pid)
	br.open(b, n)
	barePer := perItem(rssBytes(br.pid), bareIdle, n)
	// Warm up: the adapter process, its connection pools, etcd's leases.
	warm := startSessions(b, f.h, "quiet", 20, 4)
	awaitItems(b, f.st, warm)
	pid := f.sup.PID()
	idle := sampleMemory(pid)

	// Baseline: bare store sessions as a runner keeps them — created owned,
	// one item stored — with no reader, writer or adapter. (Runners take
	// stop requests from the replica's one signal watch, not a watch each.)
	bareIDs := make([]string, n)
	_, _, err := spread(n, 8, func(_, i int) error {
		ss, err := f.st.CreateStreamSession(ctx, store.NewStreamSession{Scope: benchScope, AgentScoped: true, OperationID: "quiet_start",
			Protocol: "rest", Mode: "session", IdleTimeout: time.Hour, MaxLifetime: time.Hour, MaxItems: 100, MaxBytes: 1 << 20, Owned: true})
		if err != nil {
			return err
		}
		bareIDs[i] = ss.ID
		_, err = f.st.AppendStreamSessionItems(ctx, ss.ID, store.Append{Items: [][]byte{[]byte(`{"n":1,"msg":"still here"}`)}})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	f.logs.TakeAll()
	bare := sampleMemory(pid)

	ids := startSessions(b, f.h, "quiet", n, 8)
	awaitItems(b, f.st, ids)
	f.logs.TakeAll() // the test's log observer keeps every record: not the gateway's
	live := sampleMemory(pid)
	if dir != "" {
		if err := writeProfiles(dir); err != nil {
			b.Error(err)
		}
	}
	stopSessions(b, f.h, "quiet", append(ids, warm...))
	return &memoryFigures{
		sessions:      n,
		hostPer:       perItem(live.live, bare.live, n),
		stackPer:      perItem(live.stack, bare.stack, n),
		rssPer:        perItem(live.rss, bare.rss, n),
		storePer:      perItem(bare.live, idle.live, n),
		adPer:         perItem(live.adapterRSS, bare.adapterRSS, n),
		goroutinesPer: float64(live.goroutines-bare.goroutines) / float64(n),
		idleMiB:       float64(idle.live) / (1 << 20),
		adIdleMiB:     float64(idle.adapterRSS) / (1 << 20),
		barePer:       barePer,
	}
}

func writeProfiles(dir string) error {
	for _, p := range []struct {
		file, profile string
		debug         int
	}{{"heap.prof", "heap", 0}, {"goroutines.txt", "goroutine", 1}} {
		fh, err := os.Create(filepath.Join(dir, p.file))
		if err != nil {
			return err
		}
		err = pprof.Lookup(p.profile).WriteTo(fh, p.debug)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkJobStart starts b.N async jobs (a unary upstream request through
// the REST adapter, run in the background) from 8 concurrent callers and
// waits for all of them to succeed. It reports jobs started per second and
// p99 of report_start, jobs completed per second (first start to last
// success), and both as multiples of a baseline of the same request as a
// plain unary tool call (report_now) with the same concurrency, measured in
// the same run.
func BenchmarkJobStart(b *testing.B) {
	f := newFamilyBench(b, "")
	ctx := context.Background()
	const workers = 8
	args := `{"delay_ms":0}`
	b.ResetTimer()
	unaryT, unaryLat, err := spread(b.N, workers, func(_, _ int) error {
		return benchCall(ctx, f.h, "report_now", args, nil)
	})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N)
	t0 := time.Now()
	startT, startLat, err := spread(b.N, workers, func(_, i int) error {
		var j struct {
			JobID string `json:"job_id"`
		}
		err := benchCall(ctx, f.h, "report_start", args, &j)
		ids[i] = j.JobID
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	// Wait for the jobs in start order: most are done by the time their
	// turn comes.
	for _, id := range ids {
		for {
			j, err := f.st.GetJob(ctx, benchScope, id)
			if err != nil {
				b.Fatal(err)
			}
			if j.Status == store.JobSucceeded {
				break
			}
			if j.Status.Terminal() {
				b.Fatalf("job %s ended %s: %s", id, j.Status, j.Error)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	doneT := time.Since(t0)
	b.StopTimer()
	unary := float64(b.N) / unaryT.Seconds()
	starts, done := float64(b.N)/startT.Seconds(), float64(b.N)/doneT.Seconds()
	b.Logf("unary report_now %.0f calls/s (p99 %s); report_start %.0f starts/s (p99 %s), %.0f jobs done/s",
		unary, percentile(unaryLat, 99), starts, percentile(startLat, 99), done)
	b.ReportMetric(starts, "starts/s")
	b.ReportMetric(ms64(percentile(startLat, 99)), "start-p99-ms")
	b.ReportMetric(done, "done/s")
	b.ReportMetric(unary, "unary-calls/s")
	b.ReportMetric(starts/unary, "x-unary-starts")
	b.ReportMetric(done/unary, "x-unary-done")
}
