package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The README, walked as a new user would, against the demo of `make run`:
// its list of demo tools is exactly what the demo serves, and the commands
// of "A first tool call" work as written — the TypeScript client line, the
// Go snippet (compiled and run) and the curl sequence.
func TestReadme(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	d := startDemo(t)
	ctx := context.Background()

	t.Run("tool list", func(t *testing.T) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: d.mcpURL()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		var served []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			served = append(served, tool.Name)
		}
		names, patterns := readmeDemoTools(t, text)
		for _, n := range names {
			if !slices.Contains(served, n) {
				t.Errorf("the README names the demo tool %s, which the demo does not serve", n)
			}
		}
		for _, p := range patterns {
			if !slices.ContainsFunc(served, func(s string) bool { return strings.HasPrefix(s, p) }) {
				t.Errorf("the README names the demo tools %s*, and the demo serves none", p)
			}
		}
		for _, s := range served {
			if !slices.Contains(names, s) && !slices.ContainsFunc(patterns, func(p string) bool { return strings.HasPrefix(s, p) }) {
				t.Errorf("the demo serves %s, which the README's list of demo tools does not name", s)
			}
		}
	})

	firstCall := section(t, text, "## A first tool call", "\n## ")
	url := d.mcpURL()
	local := func(s string) string { return strings.ReplaceAll(s, "http://127.0.0.1:8080/mcp", url) }

	t.Run("typescript client", func(t *testing.T) {
		requireTSClient(t)
		line := regexp.MustCompile(`(?s)node e2e/ts/client\.mjs http://127\.0\.0\.1:8080/mcp \\\s*'([^']*)'`).FindStringSubmatch(firstCall)
		if line == nil {
			t.Fatal("the README's TypeScript client line is gone; update this test")
		}
		out := string(runTSClient(t, url, line[1]))
		if !strings.Contains(out, `"Alan Turing"`) {
			t.Errorf("the README's TypeScript call printed:\n%s", out)
		}
	})

	t.Run("go snippet", func(t *testing.T) {
		snippet := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(firstCall)
		if snippet == nil {
			t.Fatal("the README's Go snippet is gone; update this test")
		}
		out := runGoSnippet(t, local(snippet[1]))
		want := regexp.MustCompile(`// res\.StructuredContent: (\{.*\})`).FindStringSubmatch(snippet[1])
		if want == nil {
			t.Fatal("the README's Go snippet no longer shows its result; update this test")
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var got, exp any
		if json.Unmarshal([]byte(lines[len(lines)-1]), &got) != nil || json.Unmarshal([]byte(want[1]), &exp) != nil || !reflect.DeepEqual(got, exp) {
			t.Errorf("the README's Go snippet printed %q, the README says %s", out, want[1])
		}
	})

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			missing.Tool(t, "curl is not installed", "apt-get install curl")
		}
		block := regexp.MustCompile("(?s)```sh\n(curl .*?)```").FindStringSubmatch(firstCall)
		if block == nil {
			t.Fatal("the README's curl command is gone; update this test")
		}
		out := runShell(t, local(block[1]))
		sid := regexp.MustCompile(`(?i)mcp-session-id: (\S+)`).FindStringSubmatch(out)
		if sid == nil || !strings.Contains(out, `"serverInfo"`) {
			t.Fatalf("the README's curl initialize printed:\n%s", out)
		}
		// What the comment says to do next, in the same style.
		post := `curl -s ` + url + ` -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -H 'Mcp-Session-Id: ` + sid[1] + `' -d `
		runShell(t, post+`'{"jsonrpc":"2.0","method":"notifications/initialized"}'`)
		out = runShell(t, post+`'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_user","arguments":{"id":2}}}'`)
		if !strings.Contains(out, `Alan Turing`) {
			t.Errorf("tools/call after the README's curl initialize printed:\n%s", out)
		}
	})
}

// readmeDemoTools reads the README's list of the demo's tools (the bullets
// after "`make run` builds"): full names, a family's further tools written
// as `_poll` after its `x_start`, and `prefix_*` patterns.
func readmeDemoTools(t *testing.T, text string) (names, patterns []string) {
	t.Helper()
	list := section(t, text, "`make run` builds", "\n\n`make bench`")
	var last string
	for _, m := range regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*\\*?)`").FindAllStringSubmatch(list, -1) {
		w := m[1]
		switch {
		case strings.HasSuffix(w, "*"):
			patterns = append(patterns, strings.TrimSuffix(w, "*"))
		case strings.HasPrefix(w, "_") && last != "":
			names = append(names, last[:strings.LastIndexByte(last, '_')]+w)
		case strings.Contains(w, "_") || slices.Contains([]string{"echo"}, w):
			names = append(names, w)
			last = w
		}
	}
	if len(names) == 0 {
		t.Fatal("no demo tools found in the README; update this test")
	}
	return names, patterns
}

// section is the text from the first start up to the next end.
func section(t *testing.T, text, start, end string) string {
	t.Helper()
	i := strings.Index(text, start)
	if i < 0 {
		t.Fatalf("the README has no %q; update this test", start)
	}
	rest := text[i+len(start):]
	if j := strings.Index(rest, end); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func runShell(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// runGoSnippet compiles and runs a README Go snippet as the body of main,
// with ctx defined and `// ...` standing for "check the error", inside the
// repository's module (under e2e/testdata, which ./... leaves out), so it
// builds with the go-sdk version the gateway uses and needs no download.
func runGoSnippet(t *testing.T, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(repoRoot, "e2e", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(repoRoot, "e2e", "testdata"), "readme-snippet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	body = strings.Replace(body, "// ...", "if err != nil { panic(err) }\n\tdefer cs.Close()", 1)
	src := fmt.Sprintf(`package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx := context.Background()
	%s
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(res.StructuredContent)
	fmt.Println(string(out))
}
`, body)
	writeFile(t, filepath.Join(dir, "main.go"), src)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.Join("e2e", "testdata", filepath.Base(dir)))
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Go snippet: %v\n%s\n%s", err, out, src)
	}
	return string(out)
}
