package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/browsertest"
	"github.com/crankmcp/crank/internal/mcptest"
)

// The console's rate limits in a browser: a catalog's limit is added in
// a form built from the limit's schema (a bad rate is placed beside its
// field, nothing saved), listed with the catalog, and the live screen
// shows the replica's limits — the handler's and the catalog's — with
// the calls each admitted and refused.
func TestConsoleRateLimitsInBrowser(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow,
		"rate_limits": []map[string]any{{"name": "handler_users", "rate": "1/h", "tool": "get_user"}}})
	addConsoleRoute(t, g, loopbackConsole)
	req, _ := http.NewRequest("POST", g.AdminURL+"/crank/catalogs/live/operations", strings.NewReader(fmt.Sprintf(
		`{"name": "cat_user", "description": "v1", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)))
	if code, b := send(t, req, "If-None-Match", "*"); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "console-limits", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.MCPURL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 2 {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 1}})
		if (err != nil) != (i == 1) {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	br := browsertest.New(t, 1280, 800)
	br.Step("open the console", chromedp.Navigate(strings.TrimSuffix(g.MCPURL, "/mcp")+"/console/"))
	br.Show("catalogs")
	br.Step("open the live catalog", browsertest.Fill(`#new-catalog-name`, "live"), chromedp.Click(chromedp.CSS(`#new-catalog button`)))
	br.Until("its rate limits show", `!document.querySelector('#ops-pane').hidden && document.querySelector('#catalog-limits tbody').textContent.includes('None')`)
	br.Step("start a new rate limit", chromedp.Click(chromedp.CSS(`#new-limit`)))
	br.Until("the form shows the limit's fields", `!!document.querySelector('#rl-name') && !!document.querySelector('#rl-rate') && document.querySelector('#rl-per').tagName === 'SELECT'`)
	br.Step("save it with a bad rate",
		browsertest.Fill(`#rl-name`, "catalog_users"), browsertest.Fill(`#rl-rate`, "often"),
		browsertest.Fill(`#rl-per`, "user"), browsertest.Fill(`#rl-tool`, "cat_user"),
		chromedp.Click(chromedp.CSS(`#save-limit`)))
	br.Until("the problem shows beside the rate", `document.querySelector('#rl-rate-err').textContent.includes('<n>/<period>')`)
	br.Step("fix the rate and save", browsertest.Fill(`#rl-rate`, "5/m"), chromedp.Click(chromedp.CSS(`#save-limit`)))
	br.Until("the catalog lists the limit", `!!document.querySelector('#catalog-limits tr[data-limit="catalog_users"]') && document.querySelector('#limit-editor').hidden`)
	if row := br.Text(`#catalog-limits tr[data-limit="catalog_users"]`); !strings.Contains(row, "5/m") || !strings.Contains(row, "tool cat_user") {
		t.Errorf("the catalog's limit row: %q", row)
	}
	br.Show("live")
	deadline := time.Now().Add(time.Minute)
	for {
		br.Step("refresh the live screen", chromedp.Click(chromedp.CSS(`#live-refresh`)))
		br.Until("the live state is listed", `document.querySelector('#view-live').getAttribute('aria-busy') === 'false'`)
		ok, _ := chromedp.Run(br.Ctx, chromedp.Evaluate[bool](`!!document.querySelector('#rate-limits tr[data-rate-limit="catalog_users"]')`))
		if ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	handler := br.Text(`#rate-limits tr[data-rate-limit="handler_users"]`)
	if !strings.Contains(handler, "1 call an hour, for tool get_user, on each replica") || br.Text(`#rate-limits tr[data-rate-limit="handler_users"] td[data-refused]`) != "1" {
		t.Errorf("the handler's limit on the live screen: %q", handler)
	}
	if row := br.Text(`#rate-limits tr[data-rate-limit="catalog_users"]`); !strings.Contains(row, "5 calls a minute per user, for tool cat_user") {
		t.Errorf("the catalog's limit on the live screen: %q", row)
	}
}
