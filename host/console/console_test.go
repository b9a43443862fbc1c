package console

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/admin"
)

// accessCase is one request to the console and what it must answer.
type accessCase struct {
	name, method, remote, local, host, path string
	hdr                                     map[string]string
	status                                  int
	want                                    string
}

// serve sends c's request to h (arriving on the listener c.local, a
// loopback one when empty) and checks the answer.
func (c accessCase) serve(t *testing.T, h http.Handler) {
	t.Helper()
	r := httptest.NewRequest(c.method, c.path, strings.NewReader(""))
	r.RemoteAddr, r.Host = c.remote, c.host
	local := c.local
	if local == "" {
		local = "127.0.0.1:8080"
	}
	if local != "none" {
		addr, err := net.ResolveTCPAddr("tcp", local)
		if err != nil {
			t.Fatal(err)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	for k, v := range c.hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, _ := io.ReadAll(w.Result().Body)
	if w.Code != c.status || !strings.Contains(string(body), c.want) {
		t.Fatalf("%d %s, want %d containing %q", w.Code, body, c.status, c.want)
	}
}

func testHandler(loopback bool, gotPath, gotCaller *string) *Handler {
	return &Handler{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			*gotPath = r.URL.Path + "?" + r.URL.RawQuery
			*gotCaller = admin.CallerOf(r.Context())
			w.WriteHeader(http.StatusTeapot)
		}),
		User:                 func(r *http.Request) string { return r.Header.Get("Test-User") },
		LoopbackWithoutLogin: loopback,
	}
}

