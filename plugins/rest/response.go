package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
)

// errCallTimeout is the cancellation cause of a call whose own timeout
// expired, as opposed to the host cancelling it or its deadline passing.
var errCallTimeout = errors.New("rest: call timeout")

// newClient returns the HTTP client shared by all calls of an adapter:
// keep-alive connection pools sized for a gateway, bounded dial and TLS
// handshake times, and redirects followed only within the same origin (so
// configured credentials never leak to another host).
func newClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           512,
			MaxIdleConnsPerHost:    128,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  1 * time.Second,
			MaxResponseHeaderBytes: 1 << 20,
		},
		CheckRedirect: sameOriginRedirects,
	}
}

const maxRedirects = 5

func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		// Answer the redirect itself: it becomes an upstream status error.
		return http.ErrUseLastResponse
	}
	return nil
}

// failure classifies an error of sending the request or reading the answer.
// parent is the host's context, call the context bounded by timeout.
func (op *operation) failure(parent, call context.Context, timeout time.Duration, host string, err error, reading bool) *sdk.UpstreamError {
	ue := &sdk.UpstreamError{Upstream: op.upstream}
	when := "before the upstream answered"
	if reading {
		when = "while reading the upstream's answer"
	}
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		ue.Kind = sdk.KindCancelled
		ue.Message = "the call was cancelled " + when
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		ue.Kind = sdk.KindTimeout
		ue.Message = "the call's deadline expired " + when
		ue.Retryable = op.idempotent
	case errors.Is(context.Cause(call), errCallTimeout):
		ue.Kind = sdk.KindTimeout
		ue.Message = "timeout: the upstream did not answer within " + timeout.String()
		if reading {
			ue.Message = "timeout: the upstream's answer was not complete within " + timeout.String()
		}
		ue.Retryable = op.idempotent
	default:
		ue.Kind = sdk.KindTransport
		msg, retry := describeTransport(err, host, reading)
		ue.Message = msg
		ue.Retryable = retry == retryAlways || retry == retryIdempotent && op.idempotent
	}
	return ue
}

// retryClass says whether a transport failure may go away on a retry.
type retryClass int

const (
	retryNever      retryClass = iota
	retryIdempotent            // only if the method is idempotent: the request may have been processed
	retryAlways                // the request never reached the upstream
)

// describeTransport explains a transport error without quoting the request
// URL (its query string may carry secrets).
func describeTransport(err error, host string, reading bool) (string, retryClass) {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		hostErr x509.HostnameError
		authErr x509.UnknownAuthorityError
		recErr  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve the upstream host %s: DNS lookup failed: %s", dnsErr.Name, dnsErr.Err), boolRetry(dnsErr.IsTemporary || dnsErr.IsTimeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "cannot connect to " + host + ": connection refused", retryAlways
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authErr):
		return "TLS handshake with " + host + " failed: " + err.Error(), retryNever
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS handshake with " + host + " failed: the upstream does not speak TLS (is the url http rather than https?)", retryNever
	case errors.Is(err, syscall.ECONNRESET):
		if reading {
			return "the connection to " + host + " was reset while reading the answer", retryIdempotent
		}
		return "the connection to " + host + " was reset by the upstream", retryIdempotent
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if reading {
			return "the upstream " + host + " closed the connection before the answer was complete", retryIdempotent
		}
		return "the upstream " + host + " closed the connection without answering", retryIdempotent
	case errors.As(err, &netErr) && netErr.Timeout():
		return "the connection to " + host + " timed out", retryIdempotent
	}
	if reading {
		return "reading the answer from " + host + " failed: " + err.Error(), retryIdempotent
	}
	return "request to " + host + " failed: " + err.Error(), retryNever
}

func boolRetry(b bool) retryClass {
	if b {
		return retryAlways
	}
	return retryNever
}

