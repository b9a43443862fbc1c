package archtest

import (
	"bufio"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the import path of the repository's root module; the other
// modules' paths are their directories below it.
const module = "github.com/crankmcp/crank"

// external maps the short names the "may import" column gives external
// modules to their import paths: a name allows every package at or below
// one of its paths.
var external = map[string][]string{
	"Caddy":                      {"github.com/caddyserver/caddy"},
	"bbolt":                      {"go.etcd.io/bbolt"},
	"cel-go":                     {"cel.dev/cel-go"},
	"chromedp":                   {"github.com/chromedp"},
	"coder/websocket":            {"github.com/coder/websocket"},
	"etcd":                       {"go.etcd.io/etcd"},
	"etree":                      {"github.com/beevik/etree"},
	"genproto":                   {"google.golang.org/genproto"},
	"go-hclog":                   {"github.com/hashicorp/go-hclog"},
	"go-plugin":                  {"github.com/hashicorp/go-plugin"},
	"go-sdk":                     {"github.com/modelcontextprotocol/go-sdk"},
	"go-sse":                     {"github.com/tmaxmax/go-sse"},
	"goxmldsig":                  {"github.com/russellhaering/goxmldsig"},
	"gqlparser":                  {"github.com/vektah/gqlparser"},
	"graphql-go":                 {"github.com/graph-gophers/graphql-go"},
	"grpc":                       {"google.golang.org/grpc"},
	"jsonpath":                   {"github.com/theory/jsonpath"},
	"jsonschema-go":              {"github.com/google/jsonschema-go"},
	"jwx":                        {"github.com/lestrrat-go/jwx"},
	"kin-openapi":                {"github.com/getkin/kin-openapi"},
	"oapi-codegen/runtime":       {"github.com/oapi-codegen/runtime"},
	"otel":                       {"go.opentelemetry.io/otel"},
	"prometheus":                 {"github.com/prometheus"},
	"protobuf":                   {"google.golang.org/protobuf"},
	"protocompile":               {"github.com/bufbuild/protocompile"},
	"protoreflect":               {"github.com/jhump/protoreflect"},
	"regexp2":                    {"github.com/dlclark/regexp2"},
	"santhosh-tekuri/jsonschema": {"github.com/santhosh-tekuri/jsonschema"},
	"uritemplate":                {"github.com/yosida95/uritemplate"},
	"yaml":                       {"go.yaml.in/yaml"},
	"zap":                        {"go.uber.org/zap"},
}

// The cells that name no package.
const (
	everythingBelow = "everything below"     // what the rows below it name, and their packages
	standardLibrary = "the standard library" // nothing else
	testsOnly       = "—"                    // nothing: its code is tests
)

// A row of the package table.
type row struct {
	dir  string // the package's directory in the repository
	cell string // what it may import
}

// Every package of the repository's modules belongs to a row of
// docs/architecture/packages.md's package table (its own, or its nearest parent
// directory's), every row names a package, and a row's packages import,
// outside their tests, only the packages of the rows its "may import"
// column names and the external modules it names by short name.
func TestPackageTable(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	rows := packageTable(t, filepath.Join(root, "docs", "architecture", "packages.md"))
	imports := packages(t, root)

	index := map[string]int{}
	for i, r := range rows {
		index[r.dir] = i
		if _, ok := imports[r.dir]; !ok {
			t.Errorf("row %s names no package", r.dir)
		}
	}
	// rowOf is the row a package directory belongs to, -1 for none.
	rowOf := func(dir string) int {
		for d := dir; ; d = filepath.Dir(d) {
			if i, ok := index[d]; ok {
				return i
			}
			if d == "." || d == "/" {
				return -1
			}
		}
	}
	used := map[string]bool{}
	allowed := make([]allowance, len(rows))
	for i := len(rows) - 1; i >= 0; i-- {
		allowed[i] = allow(t, rows, i, index, allowed, used)
	}
	for name := range external {
		if !used[name] {
			t.Errorf("the table names no module %s: drop it from external", name)
		}
	}

	for _, dir := range slices.Sorted(maps.Keys(imports)) {
		i := rowOf(dir)
		if i < 0 {
			t.Errorf("package %s has no row (nor has a parent directory of it)", dir)
			continue
		}
		a := allowed[i]
		for _, imp := range imports[dir] {
			switch {
			case !strings.Contains(strings.Split(imp, "/")[0], "."):
				// the standard library
			case imp == module || strings.HasPrefix(imp, module+"/"):
				j := rowOf(strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"))
				if j != i && !a.rows[j] {
					name := "no row"
					if j >= 0 {
						name = "row " + rows[j].dir
					}
					t.Errorf("%s (row %s) imports %s (%s), which row %s does not name", dir, rows[i].dir, imp, name, rows[i].dir)
				}
			case !slices.ContainsFunc(a.external, func(p string) bool { return imp == p || strings.HasPrefix(imp, p+"/") }):
				t.Errorf("%s (row %s) imports %s, a module row %s does not name", dir, rows[i].dir, imp, rows[i].dir)
			}
		}
	}
}

// An allowance is what a row's packages may import besides their own
// row's and the standard library.
type allowance struct {
	rows     map[int]bool // by index in the table
	external []string     // import path prefixes
}

var backticked = regexp.MustCompile("`([^`]*)`")

// allow reads row i's cell; allowed holds the allowances of the rows
// below it.
func allow(t *testing.T, rows []row, i int, index map[string]int, allowed []allowance, used map[string]bool) allowance {
	a := allowance{rows: map[int]bool{}}
	switch cell := rows[i].cell; cell {
	case everythingBelow:
		for j := i + 1; j < len(rows); j++ {
			a.rows[j] = true
			for k := range allowed[j].rows {
				a.rows[k] = true
			}
			a.external = append(a.external, allowed[j].external...)
		}
	case standardLibrary, testsOnly:
	default:
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			dir := strings.TrimSuffix(m[1], "/")
			if rest, ok := strings.CutPrefix(dir, "sdk/"); ok {
				dir = "plugins/sdk/" + rest
			}
			j, ok := index[dir]
			if !ok {
				t.Errorf("row %s may import `%s`, which is no row of the table", rows[i].dir, m[1])
				continue
			}
			a.rows[j] = true
		}
		text := backticked.ReplaceAllString(cell, "")
		for name, paths := range external {
			if regexp.MustCompile(`(^|[\s,(])` + regexp.QuoteMeta(name) + `($|[\s,)])`).MatchString(text) {
				used[name] = true
				a.external = append(a.external, paths...)
			}
		}
	}
	return a
}

// packageTable reads the rows of the table under "## Packages and their
// duties".
func packageTable(t *testing.T, path string) []row {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# "), strings.HasPrefix(line, "## "):
			in = strings.TrimLeft(line, "# ") == "Packages and their duties"
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			if len(cells) != 3 {
				t.Fatalf("a row of %d cells: %s", len(cells), line)
			}
			name := strings.Trim(cells[0], "`")
			rows = append(rows, row{dir: strings.TrimSuffix(name, "/"), cell: strings.TrimSpace(cells[2])})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no package table", path)
	}
	return rows
}

// packages lists the packages of every module of the repository (a
// directory with a go.mod, testdata and node_modules aside), by
// directory, with what their non-test files import.
func packages(t *testing.T, root string) map[string][]string {
	var modules []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			modules = append(modules, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range modules {
		cmd := exec.Command("go", "list", "-f", `{{.Dir}}{{"\t"}}{{join .Imports " "}}`, "./...")
		cmd.Dir = m
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", m, err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			dir, imps, _ := strings.Cut(line, "\t")
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.ToSlash(rel)] = strings.Fields(imps)
		}
	}
	return out
}
