package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/admin"
)

// The console answers loopback clients asking for a loopback Host, or an
// authenticated user; a change must come from its own page.
func TestAccess(t *testing.T) {
	var gotPath, gotCaller string
	h := &Handler{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotPath = r.URL.Path + "?" + r.URL.RawQuery
			gotCaller = admin.CallerOf(r.Context())
			w.WriteHeader(http.StatusTeapot)
		}),
		User: func(r *http.Request) string { return r.Header.Get("Test-User") },
	}
	for _, c := range []struct {
		name, method, remote, host, path string
		hdr                              map[string]string
		status                           int
		want                             string
	}{
		{"page on loopback", "GET", "127.0.0.1:5000", "localhost:8080", "/console/", nil, 200, "<title>Crank console</title>"},
		{"ipv6 loopback", "GET", "[::1]:5000", "[::1]:8080", "/console/app.js", nil, 200, "loadCatalogs"},
		{"redirect to the slash", "GET", "127.0.0.1:5000", "127.0.0.1:8080", "/console", nil, 302, ""},
		{"remote client", "GET", "192.0.2.7:5000", "localhost:8080", "/console/", nil, 403, "only loopback clients"},
		{"rebound Host", "GET", "127.0.0.1:5000", "evil.example:8080", "/console/", nil, 403, "Host names on loopback"},
		{"authenticated remote", "GET", "192.0.2.7:5000", "gw.example", "/console/", map[string]string{"Test-User": "alice"}, 200, "Crank console"},
		{"api read", "GET", "127.0.0.1:5000", "localhost:8080", "/console/api/catalogs?limit=5", nil, 418, ""},
		{"change without Origin", "POST", "127.0.0.1:5000", "localhost:8080", "/console/api/catalogs/x/validate", nil, 403, "Origin missing"},
		{"change from another site", "POST", "127.0.0.1:5000", "localhost:8080", "/console/api/catalogs/x/validate",
			map[string]string{"Origin": "http://evil.example"}, 403, "own page"},
		{"cross-site fetch", "POST", "127.0.0.1:5000", "localhost:8080", "/console/api/catalogs/x/validate",
			map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
		{"change from the page", "POST", "127.0.0.1:5000", "localhost:8080", "/console/api/catalogs/x/validate",
			map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}, 418, ""},
		{"post to the page", "POST", "127.0.0.1:5000", "localhost:8080", "/console/",
			map[string]string{"Origin": "http://localhost:8080"}, 405, "not allowed"},
		{"outside the prefix", "GET", "127.0.0.1:5000", "localhost:8080", "/other/", nil, 404, "served under /console/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gotPath, gotCaller = "", ""
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(""))
			r.RemoteAddr, r.Host = c.remote, c.host
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			body, _ := io.ReadAll(w.Result().Body)
			if w.Code != c.status || !strings.Contains(string(body), c.want) {
				t.Fatalf("%d %s, want %d containing %q", w.Code, body, c.status, c.want)
			}
		})
	}

	r := httptest.NewRequest("GET", "/console/api/catalogs?limit=5", nil)
	r.RemoteAddr, r.Host = "127.0.0.1:1", "localhost"
	h.ServeHTTP(httptest.NewRecorder(), r)
	if gotPath != "/crank/catalogs?limit=5" || gotCaller != "console:loopback" {
		t.Errorf("api got %q as %q", gotPath, gotCaller)
	}
	r = httptest.NewRequest("GET", "/console/api/endpoints", nil)
	r.RemoteAddr, r.Host = "192.0.2.7:1", "gw.example"
	r.Header.Set("Test-User", "alice")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if gotPath != "/crank/endpoints?" || gotCaller != "console:alice" {
		t.Errorf("api got %q as %q", gotPath, gotCaller)
	}
}
