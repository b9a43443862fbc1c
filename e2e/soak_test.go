package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// soakLifetime bounds what the soak's load leaves in etcd: finished jobs,
// idle MCP sessions and SSE event logs live this long (the defaults are an
// hour, 30 minutes and 5 minutes), so that a leak check after the load
// need not wait an hour. MCP Tasks keep the ttl the load asks for (60s).
const soakLifetime = 30 * time.Second

// soakDrainLimit is how long after the load the soak waits for etcd's
// keys and the replicas' goroutines to return to their baseline: the
// longest lifetime of what the load writes (a task's 60s) on leases of
// time buckets (up to twice as long), and a margin.
const soakDrainLimit = 4 * time.Minute

// soakOps are the cluster test's operations with soakLifetime as the
// jobs' retention.
func soakOps(t testing.TB, base string) string {
	ops := loadOps(base)
	out := strings.Replace(ops, "    timeout: 2m\n", fmt.Sprintf("    timeout: 2m\n    job: {retention_ms: %d}\n", soakLifetime.Milliseconds()), 1)
	if out == ops {
		t.Fatal("soakOps: the export operation of loadOps has no timeout line to add the retention after")
	}
	return out
}

// soakDuration is CRANK_SOAK_DURATION (make soak: 30m; make test: 2m);
// without it the soak is skipped, so that it never runs beside the other
// tests of the package.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("CRANK_SOAK_DURATION")
	if s == "" {
		t.Skip("CRANK_SOAK_DURATION is not set (make soak)")
	}
	d, err := time.ParseDuration(s)
	// Shorter, an interval is too short for a fault and its healing.
	if err != nil || d < 2*time.Minute {
		t.Fatalf("CRANK_SOAK_DURATION: %q is not a duration of at least 2m", s)
	}
	return d
}

// soakIntervals is how many report intervals a soak has: 5 minutes each
// in a 30-minute soak, 20 seconds in a 2-minute one.
const soakIntervals = 6

// TestSoak runs the cluster test's mixed load (go-sdk clients doing
// unary calls, windows, stream sessions, jobs and MCP Tasks, and the
// TypeScript client) through the balancer over three replicas on a
// three-member etcd for CRANK_SOAK_DURATION, while an adapter process, a
// replica and an etcd member are killed by turns at random intervals.
// Every interval's report has the calls by kind, the failures by code,
// p50/p99, the RSS and goroutines of every process, and etcd's db size
// and keys. It fails on a lost or duplicated answer, on a failure that is
// not retryable, and on etcd keys or replica goroutines that do not come
// back to their baseline once the load stopped (a leak). Timings are
// reported, never checked.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	interval := d / soakIntervals
	workers := loadWorkers()
	rep := &soakReport{path: os.Getenv("CRANK_SOAK_REPORT")}
	// Registered first, so it runs last: the report comes after the
	// processes' logs, at the end of the output.
	t.Cleanup(func() { t.Logf("soak report:\n%s", rep.String()) })

	up := loadUpstream(t)
	c := startCrankClusterWith(t, gatewayOptions{Operations: soakOps(t, up.URL),
		Handler: fmt.Sprintf("session_timeout %s\n\t\tevent_ttl %s", soakLifetime, soakLifetime)}, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s := &soak{t: t, c: c, cli: cli, start: time.Now()}

	empty, err := s.keys()
	if err != nil {
		t.Fatal(err)
	}
	// A short load without faults starts every replica's adapter and
	// pools and writes the keys a replica keeps; once what it wrote
	// expired, etcd's keys and the replicas' goroutines are the baseline.
	warm := runLoad(t, c.URL, workers, 10*time.Second, nil)
	problems := warm.check(t, "warm-up")
	settled := s.drain(func(keys int, _ map[string]int) bool { return keys <= empty+soakKeySlack })
	baseKeys, _ := s.keys()
	baseGoroutines := s.replicaGoroutines()
	rep.printf("soak: %s under load in %d intervals of %s, %d go-sdk clients (and the TypeScript client when available), "+
		"through the balancer over 3 replicas on a 3-member etcd\n", d, soakIntervals, interval, workers)
	rep.printf("baseline (a 10s warm-up, then %s for what it wrote to expire): etcd keys %d%s; replica goroutines %v\n\n",
		settled.Round(time.Second), baseKeys, s.keysByPrefix(), baseGoroutines)

	s.start = time.Now()
	for i := range soakIntervals {
		var faults []string
		from := time.Since(s.start)
		load := runLoad(t, c.URL, workers, interval, func() { faults = s.faults(interval) })
		name := fmt.Sprintf("interval-%d", i+1)
		problems = append(problems, load.check(t, name)...)
		rep.printf("== %s (%s–%s), faults: %s\n", name, clock(from), clock(time.Since(s.start)), cmp.Or(strings.Join(faults, "; "), "none"))
		rep.printf("%s", load.table(name))
		rep.printf("failures by code: %s\n", load.codeSummary())
		rep.printf("%s\n", s.sample())
	}
	problems = append(problems, recovered(t, c.URL, "soak")...)

	// After the load: everything it wrote expires and every goroutine it
	// started ends; what stays is a leak.
	drained := s.drain(func(keys int, gor map[string]int) bool {
		return keys <= baseKeys+soakKeySlack && s.goroutinesBack(gor, baseGoroutines)
	})
	keys, err := s.keys()
	gor := s.replicaGoroutines()
	rep.printf("== after the load (%s later)\netcd keys %d (baseline %d)%s; replica goroutines %v (baseline %v)\n%s\n",
		drained.Round(time.Second), keys, baseKeys, s.keysByPrefix(), gor, baseGoroutines, s.sample())
	if err != nil || keys > baseKeys+soakKeySlack {
		problem(t, &problems, "leak: etcd holds %d keys %s after the load, baseline %d (%v)", keys, soakDrainLimit, baseKeys, err)
	}
	if !s.goroutinesBack(gor, baseGoroutines) {
		problem(t, &problems, "leak: replica goroutines %v %s after the load, baseline %v", gor, soakDrainLimit, baseGoroutines)
	}
	if len(problems) > 0 {
		rep.printf("FAILED:\n  %s\n", strings.Join(problems, "\n  "))
	} else {
		rep.printf("PASS: nothing lost or duplicated, every failure retryable, keys and goroutines back to their baseline\n")
	}
}

