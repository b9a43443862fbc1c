package httpadapter

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
)

func TestReadBounded(t *testing.T) {
	t.Parallel()
	data := strings.Repeat("0123456789", 100) // 1000 bytes
	for _, tc := range []struct {
		limit, hint int64
		over        bool
	}{
		{1000, -1, false}, {1000, 1000, false}, {999, -1, true}, {999, 1000, true},
		{5000, -1, false}, {10, -1, true}, {1000, 10, false}, {0, -1, true},
	} {
		b, over, err := ReadBounded(iotest.OneByteReader(strings.NewReader(data)), tc.limit, tc.hint)
		if err != nil || over != tc.over {
			t.Errorf("limit %d hint %d: over %v err %v", tc.limit, tc.hint, over, err)
			continue
		}
		want := data
		if over {
			want = data[:tc.limit]
		}
		if string(b) != want {
			t.Errorf("limit %d hint %d: read %d bytes", tc.limit, tc.hint, len(b))
		}
		if int64(cap(b)) > max(tc.limit+1, 512) {
			t.Errorf("limit %d: buffer grew to %d", tc.limit, cap(b))
		}
	}
	_, _, err := ReadBounded(iotest.ErrReader(io.ErrUnexpectedEOF), 10, -1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v", err)
	}
}

func TestDescribeTransport(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error {
		return &url.Error{Op: "Get", URL: "http://h/x?token=SECRET", Err: err}
	}
	for _, tc := range []struct {
		err     error
		reading bool
		want    string
		retry   retryClass
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false, "connection refused", retryAlways},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false, "reset", retryIdempotent},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, "reset while reading", retryIdempotent},
		{io.EOF, false, "closed the connection without answering", retryIdempotent},
		{io.ErrUnexpectedEOF, true, "before the answer was complete", retryIdempotent},
		{&net.DNSError{Err: "no such host", Name: "api.invalid", IsNotFound: true}, false, "api.invalid", retryNever},
		{&net.DNSError{Err: "server misbehaving", Name: "api", IsTemporary: true}, false, "DNS", retryAlways},
		{errors.New("something odd"), false, "request to h:1 failed: something odd", retryNever},
		{errors.New("something odd"), true, "reading the answer from h:1 failed", retryIdempotent},
	} {
		msg, retry := Call{Host: "h:1", AddressField: "url"}.describeTransport(wrap(tc.err), tc.reading)
		if !strings.Contains(msg, tc.want) || retry != tc.retry || strings.Contains(msg, "SECRET") {
			t.Errorf("%v: %q retry %v, want %q retry %v", tc.err, msg, retry, tc.want, tc.retry)
		}
	}
}

func TestValidHeaderValue(t *testing.T) {
	if ValidHeaderValue("a\r\nX-Evil: 1") || !ValidHeaderValue("Bearer x\ty") {
		t.Error("ValidHeaderValue")
	}
}

func TestRejectedStatus(t *testing.T) {
	for code, want := range map[int]bool{400: true, 401: true, 404: true, 408: false, 409: true, 429: false, 499: true, 500: false, 503: false, 302: false} {
		if got := RejectedStatus(code); got != want {
			t.Errorf("RejectedStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestSameOriginRedirects(t *testing.T) {
	t.Parallel()
	req := func(s string) *http.Request {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Request{URL: u}
	}
	first := req("https://api.example:8443/v1/mcp?key=s3cret")
	if err := SameOriginRedirects(req("https://API.example:8443/v2/mcp?key=s3cret"), []*http.Request{first}); err != nil {
		t.Errorf("same origin: %v", err)
	}
	for _, to := range []string{"http://api.example:8443/mcp", "https://api.example/mcp", "https://evil.example:8443/x?key=s3cret", "https://api.example.evil:8443/"} {
		err := SameOriginRedirects(req(to), []*http.Request{first})
		var re *RedirectError
		if !errors.As(err, &re) || re.To == "" || !strings.Contains(err.Error(), "another origin") ||
			!strings.Contains(err.Error(), "https://api.example:8443") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "/x") {
			t.Errorf("to %s: %v", to, err)
		}
	}
	via := make([]*http.Request, MaxRedirects)
	for i := range via {
		via[i] = first
	}
	if err := SameOriginRedirects(req("https://api.example:8443/again"), via); err == nil || !strings.Contains(err.Error(), "stopped after 5 redirects") {
		t.Errorf("too many: %v", err)
	}
}

func TestJSONMediaType(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, "application/problem+json": true,
		"text/json": true, "text/plain": false, "": false, "application/jsonx": false, "+json": false,
	} {
		if JSONMediaType(ct) != want {
			t.Errorf("JSONMediaType(%q) = %v", ct, !want)
		}
	}
}

// NewClient's TLS is the config's, and it follows redirects within the
// origin only, unless told otherwise.
func TestNewClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/here", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig // trusts srv
	if _, err := NewClient(ClientOptions{}).Get(srv.URL); err == nil {
		t.Error("the system roots verified the test server")
	}
	for _, tc := range []struct {
		redirect func(*http.Request, []*http.Request) error
		want     int
	}{{func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, http.StatusFound}, {nil, http.StatusNoContent}} {
		resp, err := NewClient(ClientOptions{TLS: tlsCfg, CheckRedirect: tc.redirect}).Get(srv.URL + "/moved")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
		}
	}
}

type answering struct{ resp *http.Response }

func (a answering) RoundTrip(*http.Request) (*http.Response, error) { return a.resp, nil }

// A request of a call the host does not trace costs the trace transport
// no allocation: no span, so no span name or attributes either. Not
// parallel: testing.AllocsPerRun counts the whole process's.
func TestTraceTransportUntracedAllocs(t *testing.T) {
	rt := TraceTransport(answering{&http.Response{StatusCode: http.StatusOK}})
	req := httptest.NewRequest(http.MethodGet, "http://up.example:8080/x", nil)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations a request", n)
	}
}
