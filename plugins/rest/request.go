package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// userAgent is sent unless the config sets User-Agent.
const userAgent = "crank-rest/" + version

// callArgs is a call's tool arguments.
type callArgs struct {
	// raw is the arguments object as received ("{}" when empty).
	raw json.RawMessage
	// m is the decoded object; nil when the operation never looks inside
	// the arguments (then raw is only ever forwarded whole).
	m map[string]json.RawMessage
	// cursor is the window cursor of the call, sent as cursor_param.
	cursor string
}

var emptyObject = json.RawMessage("{}")

// decodeArgs checks that the arguments are a JSON object and decodes them
// when the operation needs individual arguments.
func (op *operation) decodeArgs(raw json.RawMessage) (callArgs, *sdk.UpstreamError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return callArgs{raw: emptyObject}, nil
	}
	if raw[0] != '{' {
		return callArgs{}, op.invalidArg("the tool arguments must be a JSON object")
	}
	a := callArgs{raw: raw}
	if op.needsArgs {
		if err := json.Unmarshal(raw, &a.m); err != nil {
			return callArgs{}, op.invalidArg("the tool arguments are not a valid JSON object")
		}
	}
	return a, nil
}

// arg returns a present, non-null argument.
func (a *callArgs) arg(name string) (json.RawMessage, bool) {
	v, ok := a.m[name]
	if !ok || len(v) == 0 || isNullValue(v) {
		return nil, false
	}
	return v, true
}

func isNullValue(v json.RawMessage) bool {
	return len(v) == 4 && string(v) == "null" || bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (op *operation) invalidArg(format string, args ...any) *sdk.UpstreamError {
	return &sdk.UpstreamError{
		Kind:     sdk.KindInvalidArgument,
		Upstream: op.upstream,
		Message:  fmt.Sprintf(format, args...),
	}
}

// newRequest builds the upstream HTTP request of one call. accept is the
// default Accept header (a configured Accept header wins); rc, when not
// nil, propagates the caller's W3C trace context. It is shared by unary
// calls and (later) streams.
func (op *operation) newRequest(ctx context.Context, a *callArgs, accept string, rc *sdk.RequestContext) (*http.Request, *sdk.UpstreamError) {
	target, ue := op.buildURL(a)
	if ue != nil {
		return nil, ue
	}
	body, ue := op.buildBody(a)
	if ue != nil {
		return nil, ue
	}
	var rd io.Reader
	contentType := ""
	if body != nil {
		if body, contentType, ue = op.encodeBody(body); ue != nil { // body_format.go
			return nil, ue
		}
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, target, rd)
	if err != nil {
		// The error would quote the URL, which may carry secrets.
		return nil, op.invalidArg("the arguments do not make a valid request URL")
	}
	if op.host != "" {
		req.Host = op.host
	}
	if op.unaryHeader != nil && accept == acceptJSON && body == nil {
		// Shared by the operation's calls: neither the HTTP client nor
		// the trace transport modifies a request's header (they clone
		// the request to add to it), and nothing here does.
		req.Header = op.unaryHeader
		return req, nil
	}
	h := op.staticHeader(accept, contentType)
	for _, ha := range op.headerArgs {
		v, ok := a.arg(ha.arg)
		if !ok {
			continue // absent: a static header of that name stays
		}
		if s, styled, ue := op.styledHeader(ha, v); styled { // param_styles (param_styles.go)
			if ue != nil {
				return nil, ue
			}
			h[ha.name] = []string{s}
			continue
		}
		vals, ok := scalarList(v)
		if !ok {
			return nil, op.invalidArg("argument %q (header %s) must be a string, number, boolean or a list of them", ha.arg, ha.name)
		}
		for _, s := range vals {
			if !httpadapter.ValidHeaderValue(s) {
				return nil, op.invalidArg("argument %q (header %s) contains a control character such as a line break", ha.arg, ha.name)
			}
		}
		if len(vals) > 0 {
			h[ha.name] = vals
		}
	}
	req.Header = h
	return req, nil
}

// acceptJSON is the default Accept header of a unary call.
const acceptJSON = "application/json"

// staticHeader is a new request header of the configured headers, accept
// as the default Accept header and, for a request with a body, its
// Content-Type (unless configured), before header_args.
func (op *operation) staticHeader(accept, contentType string) http.Header {
	h := make(http.Header, len(op.headers)+len(op.headerArgs)+5)
	for k, v := range op.headers {
		h[k] = v // shared, never modified
	}
	if _, ok := h["Accept"]; !ok && accept != "" {
		h["Accept"] = []string{accept}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{userAgent}
	}
	if contentType != "" {
		if _, ok := h["Content-Type"]; !ok || op.format != nil && op.format.kind != kindJSON && op.format.kind != kindRaw {
			// A form or multipart body's own type wins: it carries the
			// multipart boundary.
			h["Content-Type"] = []string{contentType}
		}
	}
	return h
}

// buildURL fills the url template with the path and query arguments.
func (op *operation) buildURL(a *callArgs) (string, *sdk.UpstreamError) {
	var b strings.Builder
	b.Grow(len(op.prefix) + 64 + len(op.staticQuery))
	b.WriteString(op.prefix)
	for _, p := range op.path {
		if p.param == "" {
			b.WriteString(p.lit)
			continue
		}
		v, ok := a.arg(p.param)
		if !ok {
			return "", op.invalidArg("missing argument %q: it fills the path parameter {%s}", p.param, p.param)
		}
		if s, styled, ue := op.styledPath(p.param, v); styled { // param_styles (param_styles.go)
			if ue != nil {
				return "", ue
			}
			b.WriteString(s)
			continue
		}
		s, ok := scalarString(v)
		if !ok {
			return "", op.invalidArg("argument %q fills the path parameter {%s} and must be a string, number or boolean", p.param, p.param)
		}
		if s == "" {
			return "", op.invalidArg("argument %q fills the path parameter {%s} and must not be empty", p.param, p.param)
		}
		if hasDotSegment(s) {
			return "", op.dotSegment(p.param)
		}
		b.WriteString(url.PathEscape(s))
	}
	sep := byte('?')
	if op.staticQuery != "" {
		b.WriteByte('?')
		b.WriteString(op.staticQuery)
		sep = '&'
	}
	for _, q := range op.query {
		v, ok := a.arg(q.arg)
		if !ok {
			continue
		}
		if s, styled, ue := op.styledQuery(q, v); styled { // param_styles (param_styles.go)
			if ue != nil {
				return "", ue
			}
			if s != "" {
				b.WriteByte(sep)
				sep = '&'
				b.WriteString(s)
			}
			continue
		}
		vals, ok := queryValues(v)
		if !ok {
			return "", op.invalidArg("argument %q (query parameter %s) is not valid JSON", q.arg, q.name)
		}
		for _, s := range vals {
			b.WriteByte(sep)
			sep = '&'
			b.WriteString(url.QueryEscape(q.name))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(s))
		}
	}
	if op.cursorParam != "" && a.cursor != "" {
		b.WriteByte(sep)
		b.WriteString(url.QueryEscape(op.cursorParam))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(a.cursor))
	}
	return b.String(), nil
}

