package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/crankmcp/crank/internal/mcptest"
)

// chromium finds Debian's Chromium; without it the browser test is
// skipped, except in CI (.ci/run installs it), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (.ci/run installs Debian's chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// send sends req on a fresh connection (a reload replaces the servers)
// and answers the status and body.
func send(t *testing.T, req *http.Request, hdr ...string) (int, []byte) {
	t.Helper()
	req.Close = true
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// addConsoleRoute adds a route to the running config's server, through
// the admin API: the handlers before it, then crank_console.
func addConsoleRoute(t *testing.T, g *gateway, before ...string) {
	t.Helper()
	handle := strings.Join(append(before, `{"handler": "crank_console"}`), ", ")
	req, _ := http.NewRequest("POST", g.AdminURL+"/config/apps/http/servers/mcp/routes",
		strings.NewReader(`{"match": [{"path": ["/console", "/console/*"]}], "handle": [`+handle+`]}`))
	if code, b := send(t, req, "Content-Type", "application/json"); code != http.StatusOK {
		t.Fatalf("add the console route: %d %s", code, b)
	}
}

// browser is a headless Chromium tab for a test.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T, exe string, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(width, height),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// Generous: a loaded CI machine runs every package at once.
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	return &browser{t: t, ctx: ctx}
}

func (b *browser) step(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// fill sets the value of the field sel as typing would: its input and
// change events fire. (chromedp.SetValue cannot set "".)
func fill(sel, value string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) throw new Error("no " + %q);
		e.value = %q; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, sel, value)
	return chromedp.Evaluate[chromedp.Void](js)
}

// show opens a screen of the console (tools, catalogs, live) and waits
// until it has loaded.
func (b *browser) show(view string) {
	b.t.Helper()
	b.step("open the "+view+" screen", chromedp.Click(chromedp.CSS(`#nav-`+view)))
	switch view {
	case "tools":
		b.until("the tools are listed", `document.querySelector('#tools').getAttribute('aria-busy') === 'false'`)
	case "live":
		b.until("the live state is listed", `document.querySelector('#view-live').getAttribute('aria-busy') === 'false'`)
	}
}

// until waits for a JavaScript condition on the page.
func (b *browser) until(what, cond string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`["#status", "#problems", "#test-result", "#handcall-result"].map((s) => s + ": " + ((document.querySelector(s) || {}).textContent || "")).join("\n")`))
		b.t.Fatalf("browser: waiting until %s: %v\n%s", what, err, page)
	}
}

