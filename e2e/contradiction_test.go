package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// TestUpstreamContradictsItsDocument: a gateway imports the Swagger
// Petstore's own OpenAPI document (from @readme/oas-examples, pinned in
// e2e/ts) and sits in front of a pet store whose answers contradict it,
// as real ones do: a pet without its required photoUrls, a status the
// document's enum lacks, members and a date the document does not name.
// The TypeScript SDK v1 and v2 clients, which refuse structuredContent
// that breaks a tool's output schema, get the data with no protocol
// error (as text, behind a note naming the mismatch); an answer that only
// drifts where the published schema is lenient (unnamed members)
// matches. The metric counts the mismatches, the admin API's tool list
// has them, and the operator console shows them in its tool table.
func TestUpstreamContradictsItsDocument(t *testing.T) {
	t.Parallel()
	requireTSClient(t)
	doc := filepath.Join(repoRoot, "e2e", "ts", "node_modules", "@readme", "oas-examples", "3.0", "json", "petstore.json")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/pet/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") == "1" { // only drifts: a member the document does not name
			fmt.Fprint(w, `{"id":1,"name":"doggie","photoUrls":["https://example.com/1.png"],"status":"available","microchip":"982000123456789"}`)
			return
		}
		fmt.Fprint(w, `{"id":7,"name":"doggie","status":"adopted","adoptedAt":"last week"}`)
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	g := startGateway(t, gatewayOptions{Operations: `version: 1
operations:
  - name: petstore
    adapter: rest
    timeout: 5s
    config:
      openapi:
        document: ` + doc + `
        base_url: ` + up.URL + `/v2
        include: {operation_ids: [getPetById]}
        credentials: {api_key: special-key}
`, Site: "\tcrank_console /console* {\n\t\tloopback_without_login\n\t}"})

	plan := map[string]any{"args": map[string]any{"getPetById": map[string]any{"petId": 7}}}
	for _, client := range contractClients {
		run := runContract(t, g.MCPURL, client, plan)
		if len(run.Calls) != 1 {
			t.Fatalf("%s: calls %+v", client, run.Calls)
		}
		c := run.Calls[0]
		if c.Error != nil || !c.IsError || c.StructuredContent != nil ||
			!strings.Contains(c.Text, `does not match the output schema tool "getPetById" publishes (at /status: must be one of`) ||
			!strings.Contains(c.Text, `"adoptedAt":"last week"`) {
			t.Errorf("%s: %+v", client, c)
		}
		drift := runContract(t, g.MCPURL, client, map[string]any{"args": map[string]any{"getPetById": map[string]any{"petId": 1}}})
		if c := drift.Calls[0]; c.Error != nil || c.IsError || c.StructuredContent["microchip"] == nil {
			t.Errorf("%s: a member the document does not name: %+v", client, c)
		}
	}
	if v := g.scrape().get(t, "crank_output_mismatch_total", "tool=getPetById"); v != float64(len(contractClients)) {
		t.Errorf("crank_output_mismatch_total{tool=getPetById} = %v, want %d", v, len(contractClients))
	}
	resp, err := http.Get(g.AdminURL + "/crank/tools")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var tools struct {
		Tools []struct {
			Name  string
			Calls struct {
				Calls            int64 `json:"calls"`
				OutputMismatches int64 `json:"output_mismatches"`
			}
		}
	}
	if err := json.Unmarshal(body, &tools); err != nil || len(tools.Tools) != 1 || tools.Tools[0].Calls.OutputMismatches != int64(len(contractClients)) {
		t.Errorf("/crank/tools: %v %s", err, body)
	}

	br := browsertest.New(t, 1280, 800) // the checks above are done: without Chromium it skips here
	br.Step("open the console", chromedp.Navigate(strings.TrimSuffix(g.MCPURL, "/mcp")+"/console/"))
	br.Until("getPetById's output mismatches are shown",
		`Number((document.querySelector('tr[data-row="getPetById"] [data-output-mismatches]') || {dataset: {}}).dataset.outputMismatches) === `+
			fmt.Sprint(len(contractClients)))
	if text := br.Text(`tr[data-row="getPetById"] .count`); !strings.Contains(text, fmt.Sprintf("%d output mismatches", len(contractClients))) {
		t.Errorf("the tool table says %q", text)
	}
}
