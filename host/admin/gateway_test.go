package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestMain: with CRANK_ADMIN_TEST_ADAPTER=rest this test binary serves
// the real REST adapter (the adapter process of the tests' hosts).
func TestMain(m *testing.M) {
	if os.Getenv("CRANK_ADMIN_TEST_ADAPTER") == "rest" {
		if err := sdk.Serve(rest.New()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// adapters hands out one supervisor of the REST adapter (this binary).
type adapters struct {
	mu  sync.Mutex
	sup *host.Supervisor
}

func (a *adapters) get(t testing.TB) func(string) (*host.Supervisor, error) {
	return func(name string) (*host.Supervisor, error) {
		if name != "rest" {
			return nil, fmt.Errorf("no adapter named %q", name)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.sup == nil {
			exe, err := os.Executable()
			if err != nil {
				return nil, err
			}
			a.sup = host.NewSupervisor(host.AdapterSpec{Name: "rest", Command: exe, Env: []string{"CRANK_ADMIN_TEST_ADAPTER=rest"}},
				host.SupervisorOptions{HealthInterval: -1})
			t.Cleanup(func() { a.sup.Close() })
		}
		return a.sup, nil
	}
}

// endpoint is a crank handler serving catalog "served" beside a file
// with the tool file_tool.
type endpoint struct {
	files *opsfile.File
	st    *store.Etcd
	ad    func(string) (*host.Supervisor, error)
	// serving is the host it serves (nil: none yet).
	serving *host.Host
}

func (e *endpoint) Serving() *host.Host { return e.serving }

func (e *endpoint) Info() admin.EndpointInfo {
	return admin.EndpointInfo{ID: "0", Workspace: "default", Files: []string{"ops.yaml"}, Catalog: "served"}
}

func (e *endpoint) Build(ctx context.Context, doc *catalog.Document, files bool) (*host.Host, error) {
	cat, _ := opsfile.Merge()
	if files {
		cat = e.files
	}
	if doc != nil {
		dc, err := doc.Compile("catalog served", opsfile.LoadOptions{Allow: loopback})
		if err != nil {
			return nil, err
		}
		if cat, err = opsfile.Merge(cat, dc); err != nil {
			return nil, err
		}
	}
	return host.New(ctx, host.Options{File: cat, Store: e.st, Adapter: e.ad})
}

// loopback lets the test catalogs reach the test upstreams and use
// environment variables.
var loopback = &opsfile.CatalogAllow{Upstreams: []string{"127.0.0.1"}, Placeholders: []string{"env.*"}}

type fixture struct {
	t     *testing.T
	ep    *endpoint
	srv   *httptest.Server
	st    *store.Etcd
	up    *httptest.Server
	audit *observer.ObservedLogs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, st := storetest.Embedded(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path": %q}`, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	ad := (&adapters{}).get(t)
	files, err := opsfile.Parse("ops.yaml", []byte(`version: 1
operations:
  - name: file_tool
    description: From the file.
    adapter: rest
    config: {method: GET, url: "`+up.URL+`/file"}
`), opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	ep := &endpoint{files: files, st: st, ad: ad}
	g := &admin.Gateway{Store: st, History: 3, Endpoints: []admin.Endpoint{ep},
		Audit: zap.New(core)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.ServeHTTP(w, r); err != nil {
			var e *admin.Error
			if !errors.As(err, &e) {
				t.Errorf("not an *admin.Error: %v", err)
				return
			}
			admin.WriteError(w, e)
		}
	}))
	t.Cleanup(srv.Close)
	return &fixture{t: t, ep: ep, srv: srv, st: st, up: up, audit: logs}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%d: not a JSON object: %s", r.status, r.body)
	}
	return m
}

func (f *fixture) do(method, path, body string, hdr ...string) reply {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, data}
}

func (f *fixture) want(status int, method, path, body string, hdr ...string) reply {
	f.t.Helper()
	r := f.do(method, path, body, hdr...)
	if r.status != status {
		f.t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, status, r.body)
	}
	return r
}

func (f *fixture) entry(name, desc string) string {
	return fmt.Sprintf(`{"name": %q, "description": %q, "adapter": "rest", "config": {"method": "GET", "url": "%s/%s", "headers": {"X-Key": "{env.SECRET_KEY}"}}}`,
		name, desc, f.up.URL, name)
}

func firstProblem(t *testing.T, r reply) (string, string) {
	t.Helper()
	ps, _ := r.obj(t)["errors"].([]any)
	if len(ps) == 0 {
		t.Fatalf("no problems: %s", r.body)
	}
	p := ps[0].(map[string]any)
	return fmt.Sprint(p["pointer"]), fmt.Sprint(p["message"])
}

func TestCatalogLifecycle(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/c1", "")
	f.want(http.StatusPreconditionRequired, "POST", "/crank/catalogs/c1/operations", f.entry("a", "A"))
	r := f.want(http.StatusCreated, "POST", "/crank/catalogs/c1/operations?message=hi", f.entry("a", "A"), "If-None-Match", "*", "X-Crank-Operator", "bob")
	if r.header.Get("ETag") != `"1"` {
		t.Fatalf("ETag %q", r.header.Get("ETag"))
	}
	// Creating it again, or an operation of the same name, is a conflict.
	f.want(http.StatusConflict, "POST", "/crank/catalogs/c1/operations", f.entry("b", "B"), "If-None-Match", "*")
	f.want(http.StatusConflict, "POST", "/crank/catalogs/c1/operations", f.entry("a", "A"), "If-Match", `"1"`)
	f.want(http.StatusCreated, "PUT", "/crank/catalogs/c1/operations/b", f.entry("b", "B"), "If-Match", `"1"`)

	got := f.want(http.StatusOK, "GET", "/crank/catalogs/c1", "").obj(t)
	if ops := got["operations"].([]any); len(ops) != 2 || got["catalog"].(map[string]any)["version"] != float64(2) {
		t.Fatalf("catalog: %v", got)
	}
	yml := f.want(http.StatusOK, "GET", "/crank/catalogs/c1?format=yaml", "")
	if !strings.Contains(string(yml.body), "{env.SECRET_KEY}") || !strings.HasPrefix(string(yml.body), "version: 1\n") {
		t.Fatalf("export: %s", yml.body)
	}
	// The export reads back as the same catalog.
	f.want(http.StatusCreated, "PUT", "/crank/catalogs/c2?import=true", string(yml.body), "If-None-Match", "*")
	if d := f.want(http.StatusOK, "GET", "/crank/catalogs/c2?format=yaml", "").body; string(d) != string(yml.body) {
		t.Fatalf("the import of an export differs:\n%s\nvs\n%s", d, yml.body)
	}

	// Patch with a merge patch; a field set to null goes.
	f.want(http.StatusOK, "PATCH", "/crank/catalogs/c1/operations/a", `{"title": "Aa", "timeout": "3s"}`, "If-Match", `"2"`)
	f.want(http.StatusOK, "PATCH", "/crank/catalogs/c1/operations/a", `{"timeout": null}`, "If-Match", `"3"`)
	a := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/operations/a", "").obj(t)
	if a["title"] != "Aa" || a["timeout"] != nil {
		t.Fatalf("patched entry: %v", a)
	}
	// Rename through a replace.
	f.want(http.StatusOK, "PUT", "/crank/catalogs/c1/operations/b", f.entry("b2", "B"), "If-Match", `"4"`)
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/c1/operations/b", "")
	f.want(http.StatusOK, "DELETE", "/crank/catalogs/c1/operations/b2", "", "If-Match", `"5"`)

	// History keeps 3 versions; the list pages newest first.
	page := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/versions?limit=2", "").obj(t)
	vs := page["versions"].([]any)
	if len(vs) != 2 || vs[0].(map[string]any)["version"] != float64(6) || page["next_before"] != float64(5) {
		t.Fatalf("versions page: %v", page)
	}
	all := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/versions", "").obj(t)["versions"].([]any)
	if len(all) != 3 {
		t.Fatalf("kept %d versions, want 3", len(all))
	}
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/c1/versions/1", "")
	v4 := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/versions/4", "").obj(t)
	if len(v4["operations"].([]any)) != 2 || v4["version"].(map[string]any)["action"] != "patch" {
		t.Fatalf("version 4: %v", v4)
	}

	// Roll back to 4: version 7 with 4's content.
	f.want(http.StatusPreconditionRequired, "POST", "/crank/catalogs/c1/rollback", `{"version": 4}`)
	f.want(http.StatusBadRequest, "POST", "/crank/catalogs/c1/rollback", `{"version": 0}`, "If-Match", `"6"`)
	f.want(http.StatusOK, "POST", "/crank/catalogs/c1/rollback", `{"version": 4}`, "If-Match", `"6"`)
	// (version 4 itself is gone now: the history keeps 3.)
	v7 := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/versions/7", "").obj(t)
	if a, b := fmt.Sprint(v7["operations"]), fmt.Sprint(v4["operations"]); a != b || v7["version"].(map[string]any)["rollback_of"] != float64(4) {
		t.Fatalf("rollback differs: %v vs %v", v7, v4)
	}
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/c1/diff?from=4&to=7", "")
	d := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/diff", "").obj(t)
	if ch := d["changes"].([]any); len(ch) != 1 || ch[0].(map[string]any)["change"] != "added" || d["from"] != float64(6) {
		t.Fatalf("diff of the last change: %v", d)
	}

	// Delete the catalog (a version), then purge it.
	f.want(http.StatusOK, "DELETE", "/crank/catalogs/c1", "", "If-Match", `"7"`)
	head := f.want(http.StatusOK, "GET", "/crank/catalogs/c1", "").obj(t)["catalog"].(map[string]any)
	if head["deleted"] != true {
		t.Fatalf("after delete: %v", head)
	}
	f.want(http.StatusNotFound, "DELETE", "/crank/catalogs/c1", "", "If-Match", `"8"`)
	f.want(http.StatusNoContent, "DELETE", "/crank/catalogs/c1?purge=true", "", "If-Match", `"8"`)
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/c1", "")
	// The catalog a handler serves cannot be purged.
	f.want(http.StatusCreated, "POST", "/crank/catalogs/served/operations", f.entry("s", "S"), "If-None-Match", "*")
	f.want(http.StatusConflict, "DELETE", "/crank/catalogs/served?purge=true", "", "If-Match", "*")

	list := f.want(http.StatusOK, "GET", "/crank/catalogs", "").obj(t)["catalogs"].([]any)
	if len(list) != 2 {
		t.Fatalf("catalogs: %v", list)
	}
	// Every change was audited with the caller and the operator.
	if n := f.audit.FilterField(zap.String("operator", "bob")).FilterField(zap.String("event", "catalog.create")).Len(); n != 1 {
		t.Fatalf("%d audit records of bob's create", n)
	}
	if n := f.audit.FilterField(zap.String("event", "admin.refused")).Len(); n < 5 {
		t.Fatalf("%d audit records of refused changes", n)
	}
}

// Two writers from one version: one wins, the other gets 409 with the
// current version, and the winner's change is the one kept.
func TestCatalogConcurrentWriters(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusCreated, "POST", "/crank/catalogs/c/operations", f.entry("a", "A"), "If-None-Match", "*")
	const writers = 6
	var wg sync.WaitGroup
	results := make([]reply, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = f.do("PATCH", "/crank/catalogs/c/operations/a", fmt.Sprintf(`{"title": "w%d"}`, i), "If-Match", `"1"`)
		}()
	}
	wg.Wait()
	won := ""
	for i, r := range results {
		switch r.status {
		case http.StatusOK:
			if won != "" {
				t.Fatalf("two writers won")
			}
			won = fmt.Sprintf("w%d", i)
		case http.StatusConflict:
			if cur := r.obj(t)["current_version"]; cur != float64(2) {
				t.Fatalf("409 with current version %v", cur)
			}
		default:
			t.Fatalf("writer %d: %d %s", i, r.status, r.body)
		}
	}
	if a := f.want(http.StatusOK, "GET", "/crank/catalogs/c/operations/a", "").obj(t); a["title"] != won {
		t.Fatalf("kept %v, the winner wrote %s", a["title"], won)
	}
}