// hasDotSegment tells whether a path value is or holds a dot segment
// ("." or ".."), as it is or percent-decoded up to three times (a proxy
// or the upstream may decode again), split at '/' and '\\' and read up
// to a ';' (a path parameter, which some servers strip): an upstream that
// normalises the path would leave the configured one.
func hasDotSegment(s string) bool {
	for range 4 {
		for seg := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			seg, _, _ = strings.Cut(seg, ";")
			if seg == "." || seg == ".." {
				return true
			}
		}
		u, err := url.PathUnescape(s)
		if err != nil || u == s {
			return false
		}
		s = u
	}
	return false
}

func (op *operation) dotSegment(param string) *sdk.UpstreamError {
	return op.invalidArg(`argument %q fills the path parameter {%s} and must not be or hold a dot segment ("." or "..", also percent-encoded)`, param, param)
}

// buildBaseBody returns the JSON body before body_fields, nil for none.
func (op *operation) buildBaseBody(a *callArgs) ([]byte, *sdk.UpstreamError) {
	if !op.sendsBody() {
		return nil, nil
	}
	if op.bodyArg != "" {
		v, ok := a.arg(op.bodyArg)
		if !ok {
			return nil, nil // absent or null: no body
		}
		return bytes.TrimSpace(v), nil
	}
	if a.m == nil {
		return a.raw, nil
	}
	consumed := 0
	for k := range a.m {
		if op.consumed[k] {
			consumed++
		}
	}
	if consumed == 0 {
		return a.raw, nil
	}
	rest := make(map[string]json.RawMessage, len(a.m)-consumed)
	for k, v := range a.m {
		if !op.consumed[k] {
			rest[k] = v
		}
	}
	body, err := json.Marshal(rest)
	if err != nil {
		return nil, op.invalidArg("the remaining arguments cannot be encoded as a JSON body")
	}
	return body, nil
}

// scalarList renders a scalar, or each element of a list of scalars, as
// plain strings; nulls are skipped.
func scalarList(v json.RawMessage) ([]string, bool) { return renderList(v, scalarString) }

// queryValues renders a query argument: a scalar plainly, a list as one
// value per element (repeated parameter), an object (or a nested list) as
// its compact JSON text.
func queryValues(v json.RawMessage) ([]string, bool) { return renderList(v, queryScalar) }

// renderList renders v, or each non-null element of v when it is a list,
// with render.
func renderList(v json.RawMessage, render func(json.RawMessage) (string, bool)) ([]string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, false
	}
	if v[0] != '[' {
		s, ok := render(v)
		if !ok {
			return nil, false
		}
		return []string{s}, true
	}
	var elems []json.RawMessage
	if json.Unmarshal(v, &elems) != nil {
		return nil, false
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		if isNullValue(e) {
			continue
		}
		s, ok := render(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func queryScalar(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && (v[0] == '{' || v[0] == '[') {
		var b bytes.Buffer
		if json.Compact(&b, v) != nil {
			return "", false
		}
		return b.String(), true
	}
	return scalarString(v)
}
