package mcpserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/internal/mcptest"
)

func TestOriginPolicyAllows(t *testing.T) {
	const gatewayHost = "gateway.example.com:8443"
	tests := []struct {
		name    string
		allowed []string
		origin  string
		host    string // request Host; gatewayHost when empty
		want    bool
	}{
		// Loopback origins are always allowed.
		{name: "localhost", origin: "http://localhost:6274", want: true},
		{name: "localhost without port", origin: "http://localhost", want: true},
		{name: "localhost https", origin: "https://localhost:3000", want: true},
		{name: "localhost upper case", origin: "HTTP://LOCALHOST:6274", want: true},
		{name: "localhost subdomain", origin: "http://app.localhost:5173", want: true},
		{name: "127.0.0.1", origin: "http://127.0.0.1:6274", want: true},
		{name: "other 127/8 address", origin: "http://127.10.20.30", want: true},
		{name: "IPv6 loopback", origin: "http://[::1]:8080", want: true},
		{name: "localhost look-alike", origin: "http://localhost.evil.example", want: false},
		{name: "localhost as a subdomain label", origin: "http://evil-localhost:80", want: false},
		{name: "loopback-looking hostname", origin: "http://127.0.0.1.nip.io", want: false},
		{name: "unspecified address", origin: "http://0.0.0.0:8080", want: false},
		{name: "private address", origin: "http://192.168.1.10", want: false},

		// An Origin equal to the request's Host is no proof: a DNS
		// rebinding attacker controls both, so it needs the allow-list.
		{name: "own host", origin: "https://gateway.example.com:8443", want: false},
		{name: "rebinding: Origin and Host both the attacker's", origin: "http://evil.example:8080", host: "evil.example:8080", want: false},
		{name: "own host, allow-listed", allowed: []string{"https://gateway.example.com:8443"}, origin: "https://Gateway.Example.COM:8443", want: true},

		// Other origins need the allow-list.
		{name: "foreign origin", origin: "https://evil.example", want: false},
		{name: "foreign origin, allow-list of others", allowed: []string{"https://app.example.com"}, origin: "https://evil.example", want: false},
		{name: "listed", allowed: []string{"https://app.example.com"}, origin: "https://app.example.com", want: true},
		{name: "listed in mixed case", allowed: []string{"https://App.Example.COM"}, origin: "https://app.example.com", want: true},
		{name: "origin in upper case", allowed: []string{"https://app.example.com"}, origin: "HTTPS://APP.EXAMPLE.COM", want: true},
		{name: "listed with a trailing slash", allowed: []string{"https://app.example.com/"}, origin: "https://app.example.com", want: true},
		{name: "origin with a trailing slash", allowed: []string{"https://app.example.com"}, origin: "https://app.example.com/", want: true},
		{name: "listed with surrounding spaces", allowed: []string{"  https://app.example.com  "}, origin: "https://app.example.com", want: true},
		{name: "listed with a port", allowed: []string{"http://app.example.com:8080"}, origin: "http://app.example.com:8080", want: true},
		{name: "second entry", allowed: []string{"https://a.example", "https://b.example"}, origin: "https://b.example", want: true},
		{name: "other scheme than listed", allowed: []string{"https://app.example.com"}, origin: "http://app.example.com", want: false},
		{name: "other port than listed", allowed: []string{"https://app.example.com"}, origin: "https://app.example.com:8443", want: false},
		{name: "subdomain of listed", allowed: []string{"https://example.com"}, origin: "https://app.example.com", want: false},
		{name: "listed as a suffix", allowed: []string{"https://example.com"}, origin: "https://evilexample.com", want: false},

		// "*" allows everything, even what is never allowed otherwise.
		{name: "star, foreign", allowed: []string{"*"}, origin: "https://evil.example", want: true},
		{name: "star with others", allowed: []string{"https://a.example", "*"}, origin: "https://evil.example", want: true},
		{name: "star, null", allowed: []string{"*"}, origin: "null", want: true},
		{name: "star, garbage", allowed: []string{"*"}, origin: "not an origin", want: true},

		// "null" (sandboxed iframes, file: pages, redirects) and garbage
		// are refused, even when the Host would match.
		{name: "null", origin: "null", want: false},
		{name: "null with an allow-list", allowed: []string{"https://app.example.com"}, origin: "null", want: false},
		{name: "garbage", origin: "not an origin", want: false},
		{name: "bare host", origin: "gateway.example.com:8443", want: false},
		{name: "bare localhost", origin: "localhost:6274", want: false},
		{name: "file scheme", origin: "file:///etc/passwd", want: false},
		{name: "ftp scheme", origin: "ftp://localhost", want: false},
		{name: "javascript scheme", origin: "javascript:alert(1)", want: false},
		{name: "scheme only", origin: "http://", want: false},
		{name: "with a path", allowed: []string{"https://app.example.com"}, origin: "https://app.example.com/page", want: false},
		{name: "localhost with a path", origin: "http://localhost:6274/x", want: false},
		{name: "with a query", allowed: []string{"https://app.example.com"}, origin: "https://app.example.com?x=1", want: false},
		{name: "with credentials", allowed: []string{"https://app.example.com"}, origin: "https://user:pw@app.example.com", want: false},
		{name: "localhost with credentials", origin: "http://user@localhost", want: false},
		{name: "bad escape", origin: "http://%zz", want: false},
		{name: "escaped localhost", origin: "http://%6cocalhost:6274", want: false},
		{name: "IPv6 loopback with a zone", origin: "http://[::1%25lo]:6274", want: false},
		{name: "control character", origin: "http://local\x7fhost", want: false},
		{name: "star as the origin", origin: "*", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newOriginPolicy(tc.allowed)
			if err != nil {
				t.Fatalf("newOriginPolicy(%q): %v", tc.allowed, err)
			}
			if got := p.allows(tc.origin); got != tc.want {
				t.Errorf("allowed %q, Host %q: allows(%q) = %v, want %v", tc.allowed, tc.host, tc.origin, got, tc.want)
			}
		})
	}
}

func TestNewOriginPolicyErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"null",
		"app.example.com",
		"localhost:6274",
		"ftp://app.example.com",
		"https://",
		"https://app.example.com/path",
		"https://app.example.com?x=1",
		"https://user:pw@app.example.com",
		"http://%zz",
		"http://%61pp.example.com",
		"http://[fe80::1%25eth0]:8080",
		"**",
	} {
		t.Run(bad, func(t *testing.T) {
			_, err := newOriginPolicy([]string{"https://ok.example", bad})
			if err == nil {
				t.Fatalf("newOriginPolicy accepted %q", bad)
			}
			if !strings.Contains(err.Error(), `"`+bad+`"`) {
				t.Errorf("error %q does not name the entry %q", err, bad)
			}
		})
	}
}

func TestNewOriginPolicyNormalizes(t *testing.T) {
	p, err := newOriginPolicy([]string{"HTTPS://App.Example.com/", " http://b.example:8080 ", "*"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.any {
		t.Error(`"*" did not set any`)
	}
	for _, want := range []string{"https://app.example.com", "http://b.example:8080"} {
		if !p.allowed[want] {
			t.Errorf("allowed %v lacks %q", p.allowed, want)
		}
	}
	if len(p.allowed) != 2 {
		t.Errorf("allowed = %v, want 2 entries", p.allowed)
	}
}

// TestServeHTTPRefusesOrigin checks the 403 answer to a disallowed Origin
// from an endpoint without a host: the refusal must happen before the MCP
// transport is reached, and without waiting for a host.
func TestServeHTTPRefusesOrigin(t *testing.T) {
	ep, err := New(Options{AllowedOrigins: []string{"https://app.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, origin := range []string{
		"https://evil.example",
		"null",
		"http://localhost.evil.example",
		`https://"quoted".example`,
		`https://back\slash.example`,
		"https://évil.example",
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			t.Run(method+" "+origin, func(t *testing.T) {
				r := httptest.NewRequest(method, "http://gateway.example.com/mcp", strings.NewReader(`{}`))
				r.Header.Set("Origin", origin)
				w := httptest.NewRecorder()
				ep.ServeHTTP(w, r)
				mcptest.CheckOriginRefusal(t, w.Code, w.Header(), w.Body.Bytes(), origin)
			})
		}
	}
}

// TestServeHTTPRefusalIsJSONForAnyOrigin documents a bug: the 403 body is
// built with %q (Go quoting), which is not JSON for every string. A
// request's Origin may hold bytes >= 0x80 that are not UTF-8 (net/http
// accepts them in header values); %q writes them as \xNN, which JSON does
// not allow, so the client gets an unparsable body.
func TestServeHTTPRefusalIsJSONForAnyOrigin(t *testing.T) {
	ep, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	origin := "https://ev\xffil.example"
	r := httptest.NewRequest(http.MethodPost, "http://gateway.example.com/mcp", nil)
	r.Header.Set("Origin", origin)
	w := httptest.NewRecorder()
	ep.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Fatalf("status %d, want 403", w.Code)
	}
	if !json.Valid(w.Body.Bytes()) {
		t.Fatalf("the 403 body for Origin %q is not JSON: %s", origin, w.Body.String())
	}
}

// On a loopback listener, a request naming another Host — a page whose DNS
// name was rebound to 127.0.0.1 — is refused before anything else looks at
// it, with a JSON-RPC error that says which URLs work; loopback names pass.
func TestLoopbackListenerRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	ep, err := New(testOptions("default"))
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(newTestHost(t, fmt.Sprintf(mcptest.UsersOps, "http://127.0.0.1:1"), nil, nil), nil)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	post := func(host, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, host := range []string{"evil.example.com", "evil.example.com:" + port, "localhost.evil.example:" + port, "10.0.0.1:" + port} {
		for _, body := range []string{mcptest.InitializeBody, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`} {
			resp, got := post(host, body)
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get(sessionIDHeader) != "" ||
				!strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "DNS rebinding") ||
				!strings.Contains(got, "http://localhost:"+port) {
				t.Errorf("Host %q: %s %s", host, resp.Status, got)
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "127.0.0.2:" + port, "[::1]:" + port, "localhost"} {
		if resp, got := post(host, mcptest.InitializeBody); resp.StatusCode != http.StatusOK || resp.Header.Get(sessionIDHeader) == "" {
			t.Errorf("Host %q: %s %s", host, resp.Status, got)
		}
	}
}

// FuzzOriginPolicy: a normalised origin is scheme://host[:port] in lower
// case and normalises to itself; an origin the allow-list names is
// allowed; without an allow-list only origins whose host is localhost,
// *.localhost or a loopback address pass, read here independently of
// net/url, so a parser quirk cannot let another host through.
func FuzzOriginPolicy(f *testing.F) {
	for _, s := range [][2]string{
		{"http://localhost:6274", ""}, {"HTTP://LOCALHOST", ""}, {"http://app.localhost:5173", ""},
		{"http://127.0.0.1:1", ""}, {"http://[::1]:8080", ""}, {"http://localhost.evil.example", ""},
		{"http://localhost@evil.example", ""}, {"http://evil.example\\@localhost", ""}, {"null", ""},
		{"https://app.example.com", "https://App.Example.com/"}, {"http://[::ffff:127.0.0.1]", ""},
		{"http://127.0.0.1.nip.io", ""}, {"http://0x7f.1", ""}, {"http://%6cocalhost", ""},
		{"http://localhost:80/path", ""}, {" http://localhost ", ""}, {"http://[fe80::1%25lo]:1", ""},
		{"http://my_host:8080", "http://my_host:8080"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, origin, allowed string) {
		if n, err := normalizeOrigin(origin); err == nil {
			if again, err := normalizeOrigin(n); err != nil || again != n {
				t.Fatalf("normalizeOrigin(%q) = %q, which normalises to %q, %v", origin, n, again, err)
			}
			if n != strings.ToLower(n) || !(strings.HasPrefix(n, "http://") || strings.HasPrefix(n, "https://")) {
				t.Fatalf("normalizeOrigin(%q) = %q", origin, n)
			}
		}
		if p, err := newOriginPolicy([]string{allowed}); err == nil && allowed != "*" && !p.allows(allowed) {
			t.Fatalf("allowed origin %q is refused", allowed)
		}
		empty, _ := newOriginPolicy(nil)
		if empty.allows(origin) && !loopbackOrigin(origin) {
			t.Fatalf("origin %q passes without an allow-list", origin)
		}
	})
}

// loopbackOrigin reads an origin's host by hand: the text between "://"
// and the first "/", "?" or "#", without a port; no userinfo, no percent
// escapes.
func loopbackOrigin(origin string) bool {
	_, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(origin)), "://")
	if !ok {
		return false
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if strings.ContainsAny(rest, "@%\\") {
		return false
	}
	host := rest
	if h, _, err := net.SplitHostPort(rest); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