func TestCatalogProblems(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusCreated, "POST", "/crank/catalogs/served/operations", f.entry("a", "A"), "If-None-Match", "*")
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		pointer, message         string
	}{
		{"yaml syntax", "PUT", "/crank/catalogs/served", "operations:\n  - name: [x\n", http.StatusBadRequest, "", ""},
		{"not a mapping", "PUT", "/crank/catalogs/served", "[1, 2]", http.StatusBadRequest, "", "must be an object"},
		{"unknown field", "PUT", "/crank/catalogs/served", "operations:\n  - name: x\n    descripton: d\n", http.StatusBadRequest,
			"/operations/0/descripton", "unknown field"},
		{"wrong type", "POST", "/crank/catalogs/served/operations", `{"name": 5, "description": "d", "adapter": "rest", "config": {}}`,
			http.StatusBadRequest, "/name", ""},
		{"no name", "POST", "/crank/catalogs/served/operations", `{"description": "d", "adapter": "rest", "config": {}}`,
			http.StatusBadRequest, "/name", "required"},
		{"adapter config", "POST", "/crank/catalogs/served/operations",
			`{"name": "x", "description": "d", "adapter": "rest", "config": {"method": "GET", "url": "ftp://h/"}}`,
			http.StatusUnprocessableEntity, "/config/url", "scheme"},
		{"value outside the schema", "POST", "/crank/catalogs/served/operations",
			`{"name": "x", "description": "d", "adapter": "rest", "mode": "sideways", "config": {}}`,
			http.StatusBadRequest, "/mode", "must be one of"},
		{"host check", "POST", "/crank/catalogs/served/operations",
			`{"name": "x", "description": "d", "adapter": "rest", "mode": "window", "aggregation": {"aggregation_mode": "stats"}, "config": {}}`,
			http.StatusUnprocessableEntity, "/aggregation/value_path", "is required"},
		{"clash with a file", "POST", "/crank/catalogs/served/operations", f.entry("file_tool", "F"),
			http.StatusUnprocessableEntity, "/name", "ops.yaml"},
		{"bad patch", "PATCH", "/crank/catalogs/served/operations/a", `[1]`, http.StatusBadRequest, "", "JSON merge patch"},
		{"patch to a bad entry", "PATCH", "/crank/catalogs/served/operations/a", `{"timeout": 5}`, http.StatusBadRequest, "/timeout", ""},
		{"patch to an entry the host refuses", "PATCH", "/crank/catalogs/served/operations/a", `{"limits": {"max_items": 3}}`,
			http.StatusUnprocessableEntity, "/limits", "only applies"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(c.method, c.path, c.body, "If-Match", `"1"`)
			if r.status != c.status {
				t.Fatalf("%d, want %d: %s", r.status, c.status, r.body)
			}
			p, m := firstProblem(t, r)
			if c.pointer != "" && p != c.pointer || !strings.Contains(m, c.message) {
				t.Fatalf("%s: %q, want %s: %q", p, m, c.pointer, c.message)
			}
		})
	}
	f.want(http.StatusRequestEntityTooLarge, "PUT", "/crank/catalogs/served", strings.Repeat("#", admin.MaxBody+1), "If-Match", `"1"`)
	f.want(http.StatusBadRequest, "PUT", "/crank/catalogs/served", "version: 1\n", "If-Match", `"x"`)
	if v := f.want(http.StatusOK, "GET", "/crank/catalogs/served", "").obj(t)["catalog"].(map[string]any)["version"]; v != float64(1) {
		t.Fatalf("a refused change was saved: version %v", v)
	}

	// Validation without saving: a whole file, and one entry in place.
	v := f.want(http.StatusOK, "POST", "/crank/catalogs/served/validate",
		"version: 1\noperations:\n  - name: ok\n    description: d\n    adapter: rest\n    config: {method: GET, url: \"http://h/\"}\n  - name: file_tool\n    description: d\n    adapter: rest\n    config: {method: GET, url: \"http://h/\"}\n").obj(t)
	if v["valid"] != false || !strings.Contains(fmt.Sprint(v["errors"]), "line:7") || !strings.Contains(fmt.Sprint(v["errors"]), "/operations/1/name") {
		t.Fatalf("validate file: %v", v)
	}
	e := f.want(http.StatusOK, "POST", "/crank/catalogs/served/validate?operation=a",
		`{"name": "a", "description": "d", "adapter": "rest", "config": {"method": "GET", "url": "ftp://h/"}}`).obj(t)
	if e["valid"] != false || !strings.Contains(fmt.Sprint(e["errors"]), "pointer:/config/url") {
		t.Fatalf("validate entry: %v", e)
	}
	ok := f.want(http.StatusOK, "POST", "/crank/catalogs/other/validate", "version: 1\noperations: []\n").obj(t)
	if ok["valid"] != true {
		t.Fatalf("validate empty: %v", ok)
	}
}

