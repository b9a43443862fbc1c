package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/crankmcp/crank/internal/missing"
	"github.com/crankmcp/crank/internal/release"
	"github.com/crankmcp/crank/store"
)

// previousBuild builds the packages pkgs of the module in the directory
// module as of the previous release (internal/release/previous), from
// this repository's history, once per machine, and returns the directory
// of the executables; a checkout without its history skips the test.
func previousBuild(t testing.TB, module string, pkgs ...string) string {
	t.Helper()
	prev, err := release.Previous()
	if err != nil {
		t.Fatal(err)
	}
	if err := release.Available(repoRoot, prev); err != nil {
		missing.Tool(t, "the repository's git history, to build the previous release from", err.Error())
	}
	dir, err := release.Build(repoRoot, prev, module, pkgs...)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// previousCrank is the crank executable of the previous release.
func previousCrank(t testing.TB) string {
	return filepath.Join(previousBuild(t, ".", "./cmd/crank"), "crank")
}

// upgradePhase is how long each phase of TestRollingUpgrade runs under
// load: CRANK_UPGRADE_PHASE (make upgrade-test: 30s), 8s in make test.
func upgradePhase(t testing.TB) time.Duration {
	return envDuration(t, "CRANK_UPGRADE_PHASE", 8*time.Second)
}

// A fleet moved to the current build one replica at a time, under load:
// three replicas of the previous release on the three-member etcd behind
// the balancer (the load of TestClusterUnderFaults: go-sdk and TypeScript
// clients, unary calls, windows, sessions, jobs and tasks in flight), each
// drained (SIGINT) and started again as the current build, one per phase,
// then one rolled back to the previous release. In every phase nothing is
// lost or duplicated and every failure is retryable; a catalog is edited
// through a replica of each version and read alike by all; an MCP
// session, a window's cursor, a session's poll cursor and a job handed
// out by one version are used on the other; and the records written
// follow the oldest live replica (format 1 while one of the previous
// release lives, format 2 once none is left, format 1 again after the
// rollback).
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	prev := previousCrank(t)
	phase, workers := upgradePhase(t), loadWorkers()
	var report strings.Builder
	var problems []string
	t.Cleanup(func() {
		t.Logf("load through the balancer during the upgrade, %d clients, %s phases:\n%s", workers, phase, report.String())
		if len(problems) > 0 {
			t.Logf("failed:\n  %s", strings.Join(problems, "\n  "))
		}
	})
	up := loadUpstream(t)
	// The soak's operations: finished jobs are kept 30s, so that a long
	// run stays within the per-client quota of retained jobs.
	c := startCrankClusterWith(t, gatewayOptions{Operations: soakOps(t, up.URL), Binary: prev,
		Handler: fmt.Sprintf("catalog fleet {\n\t\t\tupstreams %s\n\t\t}", up.URL)}, 3)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	cat := &fleetCatalog{t: t, base: up.URL}
	cat.edit(c.replicas[0])

	// move drains replica i and starts it again as bin, a third into the
	// phase.
	move := func(i int, bin string) func() {
		return func() {
			time.Sleep(phase / 3)
			g := c.replicas[i]
			g.stop()
			g.binary = bin
			if err := g.launch(nil); err != nil {
				t.Error(err)
			}
		}
	}
	wantFormat := func(t *testing.T, g *gateway, want int) {
		t.Helper()
		var got int
		deadline := time.Now().Add(30 * time.Second)
		for got = writtenFormat(t, cli, g); got != want && time.Now().Before(deadline); got = writtenFormat(t, cli, g) {
			time.Sleep(200 * time.Millisecond)
		}
		if got != want {
			problem(t, &problems, "an MCP session recorded by %s is of format %d, want %d", g.binary, got, want)
		}
		t.Logf("an MCP session recorded by %s: format %d", g.binary, got)
	}
	for i, s := range []struct {
		name  string
		fault func()
		after func(t *testing.T)
	}{
		{name: "previous-release", after: func(t *testing.T) {
			wantFormat(t, c.replicas[0], 1)
		}},
		{name: "upgrade-r0", fault: move(0, crankBin), after: func(t *testing.T) {
			// r1 and r2 are of the previous release: format 1 is written.
			wantFormat(t, c.replicas[0], 1)
			problems = append(problems, crossVersion(t, c.replicas[0], c.replicas[1], "from the current build to the previous release")...)
			problems = append(problems, crossVersion(t, c.replicas[1], c.replicas[0], "from the previous release to the current build")...)
		}},
		{name: "upgrade-r1", fault: move(1, crankBin)},
		{name: "upgrade-r2", fault: move(2, crankBin), after: func(t *testing.T) {
			wantFormat(t, c.replicas[2], store.FormatVersion)
		}},
		{name: "rollback-r0", fault: move(0, prev), after: func(t *testing.T) {
			wantFormat(t, c.replicas[1], 1)
			problems = append(problems, crossVersion(t, c.replicas[0], c.replicas[2], "from the rolled-back replica to the current build")...)
			problems = append(problems, crossVersion(t, c.replicas[2], c.replicas[0], "from the current build to the rolled-back replica")...)
		}},
	} {
		if !t.Run(s.name, func(t *testing.T) {
			rep := runLoad(t, c.URL, workers, phase, s.fault)
			report.WriteString(rep.table(s.name))
			problems = append(problems, rep.check(t, s.name)...)
			for _, g := range c.replicas {
				waitFor(t, "the replica to answer", func() bool {
					resp, err := http.Get(g.MCPURL)
					if err == nil {
						resp.Body.Close()
					}
					return err == nil
				})
			}
			problems = append(problems, recovered(t, c.URL, s.name)...)
			// The catalog, edited through the replica moved (or the
			// first), reads alike on every replica, of either version.
			cat.edit(c.replicas[max(0, i-1)%len(c.replicas)])
			for _, g := range c.replicas {
				problems = append(problems, cat.check(t, g)...)
			}
			if s.after != nil {
				s.after(t)
			}
		}) {
			return
		}
	}
}

