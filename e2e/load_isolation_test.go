package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// isolationOps serves get_user of up and the pet store's OpenAPI
// document from pets.yaml beside the file, which the test writes later.
func isolationOps(up *upstream) string {
	return fmt.Sprintf(`
operations:
  - name: get_user
    description: Fetch a user by id.
    adapter: rest
    input_schema: {type: object, properties: {id: {type: integer}}, required: [id]}
    config: {method: GET, url: "%s/users/{id}"}
  - name: pets
    adapter: rest
    config: {openapi: {document: pets.yaml, base_url: "%s", credentials: {api_key: k}}}
`, up.URL, up.URL)
}

// One bad upstream is one bad entry: a gateway whose OpenAPI document is
// missing serves its other entry; /crank/tools lists the failed entry
// with its reason, crank_entries_failed counts it and the console's tool
// table shows it; once the document is there, a retry loads it and its
// tools are served, clients told the list changed. With on_load_error
// fail the same config does not start.
func TestOneBadEntry(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: isolationOps(up),
		Site: "crank_console /console* {\n\t\tloopback_without_login\n\t}"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 10)
	cs := g.connectWith(ctx, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	tools := func() []string {
		var out []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Name)
		}
		return out
	}
	if got := tools(); !slices.Equal(got, []string{"get_user"}) {
		t.Fatalf("served: %v", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_user", Arguments: map[string]any{"id": 7}})
	if err != nil || res.IsError {
		t.Fatalf("get_user: %v %s", err, textOf(res))
	}
	if log := g.log.String(); !strings.Contains(log, `"msg":"an entry could not load`) || !strings.Contains(log, `"operation":"pets"`) {
		t.Errorf("no error logged for the entry:\n%s", log)
	}

	var listed struct {
		Tools  []struct{ Name string }
		Failed []struct {
			Entry, Adapter, Error, Endpoint string
			Attempts                        int
			Source                          struct{ Kind, File string }
		}
	}
	getJSON(t, g.AdminURL+"/crank/tools", &listed)
	if len(listed.Failed) != 1 || listed.Failed[0].Entry != "pets" || listed.Failed[0].Adapter != "rest" ||
		listed.Failed[0].Source.File != filepath.Join(g.dir, "ops.yaml") ||
		!strings.HasPrefix(listed.Failed[0].Error, "/config/openapi/document: cannot read ") || listed.Failed[0].Attempts < 1 {
		t.Errorf("failed entries: %+v", listed.Failed)
	}
	if v := g.scrape().get(t, "crank_entries_failed", "entry=pets"); v != 1 {
		t.Errorf("crank_entries_failed{entry=pets} = %v", v)
	}
	if v := g.scrape().get(t, "crank_entry_load_failures_total", "entry=pets"); v < 1 {
		t.Errorf("crank_entry_load_failures_total{entry=pets} = %v", v)
	}

	t.Run("console", func(t *testing.T) {
		browsertest.Chromium(t)
		br := browsertest.New(t, 1280, 800)
		br.Step("open the console", chromedp.Navigate(strings.Replace(g.MCPURL, "/mcp", "/console/", 1)))
		br.Until("the failed entry is a row of the tool table", `!!document.querySelector('tr.failed[data-row="pets"] [data-load-error="pets"]')`)
		if txt := br.Text(`tr[data-row="pets"] [data-load-error]`); !strings.Contains(txt, "Could not load") || !strings.Contains(txt, "cannot read") {
			t.Errorf("the console says of pets: %q", txt)
		}
		if txt := br.Text(`tr[data-row="pets"] .badge`); txt != "not loaded" {
			t.Errorf("pets' badge: %q", txt)
		}
		br.Screenshot("tools-failed-entry.png")
	})

	// The document arrives: a retry loads it.
	writeFile(t, filepath.Join(g.dir, "pets.yaml"), oaPetDoc)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatalf("the entry was not loaded again: %s", g.log.String())
	}
	if got := tools(); !slices.Contains(got, "listPets") || !slices.Contains(got, "get_user") {
		t.Errorf("served after the retry: %v", got)
	}
	getJSON(t, g.AdminURL+"/crank/tools", &listed)
	if len(listed.Failed) != 0 {
		t.Errorf("failed entries after the retry: %+v", listed.Failed)
	}
	if _, ok := g.scrape().value("crank_entries_failed", "entry=pets"); ok {
		t.Error("crank_entries_failed still reports pets")
	}

	// All or nothing.
	opts := gatewayOptions{Operations: isolationOps(up), Handler: "on_load_error fail"}
	if _, err := tryStartGateway(t, opts); err == nil || !strings.Contains(err.Error(), `operation \"pets\": /config/openapi/document: cannot read `) {
		t.Errorf("on_load_error fail: %v", err)
	}
}

// getJSON decodes the JSON answer of a GET of url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
