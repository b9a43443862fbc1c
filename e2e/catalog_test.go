package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// adminReply is an answer of the admin API.
type adminReply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r adminReply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("admin answer %d is not a JSON object: %v: %s", r.Status, err, r.Body)
	}
	return m
}

// admin calls the gateway's admin API; hdr holds header name/value pairs.
func (g *gateway) adminCall(method, path, body string, hdr ...string) adminReply {
	g.t.Helper()
	req, err := http.NewRequest(method, g.AdminURL+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return adminReply{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func (g *gateway) wantAdmin(want int, method, path, body string, hdr ...string) adminReply {
	g.t.Helper()
	r := g.adminCall(method, path, body, hdr...)
	if r.Status != want {
		g.t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// catalogHandler is the crank directive's catalog subdirective for the
// catalog name, whose entries may reach up (and the upstreams listed) and
// use the test token.
func catalogHandler(name string, up *upstream, upstreams ...string) string {
	return fmt.Sprintf("catalog %s {\n\t\t\tupstreams %s %s\n\t\t\tplaceholders env.CRANK_E2E_TOKEN\n\t\t}",
		name, up.URL, strings.Join(upstreams, " "))
}

func catalogEntry(up *upstream, name, description string) string {
	return fmt.Sprintf(`{"name": %q, "description": %q, "adapter": "rest",
		"input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
		"config": {"method": "GET", "url": "%s/users/{id}", "headers": {"X-Token": "{env.CRANK_E2E_TOKEN}"}}}`, name, description, up.URL)
}

func toolDescription(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string) (string, bool) {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == name {
			return tl.Description, true
		}
	}
	return "", false
}

// Two replicas share one etcd and serve the catalog "shared" beside
// their file: an operation created, updated, rolled back and deleted
// through replica A's admin API is served by replica B without a
// reload, B's client hears tools/list_changed, and a concurrent update
// loses with 409.
func TestCatalogAcrossReplicas(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := newUpstream(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: opsFile(t, up, "2s", ""), Handler: catalogHandler("shared", up),
			Env: []string{"CRANK_E2E_TOKEN=" + secretToken},
			Crank: fmt.Sprintf(`etcd {
			%s
			replica_name %s
		}
		catalog_history 10`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "crank-e2e-catalog", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.MCPURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	awaitChange := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no tools/list_changed on B after %s", what)
		}
	}

	// Create on A: B's client is told and can call it.
	written := time.Now()
	r := a.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/shared/operations?message=first", catalogEntry(up, "cat_user", "v1"),
		"If-None-Match", "*", "X-Crank-Operator", "alice")
	if r.Header.Get("ETag") != `"1"` {
		t.Fatalf("ETag %q after the first version", r.Header.Get("ETag"))
	}
	awaitChange("the create")
	t.Logf("B's client heard tools/list_changed %s after A's write began", time.Since(written))
	waitFor(t, "B to list cat_user", func() bool { _, ok := toolDescription(t, ctx, cs, "cat_user"); return ok })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cat_user", Arguments: map[string]any{"id": 7}})
	if err != nil || res.IsError {
		t.Fatalf("cat_user on B: %v %s", err, textOf(res))
	}
	if !strings.Contains(textOf(res), "User 7") {
		t.Fatalf("cat_user answered %s", textOf(res))
	}
	if _, ok := toolDescription(t, ctx, cs, "get_user"); !ok {
		t.Fatal("the file's tools are gone")
	}

	// Secrets stay placeholders in what is stored and returned.
	got := a.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/shared/operations/cat_user", "")
	if !strings.Contains(string(got.Body), "{env.CRANK_E2E_TOKEN}") || strings.Contains(string(got.Body), secretToken) {
		t.Fatalf("the stored entry does not keep its placeholder: %s", got.Body)
	}

	// Update (a merge patch), then a concurrent update from the same
	// version loses with 409 and the current version.
	a.wantAdmin(http.StatusOK, "PATCH", "/crank/catalogs/shared/operations/cat_user", `{"description": "v2"}`, "If-Match", `"1"`)
	awaitChange("the update")
	waitFor(t, "B to serve v2", func() bool { d, _ := toolDescription(t, ctx, cs, "cat_user"); return d == "v2" })
	stale := b.wantAdmin(http.StatusConflict, "PATCH", "/crank/catalogs/shared/operations/cat_user", `{"description": "lost"}`, "If-Match", `"1"`)
	if cur := stale.json(t)["current_version"]; cur != float64(2) {
		t.Fatalf("409 names current version %v, want 2: %s", cur, stale.Body)
	}

	// Two writers racing from one version: exactly one wins.
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, g := range []*gateway{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = g.adminCall("PATCH", "/crank/catalogs/shared/operations/cat_user", fmt.Sprintf(`{"title": "writer %d"}`, i), "If-Match", `"2"`).Status
		}()
	}
	wg.Wait()
	slices.Sort(statuses)
	if statuses[0] != http.StatusOK || statuses[1] != http.StatusConflict {
		t.Fatalf("racing writers got %v, want one 200 and one 409", statuses)
	}
	awaitChange("the racing update")

	// Roll back to version 1: a new version with version 1's content.
	rb := a.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/shared/rollback?version=1", "", "If-Match", `"3"`)
	if v := rb.json(t)["catalog"].(map[string]any)["version"]; v != float64(4) {
		t.Fatalf("rollback wrote version %v, want 4", v)
	}
	awaitChange("the rollback")
	waitFor(t, "B to serve v1 again", func() bool { d, _ := toolDescription(t, ctx, cs, "cat_user"); return d == "v1" })

	// The history and diffs say what happened.
	vs := a.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/shared/versions", "").json(t)["versions"].([]any)
	var actions []string
	for _, v := range vs {
		m := v.(map[string]any)
		actions = append(actions, fmt.Sprint(m["version"], ":", m["action"]))
	}
	if want := []string{"4:rollback", "3:patch", "2:patch", "1:create"}; !slices.Equal(actions, want) {
		t.Fatalf("versions %v, want %v", actions, want)
	}
	if first := vs[3].(map[string]any); first["operator"] != "alice" || first["message"] != "first" || first["author"] != "admin" {
		t.Fatalf("version 1 record: %v", first)
	}
	diff := a.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/shared/diff?from=1&to=2", "").json(t)
	changes := diff["changes"].([]any)
	fields := changes[0].(map[string]any)["fields"].([]any)
	if f := fields[0].(map[string]any); len(changes) != 1 || f["pointer"] != "/description" || f["from"] != "v1" || f["to"] != "v2" {
		t.Fatalf("diff 1→2: %s", diff)
	}
	if d := a.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/shared/diff?from=1&to=4", "").json(t); len(d["changes"].([]any)) != 0 {
		t.Fatalf("the rollback differs from version 1: %v", d)
	}

	// Delete it: B's client is told and the tool is gone.
	a.wantAdmin(http.StatusOK, "DELETE", "/crank/catalogs/shared/operations/cat_user", "", "If-Match", `"4"`)
	awaitChange("the delete")
	waitFor(t, "B to drop cat_user", func() bool { _, ok := toolDescription(t, ctx, cs, "cat_user"); return !ok })

	// A call already running when its operation is deleted finishes on
	// the version it started on.
	a.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/shared/operations",
		fmt.Sprintf(`{"name": "cat_slow", "description": "5s", "adapter": "rest", "timeout": "30s", "config": {"method": "GET", "url": "%s/slow"}}`, up.URL),
		"If-Match", `"5"`)
	awaitChange("the slow create")
	waitFor(t, "B to list cat_slow", func() bool { _, ok := toolDescription(t, ctx, cs, "cat_slow"); return ok })
	slowDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cat_slow"})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		slowDone <- res
	}()
	<-up.slowStarted
	a.wantAdmin(http.StatusOK, "DELETE", "/crank/catalogs/shared/operations/cat_slow", "", "If-Match", `"6"`)
	awaitChange("the slow delete")
	if res := <-slowDone; res.IsError || !strings.Contains(textOf(res), "slow") {
		t.Fatalf("the running call did not finish on its version: %s", textOf(res))
	}

	// Both replicas report the version they serve.
	for _, g := range []*gateway{a, b} {
		waitFor(t, "the replica to serve version 7", func() bool {
			eps := g.wantAdmin(http.StatusOK, "GET", "/crank/endpoints", "").json(t)["endpoints"].([]any)
			s, _ := eps[0].(map[string]any)["serving"].(map[string]any)
			return s != nil && s["version"] == float64(7)
		})
	}
}

