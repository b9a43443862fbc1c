package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// userAgent is sent unless the config sets User-Agent.
const userAgent = "crank-graphql/" + version

// accept prefers the GraphQL-over-HTTP media type and takes plain JSON.
const accept = "application/graphql-response+json, application/json;q=0.9"

// errCallTimeout is the cancellation cause of a call whose own timeout
// expired, as opposed to the host cancelling it or its deadline passing.
var errCallTimeout = errors.New("graphql: call timeout")

// post sends one GraphQL request and returns the parsed GraphQL response
// and the HTTP status. An answer that is not a GraphQL response is an
// error: a status error for a non-2xx answer, a bad response otherwise.
func (a *adapter) post(ctx context.Context, c *config, t *tool, body []byte, limit int64, timeout time.Duration, rc *sdk.RequestContext) (gqlResponse, int, *sdk.UpstreamError) {
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		// The error would quote the URL, which may carry secrets.
		return gqlResponse{}, 0, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstreamLabel(t), Message: "the endpoint does not make a valid request"}
	}
	if c.host != "" {
		req.Host = c.host
	}
	req.Header = c.requestHeader(accept, false)

	resp, err := a.clients.For(c.egress).Do(req)
	if err != nil {
		return gqlResponse{}, 0, c.failure(ctx, callCtx, t, timeout, err, false)
	}
	defer httpadapter.DrainAndClose(resp.Body)
	if resp.ContentLength > limit {
		return gqlResponse{}, resp.StatusCode, c.tooLarge(t, limit)
	}
	data, over, err := httpadapter.ReadBounded(resp.Body, limit, resp.ContentLength)
	if over {
		return gqlResponse{}, resp.StatusCode, c.tooLarge(t, limit)
	}
	if err != nil {
		return gqlResponse{}, resp.StatusCode, c.failure(ctx, callCtx, t, timeout, err, true)
	}
	gr, ok := parseResponse(data)
	if ok {
		return gr, resp.StatusCode, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return gqlResponse{}, resp.StatusCode, c.statusError(t, resp, data)
	}
	return gqlResponse{}, resp.StatusCode, &sdk.UpstreamError{
		Kind:     sdk.KindBadResponse,
		Upstream: c.upstreamLabel(t),
		Status:   strconv.Itoa(resp.StatusCode),
		Message:  "the answer is not a GraphQL response (a JSON object with data or errors); Content-Type " + orUnknown(httpadapter.MediaType(resp.Header.Get("Content-Type"))),
		Body:     sdk.Excerpt(ctx, data),
	}
}

// requestHeader is the header of a POST of JSON: the configured headers
// (their values shared, never modified), the adapter's User-Agent unless
// configured, and accept unless the config sets Accept (always, with
// force: an event stream is the only answer a subscription reads).
func (c *config) requestHeader(accept string, force bool) http.Header {
	h := make(http.Header, len(c.headers)+5)
	for k, v := range c.headers {
		h[k] = v
	}
	h["Content-Type"] = []string{"application/json"}
	if _, ok := h["Accept"]; !ok || force {
		h["Accept"] = []string{accept}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{userAgent}
	}
	return h
}

// result turns a GraphQL response into a tool result: data alone is a
// result, data with errors a partial result that carries both and says
// so, errors alone an upstream error with the messages and paths.
func (c *config) result(t *tool, gr gqlResponse, status int) (*sdk.Result, *sdk.UpstreamError) {
	if len(gr.errors) > 0 && gr.data == nil {
		ue := &sdk.UpstreamError{
			Kind:     sdk.KindUpstreamStatus,
			Upstream: c.upstreamLabel(t),
			Status:   "GRAPHQL_ERROR",
			Message:  fmt.Sprintf("the GraphQL server answered with %s: %s", plural(len(gr.errors), "error"), summarizeErrors(gr.errors)),
			// A request error (no data at all: the document or variables
			// were refused before execution) or a 4xx refuses the request
			// as such; a field error may not recur.
			Rejected: gr.requestError || httpadapter.RejectedStatus(status),
		}
		if code, ok := gr.errors[0].Extensions["code"].(string); ok && code != "" && validStatus(code) {
			ue.Status = code
		}
		ue.Detail = errorDetail(gr.rawErrors, status)
		return nil, ue
	}
	var b bytes.Buffer
	b.Grow(len(gr.data) + len(gr.rawErrors) + len(gr.extensions) + 48)
	b.WriteString(`{"data":`)
	if gr.data == nil {
		b.WriteString("null")
	} else {
		b.Write(gr.data)
	}
	if len(gr.errors) > 0 {
		b.WriteString(`,"errors":`)
		b.Write(gr.rawErrors)
		b.WriteString(`,"partial":true`)
	}
	if c.includeExtensions && len(gr.extensions) > 0 && !isNull(gr.extensions) {
		b.WriteString(`,"extensions":`)
		b.Write(gr.extensions)
	}
	b.WriteByte('}')
	res := &sdk.Result{Structured: b.Bytes(), ContentType: "application/json"}
	if len(gr.errors) > 0 {
		// The text a model reads says first that the data is incomplete.
		res.Text = fmt.Sprintf("PARTIAL RESULT: the GraphQL server returned data together with %s: %s\n%s",
			plural(len(gr.errors), "error"), summarizeErrors(gr.errors), b.Bytes())
	}
	return res, nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// validStatus accepts error codes such as NOT_FOUND or UNAUTHENTICATED.
func validStatus(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// maxDetailErrors bounds the errors JSON carried in an error's detail.
const maxDetailErrors = 8 << 10

func errorDetail(rawErrors json.RawMessage, status int) json.RawMessage {
	d := struct {
		Errors     json.RawMessage `json:"errors,omitempty"`
		Truncated  bool            `json:"errors_truncated,omitempty"`
		HTTPStatus int             `json:"http_status,omitempty"` // none over a WebSocket
	}{HTTPStatus: status}
	if len(rawErrors) <= maxDetailErrors {
		var buf bytes.Buffer
		if json.Compact(&buf, rawErrors) == nil {
			d.Errors = buf.Bytes()
		}
	} else {
		d.Truncated = true
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	return b
}

// failure classifies an error of sending the request or reading the answer.
// parent is the host's context, call the context bounded by timeout.
func (c *config) failure(parent, call context.Context, t *tool, timeout time.Duration, err error, reading bool) *sdk.UpstreamError {
	hc := httpadapter.Call{Upstream: c.upstreamLabel(t), Host: c.hostport, AddressField: "endpoint",
		// A query may be retried; a mutation may have been applied.
		Idempotent: t == nil || !t.mutation, Timeout: timeout}
	return hc.Failure(parent, errors.Is(context.Cause(call), errCallTimeout), err, reading)
}

// statusError turns a non-2xx answer that is not a GraphQL response into
// an HTTP status error.
func (c *config) statusError(t *tool, resp *http.Response, body []byte) *sdk.UpstreamError {
	ue := httpadapter.StatusError(resp, "the GraphQL endpoint answered HTTP", "a redirect to another origin is not followed: configure the final endpoint URL", body)
	ue.Upstream = c.upstreamLabel(t)
	return ue
}

func (c *config) tooLarge(t *tool, limit int64) *sdk.UpstreamError {
	return &sdk.UpstreamError{
		Kind:     sdk.KindBadResponse,
		Upstream: c.upstreamLabel(t),
		Message:  fmt.Sprintf("the answer is larger than max_response_bytes (%d bytes)", limit),
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