func TestGatewayRoutes(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusNotFound, "GET", "/crank/nothing", "")
	f.want(http.StatusMethodNotAllowed, "POST", "/crank/catalogs", "")
	f.want(http.StatusBadRequest, "GET", "/crank/catalogs/bad%20name", "")
	f.want(http.StatusBadRequest, "GET", "/crank/catalogs?limit=0", "")
	eps := f.want(http.StatusOK, "GET", "/crank/endpoints", "").obj(t)["endpoints"].([]any)
	if len(eps) != 1 || eps[0].(map[string]any)["catalog"] != "served" {
		t.Fatalf("endpoints: %v", eps)
	}

	// Without a store (the app has not started) only endpoints answer.
	g := &admin.Gateway{}
	w := httptest.NewRecorder()
	err := g.ServeHTTP(w, httptest.NewRequest("GET", "/crank/catalogs", nil))
	var e *admin.Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("no store: %v", err)
	}
}

func TestLiveState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.PutMCPSession(ctx, store.MCPSession{ID: "mcp-1", WorkspaceID: "ws", AgentID: "user:a", ClientName: "cli", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c := f.want(http.StatusOK, "GET", "/crank/live/ws", "").obj(t)["counts"].(map[string]any)
	if c["mcp_sessions"] != float64(1) || c["jobs"] != float64(0) {
		t.Fatalf("counts: %v", c)
	}
	es := f.want(http.StatusOK, "GET", "/crank/live/ws/mcp-sessions", "").obj(t)["entries"].([]any)
	if len(es) != 1 || es[0].(map[string]any)["client"] != "cli" {
		t.Fatalf("entries: %v", es)
	}
	f.want(http.StatusNotFound, "GET", "/crank/live/ws/things", "")
	digest := es[0].(map[string]any)["id"].(string)
	f.want(http.StatusNotFound, "DELETE", "/crank/live/other/mcp-sessions/"+digest, "")
	f.want(http.StatusOK, "DELETE", "/crank/live/ws/mcp-sessions/"+digest, "")
	if _, err := f.st.GetMCPSession(ctx, "mcp-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the session is still there: %v", err)
	}
	f.want(http.StatusNotFound, "DELETE", "/crank/live/ws/jobs/job-nope", "")
}

