package httpadapter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
)

// StatusError is the *sdk.UpstreamError of an answer whose status fails
// the call: kind upstream status, Status the code, a Message of prefix,
// the code and its text ("upstream answered 503 Service Unavailable"; on
// a 3xx, redirect in parentheses after it), Body an [Excerpt] of body
// within limit bytes, Detail {"status_code", "content_type",
// "retry_after"}, Retryable per [RetryableStatus] and Rejected per
// [RejectedStatus]. The caller sets Upstream.
func StatusError(resp *http.Response, prefix, redirect string, body []byte, limit int) *sdk.UpstreamError {
	code := resp.StatusCode
	status := strconv.Itoa(code)
	msg := prefix + " " + status
	if text := http.StatusText(code); text != "" {
		msg += " " + text
	}
	if code >= 300 && code < 400 {
		msg += " (" + redirect + ")"
	}
	d, _ := json.Marshal(struct {
		StatusCode  int    `json:"status_code"`
		ContentType string `json:"content_type,omitempty"`
		RetryAfter  string `json:"retry_after,omitempty"`
	}{code, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After")})
	return &sdk.UpstreamError{
		Kind:      sdk.KindUpstreamStatus,
		Status:    status,
		Message:   msg,
		Body:      Excerpt(body, limit),
		Detail:    d,
		Retryable: RetryableStatus(code),
		Rejected:  RejectedStatus(code),
	}
}

// RetryableStatus reports whether an HTTP status code may go away on a
// retry (UpstreamError.Retryable): 429 Too Many Requests, 502 Bad Gateway,
// 503 Service Unavailable and 504 Gateway Timeout.
func RetryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// Excerpt is b as valid UTF-8 text for an error's Body: at most limit
// bytes of it (never half a UTF-8 sequence), followed by a line that says
// so when b is longer.
func Excerpt(b []byte, limit int) string {
	truncated := len(b) > limit
	if truncated {
		b = b[:limit]
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

// MediaType is a Content-Type without its parameters.
func MediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.TrimSpace(ct)
}

// JSONMediaType reports JSON media types: application/json, text/json and
// any +json suffix (application/problem+json, ...), parameters aside.
func JSONMediaType(ct string) bool {
	ct = MediaType(ct)
	return strings.EqualFold(ct, "application/json") || strings.EqualFold(ct, "text/json") ||
		len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json")
}