// readBounded reads r up to limit bytes. over reports a longer body; hint
// is the announced length (-1 if unknown) used to size the buffer.
func readBounded(r io.Reader, limit, hint int64) (b []byte, over bool, err error) {
	size := int64(512)
	if hint >= 0 {
		size = hint + 1 // room to see EOF without growing
	}
	size = min(size, limit+1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf[:limit], true, nil
			}
			n := min(max(2*int64(cap(buf)), 512), limit+1)
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf[:limit], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// drainAndClose reads a little of what is left so the connection can be
// reused, then closes the body.
func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}

// statusError turns a non-2xx answer into an upstream status error.
func (op *operation) statusError(resp *http.Response) *sdk.UpstreamError {
	code := resp.StatusCode
	status := strconv.Itoa(code)
	msg := "upstream answered " + status
	if text := http.StatusText(code); text != "" {
		msg += " " + text
	}
	if code >= 300 && code < 400 {
		msg += " (a redirect to another origin is not followed)"
	}
	ue := &sdk.UpstreamError{
		Kind:      sdk.KindUpstreamStatus,
		Upstream:  op.upstream,
		Status:    status,
		Message:   msg,
		Retryable: code == http.StatusTooManyRequests || code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout,
	}
	excerpt, over, _ := readBounded(resp.Body, errorExcerptBytes, -1)
	ue.Body = excerptText(excerpt, over, errorExcerptBytes)
	ue.Detail = statusDetail(code, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"))
	return ue
}

// excerptText makes a valid UTF-8 excerpt, saying when it was truncated.
func excerptText(b []byte, truncated bool, limit int) string {
	if truncated {
		// Do not cut a UTF-8 sequence in half.
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if truncated {
		s += fmt.Sprintf("\n[truncated: only the first %d bytes of the answer are shown]", limit)
	}
	return s
}

func statusDetail(code int, contentType, retryAfter string) json.RawMessage {
	d := struct {
		StatusCode  int    `json:"status_code"`
		ContentType string `json:"content_type,omitempty"`
		RetryAfter  string `json:"retry_after,omitempty"`
	}{code, contentType, retryAfter}
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	return b
}

// isJSONType reports JSON media types: application/json, text/json and
// any +json suffix (application/problem+json, ...).
func isJSONType(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	return strings.EqualFold(ct, "application/json") || strings.EqualFold(ct, "text/json") ||
		len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json")
}

// result turns a 2xx answer body into a result.
func (op *operation) result(body []byte, contentType string) (*sdk.Result, *sdk.UpstreamError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return &sdk.Result{Structured: emptyObject, ContentType: contentType}, nil
	}
	jsonType := isJSONType(contentType)
	if jsonType || contentType == "" && (trimmed[0] == '{' || trimmed[0] == '[') {
		if json.Valid(trimmed) {
			return &sdk.Result{Structured: trimmed, ContentType: contentType}, nil
		}
		if jsonType {
			over := len(body) > errorExcerptBytes
			if over {
				body = body[:errorExcerptBytes]
			}
			return nil, &sdk.UpstreamError{
				Kind:     sdk.KindBadResponse,
				Upstream: op.upstream,
				Message:  "the answer is not valid JSON although its Content-Type says " + mediaType(contentType),
				Body:     excerptText(body, over, errorExcerptBytes),
			}
		}
	}
	if utf8.Valid(body) {
		return &sdk.Result{Text: string(body), ContentType: contentType}, nil
	}
	ct := mediaType(contentType)
	if ct == "" {
		ct = "unknown type"
	}
	return &sdk.Result{
		Text:        fmt.Sprintf("[binary answer: %d bytes of %s, not shown]", len(body), ct),
		ContentType: contentType,
	}, nil
}

func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.TrimSpace(ct)
}

func (op *operation) tooLarge() *sdk.UpstreamError {
	return &sdk.UpstreamError{
		Kind:     sdk.KindBadResponse,
		Upstream: op.upstream,
		Message:  fmt.Sprintf("the answer is larger than max_response_bytes (%d bytes)", op.maxBytes),
	}
}
