package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// errCallTimeout is the cancellation cause of a call whose own timeout
// expired, as opposed to the host cancelling it or its deadline passing.
var errCallTimeout = errors.New("rest: call timeout")

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
	ue := httpadapter.StatusError(resp, "upstream answered", "a redirect to another origin is not followed", httpadapter.ReadExcerpt(resp))
	ue.Upstream = op.called(resp.Request)
	return ue
}

// result turns a 2xx answer body into a result.
// resource names the answer (its URL without query string) when it is
// returned as an embedded resource.
func (op *operation) result(ctx context.Context, body []byte, contentType, resource string) (*sdk.Result, *sdk.UpstreamError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return &sdk.Result{Structured: emptyObject, ContentType: contentType}, nil
	}
	jsonType := httpadapter.JSONMediaType(contentType)
	if jsonType || contentType == "" && (trimmed[0] == '{' || trimmed[0] == '[') {
		if json.Valid(trimmed) {
			return &sdk.Result{Structured: trimmed, ContentType: contentType}, nil
		}
		if jsonType {
			return nil, &sdk.UpstreamError{
				Kind:     sdk.KindBadResponse,
				Upstream: op.upstream,
				Message:  "the answer is not valid JSON although its Content-Type says " + httpadapter.MediaType(contentType),
				Body:     sdk.Excerpt(ctx, body),
			}
		}
	}
	ct := strings.ToLower(httpadapter.MediaType(contentType))
	if utf8.Valid(body) && !httpadapter.BinaryMediaType(ct) {
		return &sdk.Result{Text: string(body), ContentType: contentType}, nil
	}
	return op.blobResult(body, ct, contentType, resource), nil
}

// blobResult is a binary answer as MCP content: an image or audio block
// for those types, else an embedded resource with its blob, named by the
// URL it was read from (resource, without query string); the text says
// what it is.
func (op *operation) blobResult(body []byte, mt, contentType, resource string) *sdk.Result {
	if mt == "" {
		mt = "application/octet-stream"
	}
	data := base64.StdEncoding.EncodeToString(body)
	var block any
	switch major, _, _ := strings.Cut(mt, "/"); major {
	case "image", "audio":
		block = map[string]string{"type": major, "data": data, "mimeType": mt}
	default:
		block = map[string]any{"type": "resource", "resource": map[string]string{"uri": resource, "mimeType": mt, "blob": data}}
	}
	content, _ := json.Marshal([]any{block})
	return &sdk.Result{
		Text:        fmt.Sprintf("[binary answer: %d bytes of %s]", len(body), mt),
		ContentType: contentType,
		Content:     content,
	}
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
