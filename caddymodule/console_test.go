package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}
	step("open the catalog's operation",
		chromedp.Navigate(consoleURL),
		chromedp.Click(chromedp.CSS(`button[data-catalog="live"]`)),
		chromedp.Click(chromedp.CSS(`button[data-op="cat_user"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#entry`)))
	step("validate a bad URL",
		chromedp.SetValue(chromedp.CSS(`#entry`), entry("v2", "ftp://example.com/users/{id}")),
		chromedp.Click(chromedp.CSS(`#validate`)))
	problem := text(`#problems .problem`)
	step("save the fixed entry",
		chromedp.SetValue(chromedp.CSS(`#entry`), entry("from the browser", up.URL+"/users/{id}")),
		chromedp.SetValue(chromedp.CSS(`#message`), "edited in the console"),
		chromedp.Click(chromedp.CSS(`#save`)))
	saved := text(`#problems .ok`)
	step("run the draft",
		chromedp.SetValue(chromedp.CSS(`#test-args`), `{"id": 7}`),
		chromedp.Click(chromedp.CSS(`#run-test`)),
		chromedp.WaitVisible(chromedp.CSS(`#test-flags [data-flag="is_error"]`)))
	isError, result := text(`#test-flags [data-flag="is_error"]`), text(`#test-result`)
	step("roll back to version 1",
		chromedp.Click(chromedp.CSS(`#show-history`)),
		chromedp.Click(chromedp.CSS(`button[data-rollback="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-rollback="2"]`)))
	rolled := text(`#status`)
	reloaded, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#entry`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reloaded, `"v1"`) {
		t.Errorf("after rollback the editor holds %s, want version 1's entry", reloaded)
	}
	if dir := os.Getenv("CRANK_CONSOLE_SCREENSHOTS"); dir != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "catalog-editor.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
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