// What "back to the baseline" allows: keys of the replicas' own (an owner
// lease of a restarted replica not yet expired), and goroutines of idle
// connections (the balancer's, etcd's) that come and go. Under the load a
// replica runs about twice its baseline.
const (
	soakKeySlack        = 10
	soakGoroutineSlack  = 15
	soakGoroutineFactor = 1.1
)

// drain waits, up to soakDrainLimit, until back says etcd's keys and the
// replicas' goroutines are where they should be, and returns how long it
// waited.
func (s *soak) drain(back func(keys int, goroutines map[string]int) bool) time.Duration {
	start := time.Now()
	for time.Since(start) < soakDrainLimit {
		if keys, err := s.keys(); err == nil && back(keys, s.replicaGoroutines()) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	return time.Since(start)
}

func (s *soak) goroutinesBack(now, base map[string]int) bool {
	limit := 0
	for _, n := range base {
		limit = max(limit, n)
	}
	for _, n := range now {
		if float64(n) > float64(limit)*soakGoroutineFactor+soakGoroutineSlack {
			return false
		}
	}
	return len(now) == len(s.c.replicas)
}

// soak is a running soak's cluster and clock.
type soak struct {
	t     *testing.T
	c     *crankCluster
	cli   *clientv3.Client
	start time.Time
	// deck holds the kinds of fault not yet dealt in this round: each
	// round deals all three, in a random order.
	deck []func() string
}

// clock is an offset into the soak as m:ss.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// faults injects faults for one interval of length d, by turns an
// adapter's SIGKILL, a replica's SIGKILL (restarted after a few seconds)
// and an etcd member's SIGKILL (restarted after a few seconds), each after
// a random pause, and returns what it did.
func (s *soak) faults(d time.Duration) []string {
	start := time.Now()
	gap := min(d/2, 90*time.Second)
	var done []string
	for {
		pause := gap/2 + rand.N(gap/2)
		if time.Since(start)+pause+10*time.Second > d {
			return done
		}
		time.Sleep(pause)
		if len(s.deck) == 0 {
			s.deck = []func() string{s.killAdapter, s.killReplica, s.killEtcdMember}
			rand.Shuffle(len(s.deck), func(i, j int) { s.deck[i], s.deck[j] = s.deck[j], s.deck[i] })
		}
		f := s.deck[0]
		s.deck = s.deck[1:]
		at := clock(time.Since(s.start))
		done = append(done, at+" "+f())
	}
}

// killAdapter kills the REST adapter process of a replica that has one.
func (s *soak) killAdapter() string {
	for _, i := range rand.Perm(len(s.c.replicas)) {
		as, _ := adaptersAt(s.c.replicas[i].AdminURL)
		for _, a := range as {
			if a.Name == "rest" && a.Running && a.PID > 0 {
				if err := killPID(a.PID); err != nil {
					s.t.Error(err)
				}
				return fmt.Sprintf("adapter of r%d SIGKILL", i)
			}
		}
	}
	return "no adapter running to kill"
}

func (s *soak) killReplica() string {
	i := rand.IntN(len(s.c.replicas))
	r := s.c.replicas[i]
	r.kill()
	down := 2*time.Second + rand.N(3*time.Second)
	time.Sleep(down)
	start := time.Now()
	r.restart()
	return fmt.Sprintf("replica r%d SIGKILL, restarted after %s (answering %s later)", i, down.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

func (s *soak) killEtcdMember() string {
	m := s.c.etcd.members[rand.IntN(len(s.c.etcd.members))]
	leader := ""
	if m == s.c.etcd.leader() {
		leader = " (the leader)"
	}
	s.c.etcd.kill(m)
	down := 2*time.Second + rand.N(3*time.Second)
	time.Sleep(down)
	s.c.etcd.start(m)
	healthy := s.c.etcd.waitHealthy(30 * time.Second)
	return fmt.Sprintf("etcd %s%s SIGKILL, restarted after %s (healthy %s later)", m.name, leader, down.Round(100*time.Millisecond), healthy.Round(100*time.Millisecond))
}

// keys counts every key in etcd.
func (s *soak) keys() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(resp.Count), nil
}

// keysByPrefix counts etcd's keys by their first two path segments, for a
// leak's report.
func (s *soak) keysByPrefix() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Sprintf(" (listing: %v)", err)
	}
	n := map[string]int{}
	for _, kv := range resp.Kvs {
		parts := strings.SplitN(strings.TrimPrefix(string(kv.Key), "/"), "/", 3)
		n[strings.Join(parts[:min(2, len(parts))], "/")]++
	}
	var out []string
	for _, p := range slices.Sorted(maps.Keys(n)) {
		out = append(out, fmt.Sprintf("%s %d", p, n[p]))
	}
	if len(out) == 0 {
		return ""
	}
	return " [" + strings.Join(out, ", ") + "]"
}