func TestTestRun(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusCreated, "POST", "/crank/catalogs/served/operations", f.entry("a", "A"), "If-None-Match", "*")
	r := f.want(http.StatusOK, "POST", "/crank/catalogs/served/test", `{"operation": "a"}`).obj(t)
	if r["is_error"] != false || !strings.Contains(fmt.Sprint(r["result"]), "/a") || r["saved"] != true {
		t.Fatalf("saved run: %v", r)
	}
	// A draft runs in the catalog, and is not saved.
	d := f.want(http.StatusOK, "POST", "/crank/catalogs/served/test", `{"entry": `+f.entry("d", "D")+`}`).obj(t)
	if d["is_error"] != false || !strings.Contains(fmt.Sprint(d["result"]), "/d") || d["saved"] != false {
		t.Fatalf("draft run: %v", d)
	}
	if ops := f.want(http.StatusOK, "GET", "/crank/catalogs/served/operations", "").body; strings.Contains(string(ops), `"d"`) {
		t.Fatalf("the draft was saved: %s", ops)
	}
	// A catalog no handler of this replica serves has no handler's
	// catalog_allow to run it under: refused, and nothing is created.
	f.want(http.StatusConflict, "POST", "/crank/catalogs/scratch/test", `{"entry": `+f.entry("d", "D")+`}`)
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/scratch", "")
	for _, c := range []struct{ body, pointer string }{
		{`{}`, "/operation"},
		{`{"operation": "a", "entry": {}}`, "/operation"},
		{`{"operation": "a", "polls": 1000}`, "/polls"},
		{`{"operation": "a", "timeout_ms": -1}`, "/timeout_ms"},
		{`{"operation": "a", "arguments": [1]}`, "/arguments"},
		{`{"operation": "a", "arguments": {"x": 1, "x": 2}}`, "/arguments"},
		{`{"entry": {"name": "x", "bogus": 1}}`, "/entry/bogus"},
		{`{"operation": "nope"}`, "/operation"},
	} {
		r := f.do("POST", "/crank/catalogs/served/test", c.body)
		if r.status/100 != 4 {
			t.Fatalf("%s: %d %s", c.body, r.status, r.body)
		}
		if p, _ := firstProblem(t, r); p != c.pointer {
			t.Fatalf("%s: pointer %s, want %s", c.body, p, c.pointer)
		}
	}
	if n := f.audit.FilterField(zap.String("event", "catalog.test")).Len(); n != 2 {
		t.Fatalf("%d audited test runs, want 2", n)
	}
}

// The operation entry's schema is published, even before the app has
// started, and says what the host checks: defaults, bounds, enums.
func TestOperationSchemaRoute(t *testing.T) {
	w := httptest.NewRecorder()
	if err := (&admin.Gateway{}).ServeHTTP(w, httptest.NewRequest("GET", "/crank/schema/operation", nil)); err != nil || w.Code != http.StatusOK {
		t.Fatalf("schema: %v %d", err, w.Code)
	}
	var s struct {
		Required   []string
		Properties map[string]struct {
			Enum       []string
			Properties map[string]struct {
				Default json.RawMessage
				Maximum float64
			}
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	max := s.Properties["limits"].Properties["max_items"]
	if !slices.Equal(s.Required, []string{"name", "description", "adapter", "config"}) || string(max.Default) != "1000" || max.Maximum != 1_000_000 ||
		!slices.Equal(s.Properties["mode"].Enum, []string{"unary", "window", "session", "async_job"}) {
		t.Fatalf("schema: %s", w.Body)
	}
}
