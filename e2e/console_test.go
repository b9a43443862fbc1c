package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// The operator console of the built binary running the demo (with a
// catalog), in headless Chromium: find recent_logs and call it, seeing
// chunks arrive and then the window's flags; create a REST operation
// through the form, see a field error for a bad value, fix it, save it,
// call the new tool through an MCP client, change it and roll it back;
// start and poll a session by hand and stop it from the live screen;
// start a job by hand and cancel it.
//
// The console is opened as soon as the demo answers, while the demo may
// still be building some endpoints' tools, or before the crank app has
// started the adapters: the tools screen says so and asks again until
// every endpoint is built, and the operation form asks again for the
// adapter's config schema until it is there. Waits after a click are
// JavaScript polls (browsertest's Until), which say what the page shows
// when they time out.
func TestConsoleOnDemo(t *testing.T) {
	t.Parallel()
	browsertest.Chromium(t) // skip before starting the demo without it
	d := startDemo(t, func(caddyfile string) string {
		return strings.Replace(caddyfile, "allowed_origins http://127.0.0.1:6274 http://localhost:6274",
			"allowed_origins http://127.0.0.1:6274 http://localhost:6274\n\t\tcatalog demo {\n\t\t\tupstreams 127.0.0.1\n\t\t\tplaceholders env.CRANK_DEMO_TOKEN\n\t\t}", 1)
	})
	consoleURL := fmt.Sprintf("http://127.0.0.1:%d/console/", d.ports[":8080"])
	upstream := fmt.Sprintf("127.0.0.1:%d", d.ports[":8081"])
	br := browsertest.New(t, 1280, 800)

	// recent_logs, a window of the demo's file, called from its details.
	br.Step("open the console", chromedp.Navigate(consoleURL))
	br.Until("the tools are listed", `!!document.querySelector('button[data-tool="recent_logs"]')`)
	br.Step("find recent_logs", browsertest.Fill(`#tools-filter`, "recent_logs"))
	br.Until("the filter keeps recent_logs and drops get_user", `!!document.querySelector('tr[data-row="recent_logs"]') && !document.querySelector('tr[data-row="get_user"]')`)
	br.Step("open it", chromedp.Click(chromedp.CSS(`button[data-tool="recent_logs"]`)))
	br.Until("its details show", `!document.querySelector('#tool-detail').hidden && !!document.querySelector('#call-service')`)
	br.Step("call it for one service", browsertest.Fill(`#call-service`, "checkout"), chromedp.Click(chromedp.CSS(`#call-run`)))
	br.Until("chunks arrive while the window collects", `document.querySelectorAll('#call-chunks li').length > 0 && document.querySelectorAll('#call-flags dd').length === 0`)
	br.Until("the window's flags", `!!document.querySelector('#call-flags [data-flag="end_reason"]')`)
	if e := br.Text(`#call-flags [data-flag="is_error"]`); e != "false" {
		t.Fatalf("recent_logs failed: %s", br.Text(`#call-result`))
	}
	if m := br.Text(`#call-flags [data-flag="mode"]`); m != "window" {
		t.Errorf("recent_logs mode %q", m)
	}
	for _, f := range []string{"truncated", "window_complete", "has_more"} {
		if v := br.Text(`#call-flags [data-flag="` + f + `"]`); v != "true" && v != "false" {
			t.Errorf("flag %s: %q", f, v)
		}
	}
	if chunks := br.Text(`#call-chunks`); !strings.Contains(chunks, "checkout") {
		t.Errorf("chunks of another service: %.300s", chunks)
	}

	// A new REST operation through the form.
	// The page may have loaded before the crank app started the adapters:
	// the config form follows once the rest adapter's schema is there.
	br.NewOperation("demo")
	br.Step("fill in a new operation with a bad URL",
		browsertest.Fill(`#f-name`, "lookup_user"),
		browsertest.Fill(`#f-description`, "v1"),
		browsertest.Fill(`#f-config-method`, "GET"),
		browsertest.Fill(`#f-config-url`, "ftp://"+upstream+"/users/{id}"),
		browsertest.Fill(`#f-config-headers`, `{"X-Demo-Token": "{env.CRANK_DEMO_TOKEN}"}`),
		browsertest.Fill(`#f-input_schema`, `{"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]}`),
		chromedp.Click(chromedp.CSS(`#validate`)))
	br.Until("the URL's problem shows beside it", `document.querySelector('#f-config-url-err').textContent !== ''`)
	br.Step("fix it and save", browsertest.Fill(`#f-config-url`, "http://"+upstream+"/users/{id}"), chromedp.Click(chromedp.CSS(`#save`)))
	br.Until("it is saved", `(document.querySelector('#problems .ok') || {}).textContent === 'Saved as version 1.'`)
	br.Screenshot("demo-new-operation.png")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "console-e2e", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: d.mcpURL()}, sessionProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	describe := func(want string) {
		t.Helper()
		for {
			if desc, ok := toolDescription(t, ctx, cs, "lookup_user"); ok && desc == want {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("lookup_user is not served with description %q", want)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	describe("v1")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_user", Arguments: map[string]any{"id": 2}})
	if err != nil || res.IsError {
		t.Fatalf("lookup_user: %v %s", err, textOf(res))
	}
	if !strings.Contains(textOf(res), `"id"`) {
		t.Errorf("lookup_user answered %s", textOf(res))
	}

	// The tools screen charts its call.
	br.Show("tools")
	br.Step("find lookup_user", browsertest.Fill(`#tools-filter`, "lookup_user"))
	br.Until("lookup_user's call is charted", `Number((document.querySelector('tr[data-row="lookup_user"] [data-calls]') || {dataset: {}}).dataset.calls) >= 1`)
	br.Show("catalogs") // its editor is still open

	// Change it, then roll it back.
	br.Step("change the description and save", browsertest.Fill(`#f-description`, "v2"), chromedp.Click(chromedp.CSS(`#save`)))
	br.Until("version 2 is saved", `(document.querySelector('#problems .ok') || {}).textContent === 'Saved as version 2.'`)
	describe("v2")
	br.Step("roll back to version 1", chromedp.Click(chromedp.CSS(`#show-history`)), chromedp.Click(chromedp.CSS(`button[data-rollback="1"]`)))
	br.Until("the rollback is done", `document.querySelector('#status').textContent.includes('now version 3') && document.querySelector('#f-description').value === 'v1'`)
	describe("v1")

	// follow_logs, a session of the demo's file, by hand.
	br.Show("tools")
	br.Step("open follow_logs", browsertest.Fill(`#tools-filter`, "follow_logs"), chromedp.Click(chromedp.CSS(`button[data-tool="follow_logs"]`)))
	br.Until("its details show", `document.querySelector('#tool-detail-title').textContent === 'Tool follow_logs' && !document.querySelector('#dhand').hidden`)
	br.Step("start the session", chromedp.Click(chromedp.CSS(`#dhand-start`)))
	br.Until("the session started", `((document.querySelector('[data-dhand="session_id"]') || {}).textContent || '').length > 1 && !document.querySelector('#dhand-poll').disabled`)
	sessionID := br.Text(`[data-dhand="session_id"]`)
	br.Step("poll it", chromedp.Click(chromedp.CSS(`#dhand-poll`)))
	br.Until("the poll answered", `!!document.querySelector('[data-dhand="items"]')`)
	br.Show("live")
	br.Until("the live screen lists it", `!!document.querySelector('#live-sessions tr[data-live="`+sessionID+`"]')`)
	br.Step("stop it", chromedp.Click(chromedp.CSS(`#live-sessions button[data-stop="sessions/`+sessionID+`"]`)))
	br.Until("it is stopped", `document.querySelector('#status').textContent.includes('`+sessionID+`') && !document.querySelector('#live-sessions tr[data-live="`+sessionID+`"]')`)

	// build_report, a job of the demo's file, cancelled.
	br.Show("tools")
	br.Step("open build_report", browsertest.Fill(`#tools-filter`, "build_report"), chromedp.Click(chromedp.CSS(`button[data-tool="build_report"]`)))
	br.Until("its details show", `document.querySelector('#tool-detail-title').textContent === 'Tool build_report' && !document.querySelector('#dhand').hidden`)
	br.Step("start the job", chromedp.Click(chromedp.CSS(`#dhand-start`)))
	br.Until("the job started", `((document.querySelector('[data-dhand="job_id"]') || {}).textContent || '').length > 1 && !document.querySelector('#dhand-cancel').disabled`)
	br.Step("cancel it", chromedp.Click(chromedp.CSS(`#dhand-cancel`)))
	br.Until("it is cancelled", `['canceled', 'canceling'].includes((document.querySelector('[data-dhand="status"]') || {}).textContent)`)
}