// screenshot saves the page under $CRANK_CONSOLE_SCREENSHOTS (make
// screenshots).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("CRANK_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// In headless Chromium, the console lists a catalog's operations, shows
// the admin API's problem beside a bad field, saves the fixed entry as a
// new version attributed to the console, runs the draft against the
// upstream showing its flags, and rolls the catalog back.
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live"})
	addConsoleRoute(t, g)
	admin := func(method, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, g.AdminURL+path, strings.NewReader(body))
		return send(t, req, hdr...)
	}
	entry := func(desc, url string) string {
		return fmt.Sprintf(`{"name": "cat_user", "description": %q, "adapter": "rest", "config": {"method": "GET", "url": %q}}`, desc, url)
	}
	if code, b := admin("POST", "/crank/catalogs/live/operations", entry("v1", up.URL+"/users/{id}"), "If-None-Match", "*"); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	consoleURL := strings.TrimSuffix(g.MCPURL, "/mcp") + "/console/"

	// A Host that is not loopback is refused, as a rebound DNS name would be.
	req, _ := http.NewRequest("GET", consoleURL, nil)
	req.Host = "rebound.example"
	if code, b := send(t, req); code != http.StatusForbidden || !strings.Contains(string(b), "loopback") {
		t.Errorf("rebound Host: %d %s", code, b)
	}

	br := newBrowser(t, exe, 1280, 800)
	step, text := br.step, br.text
	step("find the catalog tool on the tools screen",
		chromedp.Navigate(consoleURL),
		chromedp.WaitReady(chromedp.CSS(`button[data-tool="cat_user"]`)),
		chromedp.WaitReady(chromedp.CSS(`button[data-tool="get_user"]`)),
		chromedp.SendKeys(chromedp.CSS(`#tools-filter`), "catalog live"))
	br.until("the filter keeps only the catalog's tool", `document.querySelectorAll('#tools tbody tr').length === 1 && !!document.querySelector('button[data-tool="cat_user"]')`)
	if src := text(`#tools tbody tr[data-row="cat_user"] td:nth-child(5)`); !strings.Contains(src, "catalog live v1") {
		t.Errorf("cat_user's source: %q", src)
	}
	step("open it in the form editor",
		chromedp.Click(chromedp.CSS(`button[data-tool="cat_user"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#f-config-url`)))
	br.until("the form shows the operation", `document.querySelector('#f-name').value === 'cat_user' && document.querySelector('#f-config-method').value === 'GET'`)
	step("validate a bad URL typed in the config form",
		fill(`#f-config-url`, "ftp://example.com/users/{id}"),
		chromedp.Click(chromedp.CSS(`#validate`)))
	br.until("the problem appears beside the URL field", `document.querySelector('#f-config-url-err').textContent !== '' && document.querySelector('#f-config-url').getAttribute('aria-invalid') === 'true'`)
	fieldProblem := text(`#f-config-url-err`)
	problem := text(`#problems .problem`)
	step("fix the URL and the description in the form, and save",
		fill(`#f-config-url`, up.URL+"/users/{id}"),
		fill(`#f-description`, "from the browser"),
		chromedp.SetValue(chromedp.CSS(`#message`), "edited in the console"),
		chromedp.Click(chromedp.CSS(`#save`)))
	saved := text(`#problems .ok`)
	step("run the draft",
		chromedp.SetValue(chromedp.CSS(`#test-args`), `{"id": 7}`),
		chromedp.Click(chromedp.CSS(`#run-test`)),
		chromedp.WaitReady(chromedp.CSS(`#test-flags [data-flag="is_error"]`)))
	isError, result := text(`#test-flags [data-flag="is_error"]`), text(`#test-result`)
	step("roll back to version 1",
		chromedp.Click(chromedp.CSS(`#show-history`)),
		chromedp.Click(chromedp.CSS(`button[data-rollback="1"]`)),
		chromedp.WaitReady(chromedp.CSS(`button[data-rollback="2"]`)))
	br.until("the page reports the rollback", `document.querySelector('#status').textContent.includes('now version 3')`)
	rolled := text(`#status`)
	reloaded, err := chromedp.Run(br.ctx, chromedp.Value(chromedp.CSS(`#entry`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reloaded, `"v1"`) {
		t.Errorf("after rollback the editor holds %s, want version 1's entry", reloaded)
	}
	if d, _ := chromedp.Run(br.ctx, chromedp.Value(chromedp.CSS(`#f-description`))); d != "v1" {
		t.Errorf("after rollback the form's description is %q, want v1", d)
	}
	br.screenshot("catalog-editor.png")
	br.show("tools")
	step("clear the filter", fill(`#tools-filter`, ""), chromedp.WaitReady(chromedp.CSS(`button[data-tool="get_user"]`)))
	br.screenshot("tools.png")

	if !strings.Contains(fieldProblem, "scheme") {
		t.Errorf("the URL field's problem is %q", fieldProblem)
	}
	if isError != "false" || !strings.Contains(result, "Ada Lovelace") {
		t.Errorf("test run: is_error %s, result %q", isError, result)
	}
	if !strings.Contains(rolled, "now version 3") {
		t.Errorf("after rollback the page says %q", rolled)
	}
	if !strings.Contains(problem, "/config/url") {
		t.Errorf("the bad URL's problem is %q, want it placed at /config/url", problem)
	}
	if !strings.Contains(saved, "version 2") {
		t.Errorf("after save the page says %q", saved)
	}

	code, b := admin("GET", "/crank/catalogs/live/versions", "")
	var vs struct {
		Versions []struct {
			Version int64  `json:"version"`
			Author  string `json:"author"`
			Message string `json:"message"`
		} `json:"versions"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &vs) != nil || len(vs.Versions) == 0 {
		t.Fatalf("versions: %d %s", code, b)
	}
	if len(vs.Versions) != 3 {
		t.Fatalf("versions: %s", b)
	}
	if v := vs.Versions[1]; v.Version != 2 || v.Author != "console:loopback" || v.Message != "edited in the console" {
		t.Errorf("version %+v, want 2 by console:loopback with the page's message", v)
	}
	code, b = admin("GET", "/crank/catalogs/live/operations/cat_user", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"v1"`) {
		t.Errorf("saved entry: %d %s", code, b)
	}
}

// Behind Caddy's basic_auth, the console answers its users under any Host
// and attributes their changes to them; without credentials basic_auth
// refuses first.
func TestConsoleBehindAuthentication(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live"})
	hash, err := bcrypt.GenerateFromPassword([]byte("console-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addConsoleRoute(t, g, fmt.Sprintf(`{"handler": "authentication", "providers": {"http_basic": {"accounts": [{"username": "alice", "password": %q}]}}}`, hash))
	base := strings.TrimSuffix(g.MCPURL, "/mcp") + "/console/"
	do := func(method, path, body string, auth bool, hdr ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Host = "gw.example"
		if auth {
			req.SetBasicAuth("alice", "console-pass")
		}
		code, b := send(t, req, hdr...)
		return code, string(b)
	}
	if code, b := do("GET", "", "", false); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d %s", code, b)
	}
	if code, b := do("GET", "", "", true); code != http.StatusOK || !strings.Contains(b, "Crank console") {
		t.Errorf("alice's page: %d %s", code, b)
	}
	entry := fmt.Sprintf(`{"name": "cat_user", "description": "by alice", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)
	if code, b := do("POST", "api/catalogs/live/operations", entry, true, "If-None-Match", "*"); code != http.StatusForbidden || !strings.Contains(b, "Origin") {
		t.Errorf("a change without Origin: %d %s", code, b)
	}
	if code, b := do("POST", "api/catalogs/live/operations", entry, true, "If-None-Match", "*", "Origin", "http://gw.example"); code != http.StatusCreated {
		t.Fatalf("alice's change: %d %s", code, b)
	}
	code, b := do("GET", "api/catalogs/live/versions", "", true)
	if code != http.StatusOK || !strings.Contains(b, `"console:alice"`) {
		t.Errorf("versions: %d %s", code, b)
	}
}

// In headless Chromium, against a running gateway: the tools screen
// groups a session's family; a test window shows its chunks while the
// upstream still streams, then its flags and warnings; a session is
// started, polled and stopped by hand and seen on the live screen with
// its owner replica; a job is started by hand and cancelled from the
// live screen.
func TestConsoleStreamsInBrowser(t *testing.T) {
	exe := chromium(t)
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	levels := make(chan string, 16)
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		switch r.URL.Path {
		case "/events": // two events, the third once the test saw them
			select {
			case levels <- r.URL.Query().Get("level"):
			default:
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 1; i <= 3; i++ {
				if i == 3 {
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
				}
				fmt.Fprintf(w, "data: {\"n\": %d, \"level\": \"error\"}\n\n", i)
				_ = rc.Flush()
			}
		case "/stream": // a few events, then silence
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 1; i <= 5; i++ {
				fmt.Fprintf(w, "id: %d\ndata: {\"n\": %d}\n\n", i, i)
			}
			_ = rc.Flush()
		case "/slow": // a report that never finishes by itself
		default:
			http.NotFound(w, r)
			return
		}
		<-r.Context().Done()
	}))
	t.Cleanup(sse.Close)

	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live"})
	addConsoleRoute(t, g)
	ops := fmt.Sprintf(`operations:
  - name: watch
    description: Watch the event stream.
    adapter: rest
    mode: window
    transport_behavior: server_stream
    input_schema: {type: object, properties: {level: {type: string, enum: [info, error]}}}
    limits: {window_duration_ms: 120000, upstream_timeout_ms: 120000, max_items: 3}
    config: {method: GET, url: "%[1]s/events", query: [level]}
  - name: follow
    description: Follow the stream.
    adapter: rest
    mode: session
    transport_behavior: server_stream
    config: {method: GET, url: "%[1]s/stream"}
  - name: report
    description: Build a slow report.
    adapter: rest
    mode: async_job
    timeout: 5m
    config: {method: GET, url: "%[1]s/slow"}
`, sse.URL)
	req, _ := http.NewRequest("PUT", g.AdminURL+"/crank/catalogs/live", strings.NewReader(ops))
	if code, b := send(t, req, "If-None-Match", "*", "Content-Type", "application/yaml"); code/100 != 2 {
		t.Fatalf("import: %d %s", code, b)
	}
	consoleURL := strings.TrimSuffix(g.MCPURL, "/mcp") + "/console/"
	br := newBrowser(t, exe, 1280, 800)

	// The tools screen: the session's family in one row.
	br.step("open the tools screen", chromedp.Navigate(consoleURL), chromedp.WaitReady(chromedp.CSS(`button[data-tool="follow"]`)))
	if fam := br.text(`tr[data-row="follow"] td:nth-child(4)`); !strings.Contains(fam, "follow_start") || !strings.Contains(fam, "follow_poll") || !strings.Contains(fam, "follow_stop") {
		t.Errorf("follow's family: %q", fam)
	}
	if mode := br.text(`tr[data-row="report"] .badge`); mode != "async_job" {
		t.Errorf("report's mode badge: %q", mode)
	}

	// A test window: chunks arrive before the result.
	br.step("open the window operation", chromedp.Click(chromedp.CSS(`button[data-tool="watch"]`)), chromedp.WaitVisible(chromedp.CSS(`#arg-level`)))
	br.until("the limits show their effective values", `document.querySelector('#f-limits-max_bytes-eff').textContent.includes('(default)') && document.querySelector('#f-limits-max_items-eff').textContent === 'effective: 3'`)
	br.step("pick an argument and run the window", fill(`#arg-level`, "error"), chromedp.Click(chromedp.CSS(`#run-test`)))
	br.until("two chunks arrive while the window is open", `document.querySelectorAll('#test-chunks li').length === 2`)
	if n, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll('#test-flags dd').length`)); err != nil || n != 0 {
		t.Errorf("flags shown before the window ended: %d %v", n, err)
	}
	br.screenshot("test-window-live.png")
	releaseOnce.Do(func() { close(release) })
	br.until("the window's flags", `!!document.querySelector('#test-flags [data-flag="end_reason"]')`)
	flags := map[string]string{}
	for _, f := range []string{"truncated", "window_complete", "has_more", "end_reason", "is_error"} {
		flags[f] = br.text(`#test-flags [data-flag="` + f + `"]`)
	}
	if flags["truncated"] != "true" || flags["window_complete"] != "false" || flags["end_reason"] != "max_items" || flags["is_error"] != "false" {
		t.Errorf("flags: %v", flags)
	}
	if w := br.text(`#test-warnings li`); !strings.Contains(w, "max_items") {
		t.Errorf("warning: %q", w)
	}
	if n := br.text(`#test-chunks`); !strings.Contains(n, `"n":3`) && !strings.Contains(n, `"n": 3`) {
		t.Errorf("chunks: %q", n)
	}
	if lv := <-levels; lv != "error" {
		t.Errorf("the window's upstream got level %q, want the form's error", lv)
	}
	br.screenshot("test-window.png")

	// A session by hand, seen live, then stopped.
	br.show("tools")
	br.step("open the session operation", chromedp.Click(chromedp.CSS(`button[data-tool="follow"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#hand-start`)))
	br.step("start it", chromedp.Click(chromedp.CSS(`#hand-start`)))
	br.until("the session started", `((document.querySelector('[data-hand="session_id"]') || {}).textContent || '').length > 1 && !document.querySelector('#hand-poll').disabled`)
	br.step("poll it", chromedp.Click(chromedp.CSS(`#hand-poll`)))
	br.until("the poll answered", `!!document.querySelector('[data-hand="items"]')`)
	sessionID := br.text(`[data-hand="session_id"]`)
	br.show("live")
	br.until("the live screen lists the session and the adapter", `!!document.querySelector('#live-sessions tr[data-live]') && !!document.querySelector('#adapters tr[data-adapter="rest"]')`)
	if id := br.text(`#live-sessions tr[data-live] th`); id != sessionID {
		t.Errorf("live session %q, want %q", id, sessionID)
	}
	if owner := br.text(`#live-sessions tr[data-live] td:nth-child(5)`); owner == "" {
		t.Error("the live session has no owner replica")
	}
	if h := br.text(`#adapters tr[data-adapter="rest"] td:nth-child(3)`); h != "ok" {
		t.Errorf("rest adapter health %q", h)
	}
	br.screenshot("live.png")
	br.show("catalogs")
	br.step("stop it by hand", chromedp.Click(chromedp.CSS(`#hand-stop`)))
	br.until("the session stopped", `!!document.querySelector('#hand-start') && !document.querySelector('#hand-start').disabled && document.querySelector('#hand-poll').disabled === false`)
	br.show("live")
	br.until("the session is gone from the live screen", `!!document.querySelector('#live-sessions') && !document.querySelector('#live-sessions tr[data-live]')`)

	// A job by hand, cancelled from the live screen.
	br.show("tools")
	br.step("open the job operation", chromedp.Click(chromedp.CSS(`button[data-tool="report"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#hand-start`)))
	br.step("start it", chromedp.Click(chromedp.CSS(`#hand-start`)))
	br.until("the job started", `((document.querySelector('[data-hand="job_id"]') || {}).textContent || '').length > 1`)
	jobID := br.text(`[data-hand="job_id"]`)
	br.show("live")
	br.until("the live screen lists the job", `!!document.querySelector('#live-jobs tr[data-live]')`)
	br.step("cancel it", chromedp.Click(chromedp.CSS(`#live-jobs button[data-stop="jobs/`+jobID+`"]`)))
	br.until("the job is cancelled", `document.querySelector('#status').textContent.includes('`+jobID+`') && !document.querySelector('#live-jobs tr[data-live]')`)
	br.show("catalogs")
	br.step("read its status by hand", chromedp.Click(chromedp.CSS(`#hand-status`)))
	br.until("its status says cancelled", `['canceled', 'canceling'].includes((document.querySelector('[data-hand="status"]') || {}).textContent)`)

	// The keyboard reaches the screens, and a narrow window scrolls
	// nothing sideways but its tables.
	br.step("open the live screen from the keyboard", chromedp.Focus(chromedp.CSS(`#nav-live`)), chromedp.KeyEvent("\r"))
	br.until("the live screen shows", `!document.querySelector('#view-live').hidden && document.activeElement.id === 'nav-live'`)
	br.step("narrow the window", chromedp.EmulateViewport(480, 900))
	for _, view := range []string{"tools", "catalogs", "live"} {
		br.show(view)
		br.until("the "+view+" screen fits 480 pixels", `document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1`)
		if view == "tools" {
			br.screenshot("tools-narrow.png")
		}
	}
}
