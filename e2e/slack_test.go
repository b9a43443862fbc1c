package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/internal/missing"
)

// startPrism runs Prism (make prism-deps) as a validating mock of the
// OpenAPI document doc and returns its base URL: it refuses a request
// the document does not allow (422) instead of answering an example.
func startPrism(t *testing.T, doc string) string {
	t.Helper()
	requireNode(t, "prism", "@stoplight/prism-cli", "prism-deps")
	return startAnnounced(t, exec.Command(filepath.Join(repoRoot, "e2e", "prism", "node_modules", ".bin", "prism"),
		"mock", "--errors", "-h", "127.0.0.1", "-p", "0", doc), "Prism is listening on ")
}

// TestSlackPostMessage: Slack's Web API document (from the APIs-guru
// directory, e2e/testdata/slack.com.json) imported by a REST entry;
// chat_postMessage publishes its form body's channel and text, and they
// arrive as form fields at Prism, which validates the request against
// the same document.
func TestSlackPostMessage(t *testing.T) {
	t.Parallel()
	doc := filepath.Join(repoRoot, "e2e", "testdata", "slack.com.json")
	prism := startPrism(t, doc)
	// Prism validates: a form body without channel is refused.
	req, _ := http.NewRequest(http.MethodPost, prism+"/chat.postMessage", strings.NewReader("text=hi"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Token", "xoxb-e2e")
	req.Header.Set("Authorization", "Bearer xoxb-e2e")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode < 400 {
		t.Fatalf("Prism accepted a chat.postMessage without channel: %s", resp.Status)
	}
	base, wire := recordingProxy(t, prism)
	ctx, _, cs, tools := importTools(t, doc, base, `
        credentials: {slackAuth: xoxb-e2e-oauth}
        include: {operation_ids: [chat_postMessage]}`, "chat_postMessage")
	schema := fmt.Sprint(tools["chat_postMessage"].InputSchema)
	for _, arg := range []string{"channel", "text", "token"} {
		if !strings.Contains(schema, arg+":") {
			t.Errorf("chat_postMessage lacks the argument %s: %s", arg, schema)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat_postMessage", Arguments: map[string]any{
		"token": "xoxb-e2e", "channel": "C024BE91L", "text": "Hello from Crank & friends",
	}})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	if res.IsError {
		t.Errorf("Prism refused chat_postMessage: %s\n%s", textOf(res), wire())
	} else {
		accepted++
	}
	t.Logf("Prism accepted %d/1 requests", accepted)
	if w := wire(); !strings.Contains(w, "POST /chat.postMessage application/x-www-form-urlencoded\n") ||
		!strings.Contains(w, "channel=C024BE91L") || !strings.Contains(w, "text=Hello+from+Crank+%26+friends") {
		t.Errorf("channel and text did not arrive as form fields:\n%s", w)
	}
	// channel is required by the body's schema, though the document
	// leaves the body optional (requestBody.required defaults to false):
	// the gateway refuses the call without it, naming it, and Prism never
	// sees it.
	before := wire()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "chat_postMessage", Arguments: map[string]any{"token": "xoxb-e2e", "text": "no channel"}})
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), "channel") {
			t.Errorf("the refusal does not name channel: %v", err)
		}
	case !res.IsError:
		t.Errorf("chat_postMessage without channel was sent: %s", textOf(res))
	case !strings.Contains(textOf(res), "channel"):
		t.Errorf("the refusal does not name channel: %s", textOf(res))
	}
	if wire() != before {
		t.Errorf("a call without channel reached Prism:\n%s", wire())
	}
}

// TestGitHubIssuesCreate: GitHub's whole REST document (@octokit/openapi,
// make octokit-deps) imported by a REST entry against Prism serving the
// same document, called through the official TypeScript client:
// issues/create with a title reaches Prism and is answered; without title
// the gateway refuses the call as an argument error and Prism never
// sees it. (Today's document declares the body required;
// TestSlackPostMessage covers a body the document leaves optional.)
func TestGitHubIssuesCreate(t *testing.T) {
	t.Parallel()
	requireNode(t, "octokit", "@octokit/openapi", "octokit-deps")
	doc := filepath.Join(repoRoot, "e2e", "octokit", "node_modules", "@octokit", "openapi", "generated", "api.github.com.json")
	if _, err := os.Stat(doc); err != nil {
		missing.Tool(t, doc+" is missing", "make octokit-deps: npm ci in e2e/octokit")
	}
	began := time.Now()
	prism := startPrism(t, doc)
	t.Logf("Prism served GitHub's document after %v", time.Since(began).Round(time.Millisecond))
	// Prism validates the path and headers of issues/create but passes
	// any body: it cannot compile the body's schema (milestone has
	// nullable beside oneOf, without type, which Ajv refuses) and says
	// "The request passed the validation rules". The refusal without
	// title below is the gateway's alone.
	base, wire := recordingProxy(t, prism)
	began = time.Now()
	ctx, g, _, tools := importTools(t, doc, base, "")
	t.Logf("GitHub's whole document: %d tools on the first page, served and listed in %v", len(tools), time.Since(began).Round(time.Millisecond))
	const name = "issues_create"
	steps := tsSteps(ctx, t, g.MCPURL, `[
	  {"op":"listTools","all":true,"summary":true},
	  {"op":"callTool","name":"`+name+`","arguments":{"owner":"octocat","repo":"hello","body":"no title"}},
	  {"op":"callTool","name":"`+name+`","arguments":{"owner":"octocat","repo":"hello","title":"Found a bug","labels":["bug"]}}
	]`)
	if len(steps) != 3 {
		t.Fatalf("client.mjs ran %d steps, want 3", len(steps))
	}
	if l := steps[0]; !l.OK || l.Result.Count < len(tools) {
		t.Fatalf("the TypeScript client's tools/list: %+v", l)
	} else {
		t.Logf("the TypeScript client listed %d tools, compiled %d output schemas", l.Result.Count, l.Result.OutputSchemas)
	}
	if s := steps[1]; s.OK && !s.Result.IsError {
		t.Errorf("%s without title was sent: %s", name, s.text())
	} else if !strings.Contains(s.text(), "title") {
		t.Errorf("the refusal does not name title: %s", s.text())
	}
	s := steps[2]
	switch {
	case !s.OK || s.Result.IsError:
		t.Errorf("%s with title refused: %s\n%s", name, s.text(), wire())
	case s.Result.StructuredContent["number"] == nil:
		t.Errorf("%s answered no issue: %v", name, s.Result.StructuredContent)
	case !s.Result.Validated:
		// The client holds a validator for every tool that publishes an
		// output schema; issue's graph is over the default
		// output_schema_limits.
		t.Logf("%s publishes no output schema: its answer is not checked", name)
	}
	// One request reached Prism: the one with a title.
	if w := wire(); strings.Count(w, "\n---\n") != 0 || !strings.HasPrefix(w, "POST /repos/octocat/hello/issues application/json\n") ||
		!strings.Contains(w, `"title":"Found a bug"`) {
		t.Errorf("Prism got other than the one call with a title:\n%s", w)
	}
}