// Bad input is refused with a 4xx naming the field, and nothing is saved.
func TestCatalogBadInput(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Handler: catalogHandler("bad", up)})
	g.wantAdmin(http.StatusCreated, "POST", "/crank/catalogs/bad/operations", catalogEntry(up, "ok_user", "fine"), "If-None-Match", "*")

	problem := func(r adminReply) (pointer, message string) {
		t.Helper()
		ps, _ := r.json(t)["errors"].([]any)
		if len(ps) == 0 {
			t.Fatalf("no problems in %d: %s", r.Status, r.Body)
		}
		p := ps[0].(map[string]any)
		return fmt.Sprint(p["pointer"]), fmt.Sprint(p["message"])
	}
	for _, c := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		pointer, message         string
	}{
		{"malformed JSON", "POST", "/crank/catalogs/bad/operations", `{"name": "x",`, []string{"If-Match", `"1"`},
			http.StatusBadRequest, "", ""},
		{"malformed YAML", "PUT", "/crank/catalogs/bad", "operations:\n  - name: [x\n", []string{"If-Match", `"1"`},
			http.StatusBadRequest, "", ""},
		{"unknown field", "POST", "/crank/catalogs/bad/operations", `{"name": "x", "description": "d", "adapter": "rest", "timeuot": "1s", "config": {}}`,
			[]string{"If-Match", `"1"`}, http.StatusBadRequest, "/timeuot", "unknown field"},
		{"wrong type", "PUT", "/crank/catalogs/bad", "version: 1\noperations:\n  - name: x\n    description: d\n    adapter: rest\n    timeout: [1]\n    config: {}\n",
			[]string{"If-Match", `"1"`}, http.StatusBadRequest, "/operations/0/timeout", ""},
		{"adapter rejects the config", "POST", "/crank/catalogs/bad/operations",
			`{"name": "x", "description": "d", "adapter": "rest", "config": {"method": "FETCH", "url": "` + up.URL + `/"}}`,
			[]string{"If-Match", `"1"`}, http.StatusUnprocessableEntity, "/config/method", "unknown method"},
		{"clash with a file tool", "POST", "/crank/catalogs/bad/operations", catalogEntry(up, "get_user", "clash"),
			[]string{"If-Match", `"1"`}, http.StatusUnprocessableEntity, "/name", "ops.yaml"},
		{"adapter executables", "PUT", "/crank/catalogs/bad", "version: 1\nadapters:\n  evil: {command: /bin/sh}\noperations: []\n",
			[]string{"If-Match", `"1"`}, http.StatusBadRequest, "/adapters", "cannot declare adapter executables"},
		{"stale version", "POST", "/crank/catalogs/bad/operations", catalogEntry(up, "y", "d"), []string{"If-Match", `"0"`},
			http.StatusConflict, "", ""},
		{"no version", "POST", "/crank/catalogs/bad/operations", catalogEntry(up, "y", "d"), nil,
			http.StatusPreconditionRequired, "", ""},
		{"bad catalog name", "GET", "/crank/catalogs/no%20space", "", nil, http.StatusBadRequest, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := g.adminCall(c.method, c.path, c.body, c.hdr...)
			if r.Status != c.status {
				t.Fatalf("%d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.pointer != "" || c.message != "" {
				p, m := problem(r)
				if p != c.pointer || !strings.Contains(m, c.message) {
					t.Fatalf("problem %s: %q, want %s: %q (%s)", p, m, c.pointer, c.message, r.Body)
				}
			}
			if e := r.json(t)["error"]; e == "" || e == nil {
				t.Fatalf("no error message: %s", r.Body)
			}
		})
	}
	big := `{"name": "big", "description": "` + strings.Repeat("x", 3<<20) + `", "adapter": "rest", "config": {}}`
	g.wantAdmin(http.StatusRequestEntityTooLarge, "POST", "/crank/catalogs/bad/operations", big, "If-Match", `"1"`)

	// Nothing was saved.
	head := g.wantAdmin(http.StatusOK, "GET", "/crank/catalogs/bad", "").json(t)["catalog"].(map[string]any)
	if head["version"] != float64(1) || head["operations"] != float64(1) {
		t.Fatalf("a refused change was saved: %v", head)
	}
	// Validation without saving reports the same problems.
	v := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/bad/validate", "version: 1\noperations:\n  - name: get_user\n    description: d\n    adapter: rest\n    config: {method: GET, url: \"http://127.0.0.1:1/\"}\n").json(t)
	if v["valid"] != false || !strings.Contains(fmt.Sprint(v["errors"]), "/operations/0/name") {
		t.Fatalf("validate: %v", v)
	}
}

