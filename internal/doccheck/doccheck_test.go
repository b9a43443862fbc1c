package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// A Markdown document of the repository, split into its prose (code
// blocks and code spans blanked, so that links and headings are read from
// the prose only) and its code (the fenced blocks and the code spans).
type doc struct {
	path  string // relative to the root, slash-separated
	text  string
	prose string
	code  []string
}

// docs reads every Markdown file of the repository outside dependencies
// (node_modules), test data and build output.
func docs(t *testing.T) []doc {
	t.Helper()
	var out []doc
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "bin", ".crank":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, parse(filepath.ToSlash(rel), string(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(out, func(d doc) bool { return d.path == "README.md" }) {
		t.Fatal("no README.md at the repository's root")
	}
	return out
}

// A code span: in backticks, one or two, and within a paragraph.
var codeSpan = regexp.MustCompile("(?s)``.+?``|`[^`]+`")

// parse splits a document into prose and code: fenced blocks first, then
// the code spans of what remains (a span may wrap onto the next line).
func parse(path, text string) doc {
	d := doc{path: path, text: text}
	var rest strings.Builder
	fence := ""
	var block strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
				d.code = append(d.code, block.String())
				block.Reset()
			} else {
				block.WriteString(line)
			}
			rest.WriteString("\n")
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			rest.WriteString("\n")
			continue
		}
		rest.WriteString(line)
	}
	d.prose = codeSpan.ReplaceAllStringFunc(rest.String(), func(s string) string {
		if strings.Contains(s, "\n\n") {
			return s // no span crosses a paragraph: a stray backtick
		}
		d.code = append(d.code, strings.Join(strings.Fields(strings.Trim(s, "`")), " "))
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	return d
}

var (
	heading  = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLink   = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// anchors are the anchors GitHub gives a document's headings: lower case,
// every character but letters, digits, spaces, hyphens and underscores
// dropped, spaces made hyphens, and a repeated one suffixed -1, -2, …;
// plus the ids of its HTML anchors.
func anchors(d doc) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	// Headings are read from the text with code blocks blanked, their code
	// spans kept as text (GitHub keeps a code span's text in the anchor).
	var text strings.Builder
	fence := false
	for _, line := range strings.SplitAfter(d.text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = !fence
			text.WriteString("\n")
			continue
		}
		if fence {
			text.WriteString("\n")
			continue
		}
		text.WriteString(line)
	}
	for _, m := range heading.FindAllStringSubmatch(text.String(), -1) {
		a := headingAnchor(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	for _, m := range htmlID.FindAllStringSubmatch(d.text, -1) {
		out[m[1]] = true
	}
	return out
}

// headingAnchor is GitHub's anchor of a heading's text.
func headingAnchor(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestAnchor holds headingAnchor to GitHub's rules on headings of these docs.
func TestAnchor(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Two commands": "two-commands",
		"Server card, AI catalog and server.json: what a client learns before connecting": "server-card-ai-catalog-and-serverjson-what-a-client-learns-before-connecting",
		"`crank` block":                        "crank-block",
		"State in etcd: key layout and leases": "state-in-etcd-key-layout-and-leases",
		"Crank in an mcp-mesh":                 "crank-in-an-mcp-mesh",
		"Limits — and their defaults":          "limits--and-their-defaults",
		"[The SDK](plugins/sdk) guide":         "the-sdk-guide",
		"Who can do what (and why)":            "who-can-do-what-and-why",
	} {
		if got := headingAnchor(h); got != want {
			t.Errorf("headingAnchor(%q) = %q, want %q", h, got, want)
		}
	}
}

// Every relative link of every document reaches a file or directory of
// the repository, and its anchor, if any, a heading of the Markdown file
// it names (a directory's README.md; the document itself for "#x").
func TestLinks(t *testing.T) {
	t.Parallel()
	all := docs(t)
	byPath := map[string]doc{}
	for _, d := range all {
		byPath[d.path] = d
	}
	anchorsOf := map[string]map[string]bool{}
	for _, d := range all {
		var links []string
		for _, m := range mdLink.FindAllStringSubmatch(d.prose, -1) {
			links = append(links, m[1])
		}
		for _, m := range refLink.FindAllStringSubmatch(d.prose, -1) {
			links = append(links, m[1])
		}
		for _, link := range links {
			if regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`).MatchString(link) || strings.HasPrefix(link, "//") {
				continue // a URL: not this test's
			}
			target, anchor, _ := strings.Cut(link, "#")
			file := d.path
			if target != "" {
				if strings.HasPrefix(target, "/") {
					t.Errorf("%s: link %s is absolute; write it relative to the document", d.path, link)
					continue
				}
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(d.path), target)))
				st, err := os.Stat(filepath.Join(root, file))
				if err != nil {
					t.Errorf("%s: link %s: no %s in the repository", d.path, link, file)
					continue
				}
				if st.IsDir() {
					file = strings.TrimPrefix(file+"/README.md", "./")
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s: link %s: an anchor into %s, which is not Markdown", d.path, link, file)
				continue
			}
			td, ok := byPath[file]
			if !ok {
				t.Errorf("%s: link %s: %s is not a document this test reads", d.path, link, file)
				continue
			}
			if anchorsOf[file] == nil {
				anchorsOf[file] = anchors(td)
			}
			if !anchorsOf[file][anchor] {
				t.Errorf("%s: link %s: %s has no heading with the anchor #%s", d.path, link, file, anchor)
			}
		}
	}
}

// A repository path named in the documents: under one of the top-level
// directories.
var repoPath = regexp.MustCompile(`(?:^|[\s(` + "`" + `"'])((?:caddymodule|cmd|demo|deploy|docs|e2e|host|internal|plugins|proto|store)/[A-Za-z0-9_./-]*[A-Za-z0-9_/])`)

// A file's name ends in an extension (a Go symbol, host/catalog.Parse,
// or a test, e2e/TestX, is no file).
var fileName = regexp.MustCompile(`\.[a-z][a-z0-9]{0,7}$`)

// Paths of other repositories that the documents cite, which look like
// this one's.
var elsewhere = map[string]string{
	"docs/discovery.md": "modelcontextprotocol/experimental-ext-server-card's",
}

// Every repository file the documents name (in prose or code: "see
// docs/security.md", `plugins/rest/doc.go`) exists, relative to the
// repository's root or to the document; a path with a wildcard or a
// placeholder is not read.
func TestPaths(t *testing.T) {
	t.Parallel()
	for _, d := range docs(t) {
		for _, m := range repoPath.FindAllStringSubmatch(d.text, -1) {
			p := m[1]
			if strings.ContainsAny(p, "*{}<>") || strings.Contains(p, "...") || !fileName.MatchString(p) || elsewhere[p] != "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(d.path), p)); err == nil {
				continue
			}
			if !generated(p) {
				t.Errorf("%s names %s, which the repository does not have", d.path, p)
			}
		}
	}
}

// generated tells the paths the build makes (not in a fresh checkout).
func generated(p string) bool {
	return strings.Contains(p, "/node_modules") || strings.HasPrefix(p, "bin/")
}

var makeTarget = regexp.MustCompile(`(?m)(?:^|[^\w-])make((?:[ \t]+[A-Za-z0-9_.=/$()-]+)+)`)

// Every `make` target a document names in code (a code span or block:
// "make run", "make ts-deps conformance-deps", "make bench BENCH_COUNT=3")
// is a target of the Makefile.
func TestMakeTargets(t *testing.T) {
	t.Parallel()
	targets := makefileTargets(t)
	for _, d := range docs(t) {
		for _, code := range d.code {
			for _, line := range strings.Split(code, "\n") {
				line, _, _ = strings.Cut(line, "#")
				for _, m := range makeTarget.FindAllStringSubmatch(line, -1) {
					for _, w := range strings.Fields(m[1]) {
						if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
							continue // a variable or a flag
						}
						if !targets[w] {
							t.Errorf("%s names `make %s`, and the Makefile has no target %s", d.path, strings.TrimSpace(m[1]), w)
						}
					}
				}
			}
		}
	}
}

// makefileTargets are the rule targets of the root Makefile.
func makefileTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	rule := regexp.MustCompile(`^([A-Za-z0-9_./ -]+?)\s*::?(?:[^=]|$)`)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "\t") {
			continue
		}
		if m := rule.FindStringSubmatch(line); m != nil {
			for _, w := range strings.Fields(m[1]) {
				out[w] = true
			}
		}
	}
	for _, want := range []string{"run", "test"} {
		if !out[want] {
			t.Fatalf("the Makefile has no target %s: this test reads it wrongly", want)
		}
	}
	return out
}
