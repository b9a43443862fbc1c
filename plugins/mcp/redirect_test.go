package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// A url upstream's redirects are followed within its origin only: the
// configured headers (credentials) never reach another origin, and the
// call fails naming the refused redirect without its path or query.
func TestRedirectsStayInOrigin(t *testing.T) {
	t.Parallel()
	other := newHTTPUpstream(t, false) // another origin, an MCP server that records Authorization
	mcpHandler := gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return testServer(make(chan struct{}, 1)) }, nil)
	var auth sync.Map // Authorization headers the first origin's /mcp received
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.srv.URL+"/private/path?key=s3cret", http.StatusTemporaryRedirect)
		case "/mcp":
			auth.Store(r.Header.Get("Authorization"), true)
			mcpHandler.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(first.Close)
	h := newHarness(t)
	headers := map[string]string{"Authorization": "Bearer upstream-token"}

	// Within the origin: followed, with the configured header.
	if res, ue := call(t, h, map[string]any{"url": first.URL + "/moved", "headers": headers}, "echo", `{"text": "hi"}`, 5*time.Second); ue != nil || string(res.Structured) != `{"echo":"hi"}` {
		t.Fatalf("a same-origin redirect: %+v %+v", res, ue)
	}
	if _, ok := auth.Load("Bearer upstream-token"); !ok {
		t.Error("the same-origin redirect lost the configured header")
	}

	// To another origin: refused, whether listing the tools or calling one.
	away := map[string]any{"url": first.URL + "/away?token=t0ken", "headers": headers}
	wantIn := func(what, msg string) {
		t.Helper()
		t.Logf("%s: %s", what, msg)
		if !strings.Contains(msg, "redirect") || !strings.Contains(msg, "another origin") || !strings.Contains(msg, other.srv.URL) {
			t.Errorf("%s: %q does not name the refused redirect to %s", what, msg, other.srv.URL)
		}
		for _, secret := range []string{"s3cret", "/private", "t0ken", "/away"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: %q quotes a URL's path or query (%s)", what, msg, secret)
			}
		}
	}
	_, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: away, Timeout: 5 * time.Second})
	if err != nil || len(diags) != 1 || diags[0].Field != "url" {
		t.Errorf("listing the tools through a cross-origin redirect: %+v %v", diags, err)
	} else {
		wantIn("expand", diags[0].Message)
	}
	_, ue := call(t, h, away, "echo", `{"text": "hi"}`, 5*time.Second)
	if ue == nil {
		t.Error("a call through a cross-origin redirect succeeded")
	} else {
		wantIn("call", ue.Message)
	}
	other.auth.Range(func(k, _ any) bool {
		t.Errorf("the other origin received the configured header: Authorization %q", k)
		return true
	})
	if n := other.inits.Load(); n != 0 {
		t.Errorf("the other origin served %d sessions", n)
	}
}