// Test runs answer what a client would get and leave nothing open: a
// window's chunks and flags, a session started, polled and stopped, a
// job followed to its end — checked in etcd.
func TestCatalogTestRuns(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := newUpstream(t)
	feed := newFeedUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Handler: catalogHandler("runs", up, feed.URL),
		Crank: fmt.Sprintf("etcd {\n%s\n}", etcd.Caddyfile())})
	doc := fmt.Sprintf(`version: 1
operations:
  - name: tail
    description: A window over the feed.
    adapter: rest
    mode: window
    limits: {window_duration_ms: 10000, max_items: 4}
    config: {method: GET, url: "%[1]s/feed"}
  - name: follow
    description: Follow the feed.
    adapter: rest
    mode: session
    limits: {idle_timeout_ms: 60000}
    config: {method: GET, url: "%[1]s/feed"}
  - name: export
    description: A slow export.
    adapter: rest
    mode: async_job
    input_schema: {type: object, properties: {ms: {type: integer}}, required: [ms]}
    config: {method: GET, url: "%[1]s/job", query: [ms]}
`, feed.URL)
	g.wantAdmin(http.StatusCreated, "PUT", "/crank/catalogs/runs", doc, "If-None-Match", "*")

	win := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/runs/test", `{"operation": "tail"}`).json(t)
	if win["truncated"] != true || win["end_reason"] != "max_items" || win["window_complete"] != false || len(win["progress"].([]any)) != 4 {
		t.Fatalf("window test run: %v", win)
	}
	if !strings.Contains(fmt.Sprint(win["warnings"]), "window cut by max_items") {
		t.Fatalf("window test run warnings: %v", win["warnings"])
	}

	// A draft is run without being saved.
	draft := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/runs/test",
		`{"entry": {"name": "draft", "description": "d", "adapter": "rest", "config": {"method": "GET", "url": "`+up.URL+`/users/{id}"},
		  "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}, "arguments": {"id": 3}}`).json(t)
	if draft["is_error"] != false || !strings.Contains(fmt.Sprint(draft["result"]), "User 3") || draft["saved"] != false {
		t.Fatalf("draft test run: %v", draft)
	}

	sess := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/runs/test", `{"operation": "follow", "polls": 3, "poll_interval_ms": 100}`).json(t)
	steps := sess["steps"].([]any)
	if len(steps) != 5 || steps[4].(map[string]any)["tool"] != "follow_stop" || len(sess["progress"].([]any)) == 0 {
		t.Fatalf("session test run: %v", sess)
	}
	job := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/runs/test", `{"operation": "export", "arguments": {"ms": 50}, "poll_interval_ms": 50}`).json(t)
	if !strings.Contains(fmt.Sprint(job["result"]), "rows") || job["is_error"] != false {
		t.Fatalf("job test run: %v", job)
	}
	slow := g.wantAdmin(http.StatusOK, "POST", "/crank/catalogs/runs/test", `{"operation": "export", "arguments": {"ms": 600000}, "timeout_ms": 500}`).json(t)
	if !strings.Contains(fmt.Sprint(slow["warnings"]), "cancelled") {
		t.Fatalf("a job past the time limit: %v", slow)
	}

	// Nothing stays open, as etcd counts it.
	st, err := store.NewEtcd(context.Background(), etcd.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitFor(t, "no open session or job in etcd", func() bool {
		c, err := st.CountLive(context.Background(), "default")
		return err == nil && c.StreamSessions == 0 && c.Jobs == 0
	})
	live := g.wantAdmin(http.StatusOK, "GET", "/crank/live/default", "").json(t)["counts"].(map[string]any)
	if live["stream_sessions"] != float64(0) || live["jobs"] != float64(0) {
		t.Fatalf("live counts: %v", live)
	}
}