// replicaGoroutines are the go_goroutines of each replica that answers
// its admin /metrics.
func (s *soak) replicaGoroutines() map[string]int {
	out := map[string]int{}
	for i, r := range s.c.replicas {
		if n, ok := goroutinesAt(r.AdminURL + "/metrics"); ok {
			out[fmt.Sprintf("r%d", i)] = n
		}
	}
	return out
}

func goroutinesAt(metricsURL string) (int, bool) {
	sc, err := scrapeURL(metricsURL)
	if err != nil {
		return 0, false
	}
	v, ok := sc.value("go_goroutines")
	return int(v), ok
}

// sample is the table of every process (RSS from /proc; goroutines from
// the Go runtime's metrics of the replicas, the balancer and the etcd
// members; an adapter process exposes none, so its OS threads instead)
// and etcd's db size and keys.
func (s *soak) sample() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %8s %8s %11s %8s\n", "process", "pid", "rss", "goroutines", "threads")
	row := func(name string, pid int, metricsURL string) {
		g := "-"
		if metricsURL != "" {
			if n, ok := goroutinesAt(metricsURL); ok {
				g = strconv.Itoa(n)
			}
		}
		rss, threads := procStatus(pid, "VmRSS"), procStatus(pid, "Threads")
		if rss < 0 {
			fmt.Fprintf(&b, "%-12s %8d %8s %11s %8s\n", name, pid, "down", "-", "-")
			return
		}
		fmt.Fprintf(&b, "%-12s %8d %7.0fM %11s %8d\n", name, pid, float64(rss)/1024, g, threads)
	}
	for i, r := range s.c.replicas {
		row(fmt.Sprintf("replica r%d", i), r.cmd.Process.Pid, r.AdminURL+"/metrics")
		if as, ok := adaptersAt(r.AdminURL); ok {
			for _, a := range as {
				if a.Running {
					row(fmt.Sprintf("  adapter %s", a.Name), a.PID, "")
				}
			}
		}
	}
	row("balancer", s.c.front.cmd.Process.Pid, s.c.front.AdminURL+"/metrics")
	var sizes []string
	for _, m := range s.c.etcd.members {
		m.mu.Lock()
		pid := m.cmd.Process.Pid
		m.mu.Unlock()
		row("etcd "+m.name, pid, m.clientURL()+"/metrics")
		if sc, err := scrapeURL(m.clientURL() + "/metrics"); err == nil {
			size, _ := sc.value("etcd_mvcc_db_total_size_in_bytes")
			inUse, _ := sc.value("etcd_mvcc_db_total_size_in_use_in_bytes")
			sizes = append(sizes, fmt.Sprintf("%s %.1f MiB (in use %.1f)", m.name, size/(1<<20), inUse/(1<<20)))
		} else {
			sizes = append(sizes, m.name+" down")
		}
	}
	keys, err := s.keys()
	keyText := strconv.Itoa(keys)
	if err != nil {
		keyText = err.Error()
	}
	fmt.Fprintf(&b, "etcd db: %s; keys %s\n", strings.Join(sizes, ", "), keyText)
	return b.String()
}

// adaptersAt is the admin API's view of a replica's adapter processes, or
// false when the replica does not answer (killed a moment ago).
func adaptersAt(adminURL string) ([]adapterStatus, bool) {
	resp, err := http.Get(adminURL + "/crank/adapters")
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var out []adapterStatus
	return out, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&out) == nil
}

// procStatus is a numeric field of /proc/<pid>/status (VmRSS in kB,
// Threads), or -1 when the process is gone.
func procStatus(pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

// soakReport collects the soak's report, and writes it to path (when
// set) as it grows, so that a long soak can be followed.
type soakReport struct {
	mu   sync.Mutex
	b    strings.Builder
	path string
}

func (r *soakReport) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.b, format, args...)
	if r.path != "" {
		_ = os.WriteFile(r.path, []byte(r.b.String()), 0o644)
	}
}

func (r *soakReport) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}
