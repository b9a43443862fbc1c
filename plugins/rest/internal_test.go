package rest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/crankmcp/crank/plugins/sdk"
)

func TestConfigCacheBounded(t *testing.T) {
	t.Parallel()
	c := &sdk.ConfigCache[*parseResult]{Parse: parseConfig, Max: 3}
	cfg := func(i int) []byte {
		return fmt.Appendf(nil, `{"method":"GET","url":"http://h/%d"}`, i)
	}
	first := c.Get(cfg(0))
	if c.Get(cfg(0)) != first {
		t.Fatal("a cached config was parsed again")
	}
	for i := 1; i < 10; i++ {
		c.Get(cfg(i))
		if n := c.Len(); n > 3 {
			t.Fatalf("cache holds %d configs, limit 3", n)
		}
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p := c.Get(cfg(i % 5)); p.op == nil {
				t.Errorf("config %d did not parse: %v", i%5, p.err)
			}
		}()
	}
	wg.Wait()
}

func TestEscapeLiteral(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/plain/path":     "/plain/path",
		"/a b/%2F/ü":      "/a%20b/%2F/%C3%BC",
		"/x:y@z;a=b,c":    "/x:y@z;a=b,c",
		"/quote\"<>":      "/quote%22%3C%3E",
		"":                "",
		"a b?c":           "a%20b%3Fc",
		"/tab\there/done": "/tab%09here/done",
	} {
		if got := escapeLiteral(in, false); got != want {
			t.Errorf("escapeLiteral(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escapeLiteral("a=1&b=x y?", true); got != "a=1&b=x%20y?" {
		t.Errorf("query literal = %q", got)
	}
}

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
		b, over, err := readBounded(iotest.OneByteReader(strings.NewReader(data)), tc.limit, tc.hint)
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
	_, _, err := readBounded(iotest.ErrReader(io.ErrUnexpectedEOF), 10, -1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v", err)
	}
}

func TestExcerptText(t *testing.T) {
	t.Parallel()
	// A 2-byte rune cut in half at the limit is dropped, not mangled.
	s := excerptText([]byte("ab\xc3"), true, 3)
	if !strings.HasPrefix(s, "ab\n[truncated") {
		t.Errorf("excerpt = %q", s)
	}
	if s := excerptText([]byte("ok\xff"), false, 10); s != "ok\uFFFD" {
		t.Errorf("invalid UTF-8 = %q", s)
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
		msg, retry := describeTransport(wrap(tc.err), "h:1", tc.reading)
		if !strings.Contains(msg, tc.want) || retry != tc.retry || strings.Contains(msg, "SECRET") {
			t.Errorf("%v: %q retry %v, want %q retry %v", tc.err, msg, retry, tc.want, tc.retry)
		}
	}
}

func TestIsJSONType(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, "application/problem+json": true,
		"text/json": true, "text/plain": false, "": false, "application/jsonx": false, "+json": false,
	} {
		if isJSONType(ct) != want {
			t.Errorf("isJSONType(%q) = %v", ct, !want)
		}
	}
}