// writtenFormat opens an MCP session on g and returns the format of the
// record g wrote for it.
func writtenFormat(t *testing.T, cli *clientv3.Client, g *gateway) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lb := &balancer{}
	lb.to(g)
	cs := connectThrough(t, ctx, lb)
	defer cs.Close()
	resp, err := cli.Get(ctx, store.DefaultPrefix+"mcp-sessions/"+cs.ID())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the record of MCP session %s: %v (%d keys)", store.MCPSessionDigest(cs.ID()), err, len(resp.Kvs))
	}
	return store.RecordFormat(resp.Kvs[0].Value)
}

// crossVersion opens an MCP session on from and, in it, a window, a
// session with a first poll and a job, then goes on on to: the MCP
// session, the window's cursor, the poll's cursor and the job, handed out
// by from, all work there.
func crossVersion(t *testing.T, from, to *gateway, what string) (problems []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lb := &balancer{}
	lb.to(from)
	cs := connectThrough(t, ctx, lb)
	defer cs.Close()
	c := &loadClient{t: t, cs: cs}
	call := func(name string, args map[string]any) map[string]any {
		m, o := c.call(name, args, "")
		if o != nil {
			problem(t, &problems, "%s: %s %v: %v", what, name, args, o.err)
			return map[string]any{}
		}
		return m
	}
	w := call("tail", map[string]any{})
	s := call("follow_start", nil)
	var p map[string]any
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if p = call("follow_poll", map[string]any{"session_id": s["session_id"], "max_items": 2}); len(p) == 0 || len(p["items"].([]any)) > 0 {
			break
		}
	}
	j := call("export_start", map[string]any{"ms": 100})
	if len(problems) > 0 {
		return problems
	}

	lb.to(to)
	if w2 := call("tail", map[string]any{"cursor": w["cursor"]}); len(w2) > 0 {
		last := -1
		sequence(w["items"].([]any), &last, false)
		if lost, dup := sequence(w2["items"].([]any), &last, false); lost+dup != 0 {
			problem(t, &problems, "%s: the window continued from its cursor with %d lost, %d duplicated", what, lost, dup)
		}
	}
	if p2 := call("follow_poll", map[string]any{"session_id": s["session_id"], "cursor": p["cursor"], "max_items": 2}); len(p2) > 0 && p2["status"] != "active" {
		problem(t, &problems, "%s: the session's poll: %v", what, p2)
	}
	call("follow_stop", map[string]any{"session_id": s["session_id"]})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st := call("export_status", map[string]any{"job_id": j["job_id"]})
		if st["status"] == "succeeded" {
			break
		}
		if len(st) == 0 || st["status"] != "running" || time.Now().After(deadline) {
			problem(t, &problems, "%s: the job: %v", what, st)
			return problems
		}
	}
	if r := call("export_result", map[string]any{"job_id": j["job_id"]}); fmt.Sprint(r["result"]) != "map[rows:100]" {
		problem(t, &problems, "%s: the job's result: %v", what, r)
	}
	return problems
}

// fleetCatalog is the catalog "fleet" that TestRollingUpgrade edits: one
// operation whose description is its edit count.
type fleetCatalog struct {
	t       *testing.T
	base    string
	version int
}

func (f *fleetCatalog) entry() string {
	return fmt.Sprintf(`{"name": "cat_user", "description": "edit %d", "adapter": "rest",
		"input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
		"config": {"method": "GET", "url": "%s/users/{id}"}}`, f.version+1, f.base)
}

// edit writes the next version through g.
func (f *fleetCatalog) edit(g *gateway) {
	f.t.Helper()
	if f.version == 0 {
		g.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/fleet/operations", f.entry(), "If-None-Match", "*")
	} else {
		g.wantAdmin(http.StatusOK, "PUT", "/crank/catalogs/fleet/operations/cat_user", f.entry(), "If-Match", fmt.Sprintf(`"%d"`, f.version))
	}
	f.version++
}

// check reads the catalog through g: its version, its operation and its
// history are as written, whichever release wrote them.
func (f *fleetCatalog) check(t *testing.T, g *gateway) (problems []string) {
	t.Helper()
	r := g.adminCall("GET", "/crank/catalogs/fleet/operations/cat_user", "")
	if r.Status != http.StatusOK || r.Header.Get("ETag") != fmt.Sprintf(`"%d"`, f.version) || !strings.Contains(string(r.Body), fmt.Sprintf("edit %d", f.version)) {
		problem(t, &problems, "catalog on %s: %d %s %s, want version %d", g.binary, r.Status, r.Header.Get("ETag"), r.Body, f.version)
	}
	v := g.adminCall("GET", "/crank/catalogs/fleet/versions", "")
	if got := strings.Count(string(v.Body), `"version":`); v.Status != http.StatusOK || got < f.version {
		problem(t, &problems, "catalog history on %s: %d, %d versions, want %d: %s", g.binary, v.Status, got, f.version, v.Body)
	}
	return problems
}