// Without loopback_without_login every request needs a user an
// authentication handler named, wherever it comes from; a change must
// come from the console's own page.
func TestAccess(t *testing.T) {
	t.Parallel()
	var gotPath, gotCaller string
	h := testHandler(false, &gotPath, &gotCaller)
	alice := map[string]string{"Test-User": "alice"}
	for _, c := range []accessCase{
		{name: "loopback without a user", method: "GET", remote: "127.0.0.1:5000", host: "localhost:8080", path: "/console/",
			status: 403, want: "needs a user"},
		{name: "api read on loopback without a user", method: "GET", remote: "127.0.0.1:5000", host: "localhost:8080", path: "/console/api/catalogs",
			status: 403, want: "loopback_without_login"},
		// A non-browser client sends the Origin the check wants: without
		// a user it still gets nothing.
		{name: "matching Origin without a user", method: "POST", remote: "127.0.0.1:5000", host: "localhost:8080", path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}, status: 403, want: "needs a user"},
		{name: "authenticated remote", method: "GET", remote: "192.0.2.7:5000", local: "192.0.2.1:443", host: "gw.example", path: "/console/",
			hdr: alice, status: 200, want: "<title>Crank console</title>"},
		{name: "authenticated through a proxy", method: "GET", remote: "127.0.0.1:5000", host: "localhost:8080", path: "/console/app.js",
			hdr: map[string]string{"Test-User": "alice", "X-Forwarded-For": "198.51.100.4"}, status: 200, want: "loadCatalogs"},
		{name: "redirect to the slash", method: "GET", remote: "192.0.2.7:5000", host: "gw.example", path: "/console", hdr: alice, status: 302},
		{name: "api read", method: "GET", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/api/catalogs?limit=5", hdr: alice, status: 418},
		{name: "change without Origin", method: "POST", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/api/catalogs/x/validate",
			hdr: alice, status: 403, want: "Origin missing"},
		{name: "change from another site", method: "POST", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Test-User": "alice", "Origin": "http://evil.example"}, status: 403, want: "own page"},
		{name: "cross-site fetch", method: "POST", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Test-User": "alice", "Origin": "http://gw.example", "Sec-Fetch-Site": "cross-site"}, status: 403, want: "Sec-Fetch-Site"},
		{name: "change from the page", method: "POST", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Test-User": "alice", "Origin": "http://gw.example", "Sec-Fetch-Site": "same-origin"}, status: 418},
		{name: "post to the page", method: "POST", remote: "192.0.2.7:5000", host: "gw.example", path: "/console/",
			hdr: map[string]string{"Test-User": "alice", "Origin": "http://gw.example"}, status: 405, want: "not allowed"},
		{name: "outside the prefix", method: "GET", remote: "192.0.2.7:5000", host: "gw.example", path: "/other/", hdr: alice, status: 404, want: "served under /console/"},
	} {
		t.Run(c.name, func(t *testing.T) { c.serve(t, h) })
	}

	r := httptest.NewRequest("GET", "/console/api/endpoints", nil)
	r.RemoteAddr, r.Host = "192.0.2.7:1", "gw.example"
	r.Header.Set("Test-User", "alice")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if gotPath != "/crank/endpoints?" || gotCaller != "console:alice" {
		t.Errorf("api got %q as %q", gotPath, gotCaller)
	}
}

// With loopback_without_login the console also answers a loopback client
// without a user, but only one that reached a loopback listener
// directly, asking for a loopback Host: a request a proxy forwarded
// (Forwarded, X-Forwarded-*, Via, X-Real-IP) is refused, naming what.
func TestAccessLoopbackWithoutLogin(t *testing.T) {
	t.Parallel()
	var gotPath, gotCaller string
	h := testHandler(true, &gotPath, &gotCaller)
	const lo, host = "127.0.0.1:5000", "localhost:8080"
	for _, c := range []accessCase{
		{name: "page on loopback", method: "GET", remote: lo, host: host, path: "/console/", status: 200, want: "<title>Crank console</title>"},
		{name: "ipv6 loopback", method: "GET", remote: "[::1]:5000", local: "[::1]:8080", host: "[::1]:8080", path: "/console/app.js", status: 200, want: "loadCatalogs"},
		{name: "change from the page", method: "POST", remote: lo, host: host, path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}, status: 418},
		{name: "change without Origin", method: "POST", remote: lo, host: host, path: "/console/api/catalogs/x/validate", status: 403, want: "Origin missing"},
		{name: "remote client", method: "GET", remote: "192.0.2.7:5000", host: host, path: "/console/", status: 403, want: "client 192.0.2.7 is not on loopback"},
		{name: "rebound Host", method: "GET", remote: lo, host: "evil.example:8080", path: "/console/", status: 403, want: `evil.example:8080\" is not a loopback name`},
		{name: "host named like loopback", method: "GET", remote: lo, host: "127.attacker.example", path: "/console/", status: 403, want: "not a loopback name"},
		{name: "non-loopback listener", method: "GET", remote: lo, local: "192.0.2.1:8080", host: host, path: "/console/", status: 403, want: "listener 192.0.2.1:8080 is not on loopback"},
		{name: "all-interfaces listener", method: "GET", remote: lo, local: "[::]:8080", host: host, path: "/console/api/catalogs", status: 403, want: "is not on loopback"},
		{name: "unknown listener", method: "GET", remote: lo, local: "none", host: host, path: "/console/", status: 403, want: "listener"},
		{name: "X-Forwarded-For", method: "GET", remote: lo, host: host, path: "/console/", hdr: map[string]string{"X-Forwarded-For": "198.51.100.4"}, status: 403, want: "X-Forwarded-For"},
		{name: "X-Forwarded-Host", method: "GET", remote: lo, host: host, path: "/console/api/catalogs", hdr: map[string]string{"X-Forwarded-Host": "gw.example"}, status: 403, want: "X-Forwarded-Host"},
		{name: "Forwarded", method: "POST", remote: lo, host: host, path: "/console/api/catalogs/x/validate",
			hdr: map[string]string{"Forwarded": "for=198.51.100.4", "Origin": "http://localhost:8080"}, status: 403, want: "Forwarded"},
		{name: "Via", method: "GET", remote: lo, host: host, path: "/console/", hdr: map[string]string{"Via": "1.1 proxy"}, status: 403, want: "Via"},
		{name: "X-Real-IP", method: "GET", remote: lo, host: host, path: "/console/", hdr: map[string]string{"X-Real-IP": "198.51.100.4"}, status: 403, want: "X-Real-Ip"},
		{name: "a user through a proxy", method: "GET", remote: lo, host: "gw.example", path: "/console/",
			hdr: map[string]string{"Test-User": "alice", "Via": "1.1 proxy"}, status: 200, want: "Crank console"},
	} {
		t.Run(c.name, func(t *testing.T) { c.serve(t, h) })
	}
	accessCase{method: "GET", remote: lo, host: "localhost", path: "/console/api/catalogs?limit=5", status: 418}.serve(t, h)
	if gotPath != "/crank/catalogs?limit=5" || gotCaller != "console:loopback" {
		t.Errorf("api got %q as %q", gotPath, gotCaller)
	}
}
