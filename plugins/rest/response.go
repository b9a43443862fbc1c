package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
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
		// Every request carries the call's trace context and is traced.
		Transport: httpadapter.TraceTransport(&http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           512,
			MaxIdleConnsPerHost:    128,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  1 * time.Second,
			MaxResponseHeaderBytes: 1 << 20,
		}),
		CheckRedirect: sameOriginRedirects,
	}
}

// sameOriginRedirects follows redirects as httpadapter.SameOriginRedirects
// does, but answers a redirect to another origin itself: it becomes an
// upstream status error.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	err := httpadapter.SameOriginRedirects(req, via)
	if re := (*httpadapter.RedirectError)(nil); errors.As(err, &re) && re.To != "" {
		return http.ErrUseLastResponse
	}
	return err
}

// failure classifies an error of sending the request or reading the answer.
// parent is the host's context, call the context bounded by timeout.
func (op *operation) failure(parent, call context.Context, timeout time.Duration, host string, err error, reading bool) *sdk.UpstreamError {
	c := httpadapter.Call{Upstream: op.upstream, Host: host, AddressField: "url", Idempotent: op.idempotent, Timeout: timeout}
	return c.Failure(parent, errors.Is(context.Cause(call), errCallTimeout), err, reading)
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
		Upstream:  op.called(resp.Request),
		Status:    status,
		Message:   msg,
		Retryable: code == http.StatusTooManyRequests || code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout,
		Rejected:  httpadapter.RejectedStatus(code),
	}
	excerpt, over, _ := httpadapter.ReadBounded(resp.Body, errorExcerptBytes, -1)
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

// called names the request an upstream answered: the method, scheme, host
// and path with the call's path arguments, so the caller sees which
// resource was refused; never the query string or userinfo, which may
// carry credentials (a secret in the path is a placeholder's, and the host
// redacts it).
func (op *operation) called(req *http.Request) string {
	if req == nil || req.URL == nil || op.method == "" {
		return op.upstream
	}
	return op.upstream + req.URL.EscapedPath()
}
