package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/crankmcp/crank/internal/browsertest"
	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

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

// loopbackConsole is the console handler of the tests that use it on
// loopback without logging in.
const loopbackConsole = `{"handler": "crank_console", "loopback_without_login": true}`

// addConsoleRoute adds a route to the running config's server, through
// the admin API: the handlers before it, then console (crank_console's
// JSON).
func addConsoleRoute(t *testing.T, g *gateway, console string, before ...string) {
	t.Helper()
	handle := strings.Join(append(before, console), ", ")
	configure(t, g, "POST", "/config/apps/http/servers/mcp/routes",
		`{"match": [{"path": ["/console", "/console/*"]}], "handle": [`+handle+`]}`)
	waitAnswer(t, http.DefaultClient, strings.TrimSuffix(g.MCPURL, "/mcp")+"/console/")
}

// configure changes the running config through the admin API.
func configure(t *testing.T, g *gateway, method, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.AdminURL+path, strings.NewReader(body))
	if code, b := send(t, req, "Content-Type", "application/json"); code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
}

// waitAnswer waits until url answers anything but 404 through c. The old
// config's server shuts down after the admin API answered: a connection
// it accepted meanwhile may be closed unanswered.
func waitAnswer(t *testing.T, c *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url, nil)
		req.Close = true
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 30s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// In headless Chromium, the console lists a catalog's operations, shows
// the admin API's problem beside a bad field, saves the fixed entry as a
// new version attributed to the console, runs the draft against the
// upstream showing its flags, and rolls the catalog back.
func TestConsoleInBrowser(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})
	addConsoleRoute(t, g, loopbackConsole)
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

	br := browsertest.New(t, 1280, 800)
	step, text := br.Step, br.Text
	step("find the catalog tool on the tools screen",
		chromedp.Navigate(consoleURL),
		chromedp.WaitReady(chromedp.CSS(`button[data-tool="cat_user"]`)),
		chromedp.WaitReady(chromedp.CSS(`button[data-tool="get_user"]`)),
		chromedp.SendKeys(chromedp.CSS(`#tools-filter`), "catalog live"))
	br.Until("the filter keeps only the catalog's tool", `document.querySelectorAll('#tools tbody tr').length === 1 && !!document.querySelector('button[data-tool="cat_user"]')`)
	if src := text(`#tools tbody tr[data-row="cat_user"] td:nth-child(5)`); !strings.Contains(src, "catalog live v1") {
		t.Errorf("cat_user's source: %q", src)
	}
	step("open it in the form editor", chromedp.Click(chromedp.CSS(`button[data-tool="cat_user"]`)))
	br.Until("the form shows the operation", `!!document.querySelector('#f-config-url') && document.querySelector('#f-name').value === 'cat_user' && document.querySelector('#f-config-method').value === 'GET'`)
	step("validate a bad URL typed in the config form",
		browsertest.Fill(`#f-config-url`, "ftp://example.com/users/{id}"),
		chromedp.Click(chromedp.CSS(`#validate`)))
	br.Until("the problem appears beside the URL field", `document.querySelector('#f-config-url-err').textContent !== '' && document.querySelector('#f-config-url').getAttribute('aria-invalid') === 'true'`)
	fieldProblem := text(`#f-config-url-err`)
	problem := text(`#problems .problem`)
	step("fix the URL and the description in the form, and save",
		browsertest.Fill(`#f-config-url`, up.URL+"/users/{id}"),
		browsertest.Fill(`#f-description`, "from the browser"),
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
	br.Until("the page reports the rollback", `document.querySelector('#status').textContent.includes('now version 3')`)
	rolled := text(`#status`)
	reloaded, err := chromedp.Run(br.Ctx, chromedp.Value(chromedp.CSS(`#entry`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reloaded, `"v1"`) {
		t.Errorf("after rollback the editor holds %s, want version 1's entry", reloaded)
	}
	if d, _ := chromedp.Run(br.Ctx, chromedp.Value(chromedp.CSS(`#f-description`))); d != "v1" {
		t.Errorf("after rollback the form's description is %q, want v1", d)
	}
	br.Screenshot("catalog-editor.png")
	br.Show("tools")
	step("clear the filter", browsertest.Fill(`#tools-filter`, ""), chromedp.WaitReady(chromedp.CSS(`button[data-tool="get_user"]`)))
	br.Screenshot("tools.png")

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
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})
	hash, err := bcrypt.GenerateFromPassword([]byte("console-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addConsoleRoute(t, g, `{"handler": "crank_console"}`, fmt.Sprintf(`{"handler": "authentication", "providers": {"http_basic": {"accounts": [{"username": "alice", "password": %q}]}}}`, hash))
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
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	events := mcptest.NewEvents(t, 3)
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		switch r.URL.Path {
		case "/events": // two events, the third once the test saw them
			events.ServeEvents(w, r)
			return
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

	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})
	addConsoleRoute(t, g, loopbackConsole)
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
	br := browsertest.New(t, 1280, 800)

	// The tools screen: the session's family in one row.
	br.Step("open the tools screen", chromedp.Navigate(consoleURL), chromedp.WaitReady(chromedp.CSS(`button[data-tool="follow"]`)))
	if fam := br.Text(`tr[data-row="follow"] td:nth-child(4)`); !strings.Contains(fam, "follow_start") || !strings.Contains(fam, "follow_poll") || !strings.Contains(fam, "follow_stop") {
		t.Errorf("follow's family: %q", fam)
	}
	if mode := br.Text(`tr[data-row="report"] .badge`); mode != "async_job" {
		t.Errorf("report's mode badge: %q", mode)
	}

	// A test window: chunks arrive before the result.
	br.Step("open the window operation", chromedp.Click(chromedp.CSS(`button[data-tool="watch"]`)))
	br.Until("the editor shows it", `document.querySelector('#editor-title').textContent === 'Operation watch' && !!document.querySelector('#arg-level')`)
	br.Until("the limits show their effective values", `document.querySelector('#f-limits-max_bytes-eff').textContent.includes('(default)') && document.querySelector('#f-limits-max_items-eff').textContent === 'effective: 3'`)
	br.Step("pick an argument and run the window", browsertest.Fill(`#arg-level`, "error"), chromedp.Click(chromedp.CSS(`#run-test`)))
	br.Until("two chunks arrive while the window is open", `document.querySelectorAll('#test-chunks li').length === 2`)
	if n, err := chromedp.Run(br.Ctx, chromedp.Evaluate[int](`document.querySelectorAll('#test-flags dd').length`)); err != nil || n != 0 {
		t.Errorf("flags shown before the window ended: %d %v", n, err)
	}
	br.Screenshot("test-window-live.png")
	events.Release()
	br.Until("the window's flags", `!!document.querySelector('#test-flags [data-flag="end_reason"]')`)
	flags := map[string]string{}
	for _, f := range []string{"truncated", "window_complete", "has_more", "end_reason", "is_error"} {
		flags[f] = br.Text(`#test-flags [data-flag="` + f + `"]`)
	}
	if flags["truncated"] != "true" || flags["window_complete"] != "false" || flags["end_reason"] != "max_items" || flags["is_error"] != "false" {
		t.Errorf("flags: %v", flags)
	}
	if w := br.Text(`#test-warnings li`); !strings.Contains(w, "max_items") {
		t.Errorf("warning: %q", w)
	}
	if n := br.Text(`#test-chunks`); !strings.Contains(n, `"n":3`) && !strings.Contains(n, `"n": 3`) {
		t.Errorf("chunks: %q", n)
	}
	if lv := <-events.Levels; lv != "error" {
		t.Errorf("the window's upstream got level %q, want the form's error", lv)
	}
	br.Screenshot("test-window.png")

	// A session by hand, seen live, then stopped.
	br.Show("tools")
	br.Step("open the session operation", chromedp.Click(chromedp.CSS(`button[data-tool="follow"]`)))
	// Clicks wait for the editor's check: the effective values it writes
	// move the buttons below them.
	br.Until("the editor shows it", `document.querySelector('#editor-title').textContent === 'Operation follow' && !document.querySelector('#handcall').hidden && document.querySelector('#editor-pane').getAttribute('aria-busy') === 'false'`)
	br.Step("start it", chromedp.Click(chromedp.CSS(`#hand-start`)))
	br.Until("the session started", `((document.querySelector('[data-hand="session_id"]') || {}).textContent || '').length > 1 && !document.querySelector('#hand-poll').disabled`)
	br.Step("poll it", chromedp.Click(chromedp.CSS(`#hand-poll`)))
	br.Until("the poll answered", `!!document.querySelector('[data-hand="items"]')`)
	sessionID := br.Text(`[data-hand="session_id"]`)
	br.Show("live")
	br.Until("the live screen lists the session and the adapter", `!!document.querySelector('#live-sessions tr[data-live]') && !!document.querySelector('#adapters tr[data-adapter="rest"]')`)
	if id := br.Text(`#live-sessions tr[data-live] th`); id != sessionID {
		t.Errorf("live session %q, want %q", id, sessionID)
	}
	if owner := br.Text(`#live-sessions tr[data-live] td:nth-child(5)`); owner == "" {
		t.Error("the live session has no owner replica")
	}
	if h := br.Text(`#adapters tr[data-adapter="rest"] td:nth-child(3)`); h != "ok" {
		t.Errorf("rest adapter health %q", h)
	}
	br.Screenshot("live.png")
	br.Show("catalogs")
	br.Step("stop it by hand", chromedp.Click(chromedp.CSS(`#hand-stop`)))
	br.Until("the session stopped", `!!document.querySelector('#hand-start') && !document.querySelector('#hand-start').disabled && document.querySelector('#hand-poll').disabled === false`)
	br.Show("live")
	br.Until("the session is gone from the live screen", `!!document.querySelector('#live-sessions') && !document.querySelector('#live-sessions tr[data-live]')`)

	// A job by hand, cancelled from the live screen.
	br.Show("tools")
	br.Step("open the job operation", chromedp.Click(chromedp.CSS(`button[data-tool="report"]`)))
	br.Until("the editor shows it", `document.querySelector('#editor-title').textContent === 'Operation report' && !document.querySelector('#handcall').hidden && document.querySelector('#editor-pane').getAttribute('aria-busy') === 'false'`)
	br.Step("start it", chromedp.Click(chromedp.CSS(`#hand-start`)))
	br.Until("the job started", `((document.querySelector('[data-hand="job_id"]') || {}).textContent || '').length > 1`)
	jobID := br.Text(`[data-hand="job_id"]`)
	br.Show("live")
	br.Until("the live screen lists the job", `!!document.querySelector('#live-jobs tr[data-live]')`)
	br.Step("cancel it", chromedp.Click(chromedp.CSS(`#live-jobs button[data-stop="jobs/`+jobID+`"]`)))
	br.Until("the job is cancelled", `document.querySelector('#status').textContent.includes('`+jobID+`') && !document.querySelector('#live-jobs tr[data-live]')`)
	br.Show("catalogs")
	br.Step("read its status by hand", chromedp.Click(chromedp.CSS(`#hand-status`)))
	br.Until("its status says cancelled", `['canceled', 'canceling'].includes((document.querySelector('[data-hand="status"]') || {}).textContent)`)

	// The keyboard reaches the screens, and a narrow window scrolls
	// nothing sideways but its tables.
	br.Step("open the live screen from the keyboard", chromedp.Focus(chromedp.CSS(`#nav-live`)), chromedp.KeyEvent("\r"))
	br.Until("the live screen shows", `!document.querySelector('#view-live').hidden && document.activeElement.id === 'nav-live'`)
	br.Step("narrow the window", chromedp.EmulateViewport(480, 900))
	for _, view := range []string{"tools", "catalogs", "live"} {
		br.Show(view)
		br.Until("the "+view+" screen fits 480 pixels", `document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1`)
		if view == "tools" {
			br.Screenshot("tools-narrow.png")
		}
	}
}

// Through a real Caddy config: without loopback_without_login a loopback
// client without a user gets nothing, not even with the Origin and
// Sec-Fetch-Site the page would send (any program can send them); with
// it, a loopback client that reaches the site directly gets in, but not
// through a reverse proxy that rewrites the Host to a loopback name
// (Caddy's reverse_proxy, which says so in X-Forwarded-For), nor with a
// Via header, nor on a listener that is not on loopback (a unix socket).
func TestConsoleLoopbackAccessThroughCaddy(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})
	addConsoleRoute(t, g, loopbackConsole)
	configure(t, g, "POST", "/config/apps/http/servers/mcp/routes",
		`{"match": [{"path": ["/strict", "/strict/*"]}], "handle": [{"handler": "crank_console", "prefix": "/strict"}]}`)
	site := strings.TrimSuffix(g.MCPURL, "/mcp")
	waitAnswer(t, http.DefaultClient, site+"/strict/")

	ports, err := storetest.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	front := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	configure(t, g, "PUT", "/config/apps/http/servers/front", fmt.Sprintf(`{"listen": ["127.0.0.1:%d"], "automatic_https": {"disable": true},
		"routes": [{"handle": [{"handler": "reverse_proxy", "upstreams": [{"dial": %q}],
			"headers": {"request": {"set": {"Host": ["{http.reverse_proxy.upstream.hostport}"]}}}}]}]}`,
		ports[0], strings.TrimPrefix(site, "http://")))
	sock := filepath.Join(t.TempDir(), "console.sock")
	configure(t, g, "PUT", "/config/apps/http/servers/sock", fmt.Sprintf(`{"listen": [%q], "automatic_https": {"disable": true},
		"routes": [{"handle": [%s]}]}`, "unix/"+sock, loopbackConsole))
	unix := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	waitAnswer(t, http.DefaultClient, front+"/console/")
	waitAnswer(t, unix, "http://localhost/console/")

	entry := fmt.Sprintf(`{"name": "cat_user", "description": "v1", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)
	do := func(c *http.Client, method, url, body string, hdr ...string) (int, string) {
		t.Helper()
		send := func() (*http.Response, error) {
			req, _ := http.NewRequest(method, url, strings.NewReader(body))
			req.Close = true
			for i := 0; i+1 < len(hdr); i += 2 {
				if hdr[i] == "Host" {
					req.Host = hdr[i+1]
				} else {
					req.Header.Set(hdr[i], hdr[i+1])
				}
			}
			return c.Do(req)
		}
		resp, err := send()
		if err != nil && (method == "GET" || strings.HasPrefix(url, front)) {
			// Caddy's servers restart at each configure above and an old
			// one may still be closing: a request that changes nothing (a
			// GET, or a change the proxy's refusal stops) is sent again.
			resp, err = send()
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	page := []string{"Origin", site, "Sec-Fetch-Site", "same-origin", "If-None-Match", "*"}
	for _, c := range []struct {
		name, method, url, body string
		client                  *http.Client
		hdr                     []string
		status                  int
		want                    string
	}{
		{"no user and no opt-in", "GET", site + "/strict/", "", http.DefaultClient, nil, 403, "needs a user"},
		{"a change with the page's Origin, no user and no opt-in", "POST", site + "/strict/api/catalogs/live/operations", entry, http.DefaultClient, page, 403, "needs a user"},
		{"through a proxy rewriting the Host", "GET", front + "/console/", "", http.DefaultClient, []string{"Host", "gw.example"}, 403, "X-Forwarded-For"},
		{"a change through a proxy", "POST", front + "/console/api/catalogs/live/operations", entry, http.DefaultClient, page, 403, "X-Forwarded-For"},
		{"with Via", "GET", site + "/console/api/catalogs", "", http.DefaultClient, []string{"Via", "1.1 edge"}, 403, "Via"},
		{"on a unix socket", "GET", "http://localhost/console/", "", unix, nil, 403, "is not on loopback"},
		{"directly on loopback", "GET", site + "/console/", "", http.DefaultClient, nil, 200, "Crank console"},
		{"a change directly on loopback", "POST", site + "/console/api/catalogs/live/operations", entry, http.DefaultClient, page, 201, ""},
	} {
		if code, b := do(c.client, c.method, c.url, c.body, c.hdr...); code != c.status || !strings.Contains(b, c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, b, c.status, c.want)
		}
	}
	req, _ := http.NewRequest("GET", g.AdminURL+"/crank/catalogs/live/versions", nil)
	if code, b := send(t, req); code != http.StatusOK || strings.Count(string(b), `"version":`) != 1 || !strings.Contains(string(b), `"console:loopback"`) {
		t.Errorf("versions: %d %s, want the one change by console:loopback", code, b)
	}
}

// Behind Caddy's forward_auth (adapted from a Caddyfile, as an operator
// writes it), the console takes its user from the auth service's answer
// (forward_auth_user_header), never from the client: a client's own
// X-Auth-User is no user, whether the auth service answers 2xx without
// one or no forward_auth runs before the console at all.
func TestConsoleBehindForwardAuth(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	authSvc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.Header.Get("Cookie"), "session=alice-session"):
			w.Header().Set("X-Auth-User", "alice")
		case r.Header.Get("X-Anonymous") == "ok": // a 2xx naming no user
		default:
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(authSvc.Close)
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})

	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(fmt.Sprintf(`http://127.0.0.1:1 {
	forward_auth %s {
		uri /auth
		copy_headers X-Auth-User
	}
	crank_console /console* {
		forward_auth_user_header X-Auth-User
	}
}`, strings.TrimPrefix(authSvc.URL, "http://"))), nil)
	if err != nil {
		t.Fatal(err)
	}
	var adapted struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []struct {
							Routes json.RawMessage `json:"routes"`
						} `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &adapted); err != nil || len(adapted.Apps.HTTP.Servers["srv0"].Routes) != 1 {
		t.Fatalf("adapted: %v %s", err, out)
	}
	configure(t, g, "POST", "/config/apps/http/servers/mcp/routes", `{"match": [{"path": ["/console", "/console/*"]}],
		"handle": [{"handler": "subroute", "routes": `+string(adapted.Apps.HTTP.Servers["srv0"].Routes[0].Handle[0].Routes)+`}]}`)
	// The same console without forward_auth before it.
	configure(t, g, "POST", "/config/apps/http/servers/mcp/routes",
		`{"match": [{"path": ["/bare", "/bare/*"]}], "handle": [{"handler": "crank_console", "prefix": "/bare", "forward_auth_user_header": "X-Auth-User"}]}`)
	site := strings.TrimSuffix(g.MCPURL, "/mcp")
	waitAnswer(t, http.DefaultClient, site+"/console/")
	waitAnswer(t, http.DefaultClient, site+"/bare/")

	entry := fmt.Sprintf(`{"name": "cat_user", "description": "by alice", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)
	for _, c := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		want                     string
	}{
		{"no session", "GET", "/console/", "", nil, 401, "log in first"},
		{"no session, naming a user", "GET", "/console/", "", []string{"X-Auth-User", "mallory"}, 401, "log in first"},
		{"an answer without a user, the client naming one", "GET", "/console/", "", []string{"X-Anonymous", "ok", "X-Auth-User", "mallory"}, 403, "needs a user"},
		{"no forward_auth, the client naming a user", "GET", "/bare/", "", []string{"X-Auth-User", "mallory"}, 403, "needs a user"},
		{"alice", "GET", "/console/", "", []string{"Cookie", "session=alice-session", "X-Auth-User", "mallory"}, 200, "Crank console"},
		{"alice's change", "POST", "/console/api/catalogs/live/operations", entry,
			[]string{"Cookie", "session=alice-session", "X-Auth-User", "mallory", "Origin", site, "If-None-Match", "*"}, 201, ""},
	} {
		req, _ := http.NewRequest(c.method, site+c.path, strings.NewReader(c.body))
		if code, b := send(t, req, c.hdr...); code != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, b, c.status, c.want)
		}
	}
	req, _ := http.NewRequest("GET", g.AdminURL+"/crank/catalogs/live/versions", nil)
	if code, b := send(t, req); code != http.StatusOK || !strings.Contains(string(b), `"author": "console:alice"`) {
		t.Errorf("versions: %d %s, want the change by console:alice", code, b)
	}
}

// The console's config is checked at load, naming the field.
func TestConsoleValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		console Console
		want    string
	}{
		{Console{Prefix: "/"}, "prefix"},
		{Console{Prefix: "/console", ForwardAuthUserHeader: "X-Auth User"}, `forward_auth_user_header: "X-Auth User" is not a header name`},
		{Console{Prefix: "/console", ForwardAuthUserHeader: "X-Auth-Request-User", LoopbackWithoutLogin: true}, ""},
	} {
		err := c.console.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.console, err, c.want)
		}
	}
}

// The console may load before any adapter runs: Caddy starts the crank
// app, and with it the adapters, in no fixed order with the site, and an
// adapter no handler uses yet runs once one does. A new operation's
// config is then edited as JSON, the page saying its schema is not here
// yet; once the adapter runs (here: a catalog version that uses it), the
// form shows the adapter's fields by itself, keeping the draft.
func TestConsoleAsksAgainForAdapterSchemas(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	// The handler serves only the empty catalog: no adapter runs.
	g := startGateway(t, "unused", map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow, "operations": []string{}})
	addConsoleRoute(t, g, loopbackConsole)
	req, _ := http.NewRequest("GET", g.AdminURL+"/crank/adapters", nil)
	if code, b := send(t, req); code != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("adapters before the catalog uses one: %d %s", code, b)
	}
	br := browsertest.New(t, 1280, 800)
	br.Step("open the console", chromedp.Navigate(strings.TrimSuffix(g.MCPURL, "/mcp")+"/console/"))
	br.Show("catalogs")
	br.Step("open the live catalog", browsertest.Fill(`#new-catalog-name`, "live"), chromedp.Click(chromedp.CSS(`#new-catalog button`)))
	br.Until("its operations show", `!document.querySelector('#ops-pane').hidden`)
	br.Step("start a new operation", chromedp.Click(chromedp.CSS(`#new-op`)))
	br.Until("its config is JSON", `!!document.querySelector('#f-config') && !document.querySelector('#f-config-url')`)
	if note := br.Text(`#block-config .note`); !strings.Contains(note, "not published its config schema here yet") {
		t.Errorf("the config block says %q", note)
	}
	br.Step("name the draft", browsertest.Fill(`#f-name`, "draft_op"))

	req, _ = http.NewRequest("POST", g.AdminURL+"/crank/catalogs/live/operations", strings.NewReader(fmt.Sprintf(
		`{"name": "cat_user", "description": "v1", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)))
	if code, b := send(t, req, "If-None-Match", "*"); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	br.Until("the config form shows the adapter's fields with the draft's values",
		`!!document.querySelector('#f-config-url') && document.querySelector('#f-config-url').value === 'https://api.example.com/items/{id}' && document.querySelector('#f-name').value === 'draft_op' && document.querySelector('#block-config').getAttribute('aria-busy') === 'false'`)
	if v, err := chromedp.Run(br.Ctx, chromedp.Value(chromedp.CSS(`#entry`))); err != nil || !strings.Contains(v, `"draft_op"`) || !strings.Contains(v, "api.example.com") {
		t.Errorf("the raw entry after the schema came: %q %v", v, err)
	}
}
