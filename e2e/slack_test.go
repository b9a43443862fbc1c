package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

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
	ctx, cs, tools := importTools(t, doc, base, `
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

// TestGitHubIssuesCreate: GitHub's REST document (@octokit/openapi,
// make octokit-deps) imported by a REST entry; issues/create requires
// title, so the gateway refuses a call without it as an argument error
// and the upstream never sees it. (Today's document declares the body
// required; TestSlackPostMessage covers a body the document leaves
// optional.)
func TestGitHubIssuesCreate(t *testing.T) {
	t.Parallel()
	requireNode(t, "octokit", "@octokit/openapi", "octokit-deps")
	doc := filepath.Join(repoRoot, "e2e", "octokit", "node_modules", "@octokit", "openapi", "generated", "api.github.com.json")
	if _, err := os.Stat(doc); err != nil {
		missing.Tool(t, doc+" is missing", "make octokit-deps: npm ci in e2e/octokit")
	}
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"number":1}`)
	}))
	t.Cleanup(up.Close)
	ctx, cs, _ := importTools(t, doc, up.URL, `
        output_schemas: false
        include: {operation_ids: [issues/create]}`, "issues_create")
	const name = "issues_create"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"owner": "octocat", "repo": "hello", "body": "no title"}})
	msg := fmt.Sprint(err)
	if err == nil {
		if !res.IsError {
			t.Fatalf("%s without title was sent: %s", name, textOf(res))
		}
		msg = textOf(res)
	}
	if !strings.Contains(msg, "title") {
		t.Errorf("the refusal does not name title: %s", msg)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests", n)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"owner": "octocat", "repo": "hello", "title": "Found a bug"}})
	if err != nil || res.IsError {
		t.Fatalf("%s with title: %v %s", name, err, textOf(res))
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
}
