package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/crankmcp/crank/internal/browsertest"
)

// The demo's per-user consent as a new user meets it with `make run`
// (the repository's Caddyfile and demo files, on ports of the test's
// own): the TypeScript SDK v2 client (e2e/ts/notes.mjs, the guide's
// walkthrough) signs ada in to the /notes endpoint at its authorization
// server, the demo notes service (its metadata, RFC 7591 registration,
// PKCE, the endpoint as RFC 8707 resource), in Chromium; my_notes sends
// her the consent link as a URL elicitation; her browser passes the
// callback's basic_auth and allows access at the service; the call
// answers her notes. Then she revokes the access at the service's
// account page: the next call's token is refused (401), its refresh too,
// and the call asks her to consent again. She revokes through
// upstream_grants (RFC 7009 at the service): the next call asks again,
// and grace, opening ada's link, is refused.
func TestDemoNotesConsent(t *testing.T) {
	t.Parallel()
	browsertest.Chromium(t)
	requireNode(t, "ts", "@modelcontextprotocol/client", "ts-deps")
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "guide", "auth-and-policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), `node e2e/ts/notes.mjs http://127.0.0.1:8080/notes '[{"tool":"my_notes"}]'`) {
		t.Fatal("the guide's walkthrough of the demo's consent (docs/guide/auth-and-policy.md) no longer runs e2e/ts/notes.mjs as this test does; update this test")
	}
	d := startDemo(t)
	gateway := fmt.Sprintf("http://127.0.0.1:%d", d.ports[":8080"])
	service := fmt.Sprintf("http://127.0.0.1:%d", d.ports[":8085"])
	ada := newConsentBrowserAt(t, "ada", "lovelace", "/notes/oauth/callback")

	run := startNotesClient(t, gateway+"/notes", `[{"tool":"my_notes"},{"wait":true},{"tool":"my_notes"},
		{"tool":"upstream_grants","arguments":{"revoke":"notes"}},{"tool":"my_notes"}]`)
	var signin string
	run.next(t, "signin", &signin)
	if !strings.HasPrefix(signin, service+"/authorize?") || !strings.Contains(signin, "code_challenge_method=S256") ||
		!strings.Contains(signin, "resource="+url.QueryEscape(gateway+"/notes")) {
		t.Fatalf("the sign-in link: %s", signin)
	}
	ada.signIn(t, signin, "ada")

	notesOf := func(who, want, not string) {
		t.Helper()
		var res json.RawMessage
		run.next(t, "result", &res)
		if !strings.Contains(string(res), want) || strings.Contains(string(res), not) || strings.Contains(string(res), `"isError":true`) {
			t.Fatalf("%s's notes: %s", who, res)
		}
	}
	el := run.elicitation(t)
	if el.Mode != "url" || !strings.HasPrefix(el.URL, service+"/authorize?") || !strings.Contains(el.URL, "client_id=crank-demo") ||
		!strings.Contains(el.URL, "scope=notes.read") {
		t.Fatalf("the consent link: %+v", el)
	}
	ada.consent(t, el.URL, "ada", 200)
	notesOf("ada", "Note G", "ship in port")

	// Revoked at the service: the gateway still holds the tokens; the
	// call's is refused, its refresh too, and the call asks again.
	ada.Step("open the service's account page", chromedp.Navigate(service+"/"))
	ada.Step("revoke every app's access", browsertest.Fill(`#username`, "ada"), browsertest.Fill(`#password`, "lovelace"),
		chromedp.Click(chromedp.CSS(`#login`)))
	ada.Until("the service says it revoked", `(document.querySelector('#revoked') || {}).textContent?.includes('grants ended')`)
	run.resume(t)
	ada.consent(t, run.elicitation(t).URL, "ada", 200)
	notesOf("ada", "Note G", "ship in port")
	if m := getText(t, d.admin()+"/metrics"); !hasSample(m, "crank_upstream_grant_refreshes_total", `result="invalid"`, `upstream="notes"`) {
		t.Error("no refused refresh counted after the revocation at the service")
	}

	// Revoked through the tool: gone here and at the service.
	var res json.RawMessage
	run.next(t, "result", &res)
	if !strings.Contains(string(res), `"revoked":true`) || !strings.Contains(string(res), `"provider":"revoked"`) {
		t.Fatalf("ada's revocation: %s", res)
	}
	el = run.elicitation(t)
	grace := newConsentBrowserAt(t, "grace", "hopper", "/notes/oauth/callback")
	grace.consent(t, el.URL, "grace", 403)
	grace.expect(t, "Not connected", "started by another user")
	ada.consent(t, el.URL, "ada", 200)
	notesOf("ada", "Note G", "ship in port")
	run.next(t, "done", nil)
}

// hasSample reports whether a Prometheus text exposition has a sample of
// name with every label given and a value above zero.
func hasSample(text, name string, labels ...string) bool {
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if f := strings.Fields(line); all && len(f) == 2 && f[1] != "0" {
			return true
		}
	}
	return false
}

// signIn signs the user in at the demo notes service's page of a
// sign-in link and waits for the client's loopback page.
func (b *consentBrowser) signIn(t *testing.T, link, user string) {
	t.Helper()
	b.open(t, link)
	b.Until("the service's sign-in page shows", `!!document.querySelector('#username')`)
	b.Step("sign in as "+user, browsertest.Fill(`#username`, user), browsertest.Fill(`#password`, b.password), chromedp.Click(chromedp.CSS(`#login`)))
	b.Until("the client's page says signed in", `!!document.querySelector('#signedin')`)
}

// notesRun is one run of e2e/ts/notes.mjs.
type notesRun struct{ *nodeRun }

func startNotesClient(t *testing.T, endpoint, steps string) *notesRun {
	t.Helper()
	return &notesRun{startNode(t, "notes.mjs", endpoint, steps)}
}

// next reads the client's next line, skipping elicitation/complete
// notifications: it must hold key, whose value goes to v.
func (r *notesRun) next(t *testing.T, key string, v any) {
	t.Helper()
	for line := range r.lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("client output %q: %v", line, err)
		}
		if _, ok := m["complete"]; ok && key != "complete" {
			continue
		}
		val, ok := m[key]
		if !ok {
			t.Fatalf("the client printed %s, want %s", line, key)
		}
		if v != nil {
			if err := json.Unmarshal(val, v); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	t.Fatalf("the client ended before %s", key)
}

func (r *notesRun) elicitation(t *testing.T) consentElicitation {
	t.Helper()
	var el consentElicitation
	r.next(t, "elicit", &el)
	return el
}

// resume ends the client's wait step.
func (r *notesRun) resume(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, "\n"); err != nil {
		t.Fatal(err)
	}
}
