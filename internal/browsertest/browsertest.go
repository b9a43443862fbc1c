// Package browsertest drives the operator console in headless Chromium
// (Debian's chromium package) with chromedp, for tests: steps, text,
// waits on DOM conditions with generous deadlines (never on time), and
// screenshots for docs/console (make screenshots).
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"github.com/crankmcp/crank/internal/missing"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium finds Debian's Chromium; without it the test is skipped,
// except in CI (.ci/run installs it), where it fails.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missing.Tool(t, "chromium is not installed", "apt-get install chromium")
	return ""
}

// Browser is a headless Chromium tab of a test.
type Browser struct {
	t   testing.TB
	Ctx context.Context

	mu     sync.Mutex
	thrown []string // the page's uncaught exceptions, for failures
}

// New opens a tab of width×height pixels, closed when the test ends; it
// skips the test without Chromium (see Chromium).
func New(t testing.TB, width, height int) *Browser {
	t.Helper()
	exe := Chromium(t)
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
	ctx, cancelT := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelT)
	b := &Browser{t: t, Ctx: ctx}
	if err := chromedp.Listen(ctx, b.event); err != nil {
		t.Fatalf("browser: %v", err)
	}
	return b
}

// event keeps the page's uncaught exceptions (a failed fetch, an error in
// a handler) for the message of a failed wait.
func (b *Browser) event(ev any) {
	e, ok := ev.(*runtime.EventExceptionThrown)
	if !ok || e.ExceptionDetails == nil {
		return
	}
	d := e.ExceptionDetails
	msg := d.Text
	if d.Exception != nil && d.Exception.Description != "" {
		msg += " " + d.Exception.Description
	}
	b.mu.Lock()
	b.thrown = append(b.thrown, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
	b.mu.Unlock()
}

// Step runs steps, failing the test with what on error.
func (b *Browser) Step(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v\n%s", what, err, b.pageState())
	}
}

// Text is the visible text of the first element sel matches, once one
// exists.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// Fill sets the value of the field sel as typing would: its input and
// change events fire. (chromedp.SetValue cannot set "".)
func Fill(sel, value string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) throw new Error("no " + %q);
		e.value = %q; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, sel, value)
	return chromedp.Evaluate[chromedp.Void](js)
}

// Show opens a screen of the console (tools, catalogs, live) and waits
// until it has loaded.
func (b *Browser) Show(view string) {
	b.t.Helper()
	b.Step("open the "+view+" screen", chromedp.Click(chromedp.CSS(`#nav-`+view)))
	switch view {
	case "tools":
		b.Until("the tools are listed", `document.querySelector('#tools').getAttribute('aria-busy') === 'false'`)
	case "live":
		b.Until("the live state is listed", `document.querySelector('#view-live').getAttribute('aria-busy') === 'false'`)
	}
}

// NewOperation opens catalog on the catalogs screen and starts a new REST
// operation in the form, waiting until the form shows the rest adapter's
// config fields (the page asks for its schema again while the gateway
// has not started the adapter).
func (b *Browser) NewOperation(catalog string) {
	b.t.Helper()
	b.Show("catalogs")
	b.Step("open the catalog "+catalog, Fill(`#new-catalog-name`, catalog), chromedp.Click(chromedp.CSS(`#new-catalog button`)))
	b.Until("its operations show", `!document.querySelector('#ops-pane').hidden`)
	b.Step("start a new operation", chromedp.Click(chromedp.CSS(`#new-op`)))
	b.Until("the form shows the rest adapter's config fields", `!!document.querySelector('#f-config-url') && document.querySelector('#block-config').getAttribute('aria-busy') === 'false'`)
}

// Until waits for a JavaScript condition on the page (two minutes at
// most), failing the test with what the page says. A navigation while it
// waits (a form posted, a redirect to log in) ends one poll, not the wait:
// it polls the new page.
func (b *Browser) Until(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := chromedp.Run(b.Ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		var e *cdproto.Error
		if errors.As(err, &e) && navigated[e.Message] && time.Now().Before(deadline) && b.Ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b.t.Fatalf("browser: waiting until %s: %v\n%s", what, err, b.pageState())
	}
}

// navigated are the errors of a poll whose page navigated away.
var navigated = map[string]bool{
	"Inspected target navigated or closed":  true,
	"Execution context was destroyed.":      true,
	"Cannot find context with specified id": true,
}

// pageState is what the page says (its status and result areas) and the
// uncaught exceptions it threw, for the message of a failure (the page
// part stays empty once the test's browser context has run out).
func (b *Browser) pageState() string {
	page, _ := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`["#status", "#problems", "#test-result", "#call-result", "#handcall-result", "#dhand-result"].map((s) => s + ": " + ((document.querySelector(s) || {}).textContent || "")).join("\n")`))
	b.mu.Lock()
	defer b.mu.Unlock()
	return page + "\nuncaught exceptions:\n" + strings.Join(b.thrown, "\n")
}

// Screenshot saves the page as name under $CRANK_CONSOLE_SCREENSHOTS
// (make screenshots); without it, it does nothing.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("CRANK_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}
