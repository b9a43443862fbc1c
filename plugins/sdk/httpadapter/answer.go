package httpadapter

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// StatusError is the *sdk.UpstreamError of an answer whose status fails
// the call: kind upstream status, Status the code, a Message of prefix,
// the code and its text ("upstream answered 503 Service Unavailable"; on
// a 3xx, redirect in parentheses after it), Body an sdk.Excerpt of body
// (read with [ReadExcerpt], or more), Detail {"status_code",
// "content_type", "retry_after", "location" (a 3xx's target, also in
// Message)}, Retryable per [RetryableStatus] and
// Rejected per [RejectedStatus]. The caller sets Upstream.
func StatusError(resp *http.Response, prefix, redirect string, body []byte) *sdk.UpstreamError {
	code := resp.StatusCode
	status := strconv.Itoa(code)
	msg := prefix + " " + status
	if text := http.StatusText(code); text != "" {
		msg += " " + text
	}
	location := ""
	if code >= 300 && code < 400 {
		// The target is often what the caller wanted (a download URL).
		if u, err := resp.Location(); err == nil {
			location = u.String()
		}
		if location != "" {
			msg += " (" + redirect + "; Location: " + location + ")"
		} else {
			msg += " (" + redirect + ")"
		}
	}
	d, _ := json.Marshal(struct {
		StatusCode  int    `json:"status_code"`
		ContentType string `json:"content_type,omitempty"`
		RetryAfter  string `json:"retry_after,omitempty"`
		Location    string `json:"location,omitempty"`
	}{code, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), location})
	return &sdk.UpstreamError{
		Kind:      sdk.KindUpstreamStatus,
		Status:    status,
		Message:   msg,
		Body:      sdk.Excerpt(requestContext(resp), body),
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

// ReadExcerpt reads as much of an answer's body as an excerpt of it
// needs (sdk.Excerpt: its bound and the call's margin, and a byte more),
// for an error.
func ReadExcerpt(resp *http.Response) []byte {
	b, _, _ := ReadBounded(resp.Body, int64(sdk.ExcerptLimit(requestContext(resp))+1), -1)
	return b
}

// requestContext is the context of the request resp answers: the call's,
// which carries its excerpt margin.
func requestContext(resp *http.Response) context.Context {
	if resp.Request != nil {
		return resp.Request.Context()
	}
	return context.Background()
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

// BinaryMediaType tells whether an answer of that media type is bytes
// rather than text, whatever they look like: images, audio, video,
// fonts, and application types other than JSON, XML, JavaScript and
// forms; parameters aside.
func BinaryMediaType(mt string) bool {
	mt = strings.ToLower(MediaType(mt))
	major, minor, _ := strings.Cut(mt, "/")
	switch major {
	case "image", "audio", "video", "font":
		return !strings.HasSuffix(minor, "+xml") // image/svg+xml is text
	case "application":
		return !(JSONMediaType(mt) || minor == "xml" || strings.HasSuffix(minor, "+xml") ||
			minor == "javascript" || minor == "x-www-form-urlencoded" || minor == "yaml" || minor == "x-yaml" ||
			minor == "x-ndjson" || minor == "graphql" || minor == "sql")
	}
	return false
}
