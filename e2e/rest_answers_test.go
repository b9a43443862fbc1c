package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRESTBinaryAnswers: an image answer reaches the MCP client as image
// content with its media type, a PDF as an embedded resource with its
// blob, and a redirect to another origin, not followed, says its
// Location.
func TestRESTBinaryAnswers(t *testing.T) {
	t.Parallel()
	png := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0}
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/logo":
			if r.Header.Get("Accept") != "image/png" {
				http.Error(w, "not acceptable", http.StatusNotAcceptable)
				return
			}
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
		case "/report":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write([]byte("%PDF-1.4"))
		case "/download":
			http.Redirect(w, r, other.URL+"/signed/archive.tar?sig=abc", http.StatusFound)
		}
	}))
	t.Cleanup(up.Close)
	ops := fmt.Sprintf(`version: 1
operations:
  - {name: logo, description: The logo., adapter: rest, config: {method: GET, url: "%[1]s/logo", headers: {Accept: image/png}}}
  - {name: report, description: The report., adapter: rest, config: {method: GET, url: "%[1]s/report"}}
  - {name: download, description: The archive., adapter: rest, config: {method: GET, url: "%[1]s/download"}}
`, up.URL)
	g := startGateway(t, gatewayOptions{Operations: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	res := call("logo")
	if img, ok := res.Content[0].(*mcp.ImageContent); res.IsError || !ok || img.MIMEType != "image/png" || string(img.Data) != string(png) {
		t.Errorf("logo content = %#v", res.Content[0])
	}
	res = call("report")
	if r, ok := res.Content[0].(*mcp.EmbeddedResource); res.IsError || !ok || r.Resource == nil ||
		r.Resource.MIMEType != "application/pdf" || string(r.Resource.Blob) != "%PDF-1.4" || r.Resource.URI != up.URL+"/report" {
		t.Errorf("report content = %#v", res.Content[0])
	}
	res = call("download")
	if !res.IsError || !strings.Contains(textOf(res), "Location: "+other.URL+"/signed/archive.tar?sig=abc") {
		t.Errorf("download = %s", textOf(res))
	}
}