// crank ops round-trips the demo's operations files: apply a file to an
// empty catalog, export it, apply the export to another empty catalog:
// the same tools are listed.
func TestOpsCLIRoundTrip(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: opsFile(t, up, "2s", ""), Handler: catalogHandler("copy", up, "http://127.0.0.1:8081/streams/")})
	addr := strings.TrimPrefix(g.AdminURL, "http://")
	ops := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(crankBin, append([]string{"ops", "--address", addr, "--operator", "ci"}, args...)...)
		cmd.Dir = filepath.Join(repoRoot, "demo")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("crank ops %v: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return out.String()
	}
	dir := t.TempDir()
	for _, file := range []string{"operations.yaml", "families.yaml", "streams.yaml"} {
		name := strings.TrimSuffix(file, ".yaml")
		copyName := name + "-copy"
		if name == "streams" {
			copyName = "copy" // the catalog the handler serves
		}
		ops("apply", name, filepath.Join(repoRoot, "demo", file))
		export := ops("get", name)
		path := filepath.Join(dir, file)
		writeFile(t, path, export)
		ops("apply", copyName, path)
		orig, cp := ops("list", name), ops("list", copyName)
		if orig != cp || orig == "" {
			t.Fatalf("%s: tools differ after the round trip:\n%s\nvs\n%s", file, orig, cp)
		}
		if again := ops("get", copyName); again != export {
			t.Fatalf("%s: the export of the copy differs:\n%s\nvs\n%s", file, again, export)
		}
	}
	// The catalog a handler serves is the one its clients list.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	waitFor(t, "the copy's tools on the endpoint", func() bool { _, ok := toolDescription(t, ctx, cs, "tail_logs"); return ok })
	if out := ops("versions", "copy"); !strings.Contains(out, "ci") {
		t.Fatalf("versions do not name the operator: %s", out)
	}
}
