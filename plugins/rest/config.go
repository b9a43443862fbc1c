package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/rest/openapi"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// The config's defaults and bounds are its fields' tags.

// Body modes.
const (
	bodyAuto      = "auto"
	bodyNone      = "none"
	bodyArguments = "arguments"
)

// config is an operation's rest config as written: a plain REST entry, or
// an OpenAPI import entry (openapi, alone; package openapi). Decoding, unknown
// fields and the published schema come from it (sdk.Config); prepare
// checks the values.
type config struct {
	Method           string                     `json:"method,omitempty" jsonschema:"HTTP method (case-insensitive)."`
	URL              string                     `reach:"upstream" json:"url,omitempty" jsonschema:"Absolute http or https URL; {name} path segments are filled from the tool argument of that name."`
	Query            json.RawMessage            `json:"query,omitempty" jsonschema:"Tool arguments sent as query parameters: a list of argument names, or an object {query_name: argument_name}."`
	Headers          json.RawMessage            `json:"headers,omitempty" jsonschema:"Static request headers."`
	HeaderArgs       map[string]string          `json:"header_args,omitempty" jsonschema:"Request headers filled from tool arguments: {Header-Name: argument_name}."`
	Body             string                     `json:"body,omitempty" default:"auto" jsonschema:"auto (POST/PUT/PATCH send the remaining arguments), none, arguments (always send the remaining arguments), or an argument name (send that argument's value)."`
	Timeout          sdk.Duration               `json:"timeout,omitempty" default:"30s" jsonschema:"Per-call timeout as a Go duration; the host's operation timeout wins when set."`
	MaxResponseBytes int64                      `json:"max_response_bytes,omitempty" default:"8388608" zero:"default" minimum:"0" jsonschema:"Largest accepted answer body; 0 means the default."`
	BodyFields       map[string]json.RawMessage `json:"body_fields,omitempty" jsonschema:"JSON fields set in every request body object, over the arguments (e.g. {\"stream\": true, \"model\": \"llama3\"})."`
	CursorParam      *string                    `json:"cursor_param,omitempty" jsonschema:"Query parameter that carries a window's cursor (mode window): the previous poll's cursor_path value, or the last SSE event id."`
	Stream           streamFields               `json:"stream,omitzero" jsonschema:"How a server_stream window reads the answer (text/event-stream, or one JSON document)."`
	BodyFormat       *bodyFormatField           `json:"body_format,omitempty" jsonschema:"How the body is sent when it is not JSON: {media_type, encoding, base64} (form, multipart or raw; see doc.go, Bodies)."`
	ParamStyles      map[string]paramStyleField `json:"param_styles,omitempty" jsonschema:"OpenAPI style/explode serialization of arguments filling path, query or header_args parameters: {argument: {style, explode, allow_reserved}}."`
	OpenAPI          *openapi.Fields            `json:"openapi,omitempty" jsonschema:"Import an OpenAPI document: the entry becomes one tool per operation, each with its own rest config (see doc.go, OpenAPI import). The config's only field."`
}

// headersSchema is the schema of a headers object.
const headersSchema = `{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}`

// configKeywords state what the Go types of config cannot.
var configKeywords = map[string]string{
	"": `{"oneOf": [
		{"required": ["method", "url"], "not": {"required": ["openapi"]}},
		{"required": ["openapi"], "maxProperties": 1}]}`,
	"method": `{"enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
		"get", "head", "post", "put", "patch", "delete", "options"]}`,
	"url": `{"format": "uri-template"}`,
	"query": `{"oneOf": [
		{"type": "array", "items": {"type": "string"}},
		{"type": "object", "additionalProperties": {"type": "string"}}]}`,
	"headers":                                headersSchema,
	"param_styles.*.style":                   `{"enum": ["simple", "label", "matrix", "form", "spaceDelimited", "pipeDelimited", "deepObject", "json"]}`,
	"body_format.encoding.*.style":           `{"enum": ["form", "spaceDelimited", "pipeDelimited", "deepObject"]}`,
	"openapi.base_url":                       `{"format": "uri"}`,
	"openapi.tool_prefix":                    `{"maxLength": 64}`,
	"openapi.overrides.*.name":               `{"pattern": "^[A-Za-z0-9_.-]{1,128}$"}`,
	"openapi.overrides.*.mode":               `{"enum": ["unary", "window"]}`,
	"openapi.overrides.*.transport_behavior": `{"enum": ["server_stream", "request_response"]}`,
	"openapi.overrides.*.limits":             `{"type": "object"}`,
	"openapi.overrides.*.aggregation":        `{"type": "object"}`,
	"openapi.overrides.*.safety":             `{"type": "object"}`,
	"openapi.credentials.*": `{"oneOf": [
		{"type": "string"},
		{"type": "object", "additionalProperties": false, "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}]}`,
	"openapi.headers": headersSchema,
}

// newConfigs returns the config declaration of one adapter, with its cache
// of prepared configs.
func newConfigs() *sdk.Config[config, *prepared] {
	return &sdk.Config[config, *prepared]{Name: Name, Prepare: prepare, Keywords: configKeywords}
}

// prepared is a config ready for calls: a plain entry's operation, or an
// import entry's settings.
type prepared struct {
	op      *operation      // nil for an import entry and a config with errors
	openapi *openapi.Config // nil for a plain entry
}

// prepare checks a decoded config. It never echoes config values (they
// may be secrets) in diagnostics.
func prepare(sop *sdk.Operation, c *config, d *diags) *prepared {
	if c.OpenAPI != nil { // an OpenAPI import entry
		return &prepared{openapi: openapi.Prepare(sop.Config, c.OpenAPI, d)}
	}
	op := prepareOperation(c, d)
	if d.Failed() {
		return nil
	}
	return &prepared{op: op}
}

var methods = map[string]string{
	"GET": http.MethodGet, "HEAD": http.MethodHead, "POST": http.MethodPost,
	"PUT": http.MethodPut, "PATCH": http.MethodPatch, "DELETE": http.MethodDelete,
	"OPTIONS": http.MethodOptions,
}

// operation is a parsed, validated operation config. It is immutable and
// shared by all calls of the operation.
type operation struct {
	method string
	// upstream names the upstream in errors: method, scheme and host;
	// never the path, the query string or userinfo (a capability URL
	// carries its secret in them).
	upstream string
	// prefix is "scheme://authority" as configured (userinfo included, it
	// becomes basic auth), path the path template split at parameters.
	prefix string
	path   []pathPart
	// staticQuery is the query string written in the url, already encoded.
	staticQuery string
	query       []queryParam
	headers     http.Header
	host        string // a static Host header, sent as the request's Host
	headerArgs  []headerArg
	body        string // bodyAuto, bodyNone, bodyArguments or bodyArg
	bodyArg     string
	// timeout is the config's timeout.
	timeout  time.Duration
	maxBytes int64
	// consumed holds the argument names used by path, query and
	// header_args: they are left out of the "remaining arguments" body.
	consumed map[string]bool
	// needsArgs is false when the arguments are only ever forwarded whole,
	// so a call need not decode them.
	needsArgs bool
	// idempotent methods may be retried after a transport failure.
	idempotent bool
	// bodyFields are set in every request body; cursorParam is the query
	// parameter carrying a window's cursor; stream configures Stream.
	bodyFields  []bodyField
	cursorParam string
	stream      streamConfig
	// styles serializes arguments per OpenAPI style/explode rules
	// (param_styles, param_styles.go); nil when none is set.
	styles map[string]*paramStyle
	// format is how the body is sent (body_format, body_format.go); nil
	// for JSON.
	format *bodyFormat
	// unaryHeader is the whole header of every unary request without a
	// body, built once, when no header comes from the arguments; nil
	// otherwise. Shared by the calls: never modified.
	unaryHeader http.Header
}

// pathPart is a literal (already percent-encoded) or a parameter.
type pathPart struct {
	lit   string
	param string
}

type queryParam struct{ name, arg string }

type headerArg struct{ name, arg string }

// sendsBody reports whether the body mode sends a body for the method.
func (op *operation) sendsBody() bool {
	switch op.body {
	case bodyNone:
		return false
	case bodyAuto:
		return op.method == http.MethodPost || op.method == http.MethodPut || op.method == http.MethodPatch
	}
	return true
}

// inputSchema is the input schema of a plain entry that writes none: the
// arguments its path, query, header_args and body name, and no other (the
// host refuses arguments a schema does not declare, so the remaining
// arguments of an auto body must be written in the entry's input_schema).
func (op *operation) inputSchema() json.RawMessage {
	props := map[string]any{}
	var required []string
	declare := func(arg string, s map[string]any) {
		if _, ok := props[arg]; !ok {
			props[arg] = s
		}
	}
	for _, p := range op.path {
		if p.param == "" {
			continue
		}
		if _, ok := props[p.param]; !ok {
			required = append(required, p.param)
		}
		s := map[string]any{"description": "Fills the path parameter {" + p.param + "}."}
		if op.styles[p.param] == nil {
			s["type"] = []string{"string", "number", "boolean"}
		}
		declare(p.param, s)
	}
	for _, q := range op.query {
		declare(q.arg, map[string]any{"description": "Sent as the query parameter " + q.name + "."})
	}
	for _, h := range op.headerArgs {
		declare(h.arg, map[string]any{"description": "Sent as the header " + h.name + "."})
	}
	if op.bodyArg != "" && op.sendsBody() {
		declare(op.bodyArg, map[string]any{"description": "The request body."})
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		s["required"] = required
	}
	b, _ := json.Marshal(s)
	return b
}

// callTimeout is the effective per-call timeout: the host's wins, else
// the config's (its default when it sets none).
func (op *operation) callTimeout(host time.Duration) time.Duration {
	if host > 0 {
		return host
	}
	return op.timeout
}

// operation returns the operation a call's config prepares to, or the
// error of a config that cannot be called.
func (a *adapter) operation(op *sdk.Operation) (*operation, *sdk.UpstreamError) {
	p := a.configs.Get(op)
	switch {
	case p.Err() != nil:
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	case p.Value.op == nil:
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: openapi.ErrEntry.Error()}
	}
	return p.Value.op, nil
}

// diags collects a config's diagnostics.
type diags = sdk.Diagnostics

// prepareOperation checks a plain entry's config and builds its operation.
func prepareOperation(c *config, d *diags) *operation {
	op := &operation{consumed: map[string]bool{}}

	// method
	if c.Method == "" {
		d.Errorf("method", "required: one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
	} else if m, ok := methods[strings.ToUpper(strings.TrimSpace(c.Method))]; !ok {
		d.Errorf("method", "unknown method: use one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
	} else {
		op.method = m
	}
	switch op.method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		op.idempotent = true
	}

	// url
	if c.URL == "" {
		d.Errorf("url", "required: an absolute http or https URL")
	} else {
		parseURL(strings.TrimSpace(c.URL), op, d)
	}

	if c.Query != nil {
		parseQuery(c.Query, op, d)
	}
	if c.Headers != nil {
		parseHeaders(c.Headers, op, d)
	}
	if c.HeaderArgs != nil {
		parseHeaderArgs(c.HeaderArgs, op, d)
	}

	// body
	switch b := strings.TrimSpace(c.Body); b {
	case "":
		d.Errorf("body", `must not be empty: use "auto", "none", "arguments" or an argument name`)
	case bodyAuto, bodyNone, bodyArguments:
		op.body = b
	default:
		if !validArgName(b) {
			d.Errorf("body", "argument name %q is not valid (letters, digits, _ - . only)", b)
		}
		op.body, op.bodyArg = "", b
	}
	if (op.method == http.MethodHead || op.method == http.MethodGet) && op.body != bodyAuto && op.body != bodyNone {
		d.Warnf("body", "a %s request with a body is unusual and may be refused by the upstream", op.method)
	}

	op.timeout = time.Duration(c.Timeout)
	op.maxBytes = c.MaxResponseBytes

	parseStreamFields(c, op, d)
	parseParamStyles(c.ParamStyles, op, d) // param_styles.go
	parseBodyFormat(c.BodyFormat, op, d)   // body_format.go
	if op.format != nil && op.format.kind != kindJSON && len(op.bodyFields) > 0 {
		d.Errorf("body_fields", "only apply to JSON bodies, not %s", op.format.mediaType)
	}

	op.needsArgs = len(op.consumed) > 0 || op.bodyArg != "" || len(op.bodyFields) > 0
	if len(op.headerArgs) == 0 {
		op.unaryHeader = op.staticHeader(acceptJSON, "")
	}
	return op
}

// parseURL splits the url template into the authority prefix, the path
// template and the static query.
func parseURL(raw string, op *operation, d *diags) {
	if raw == "" {
		d.Errorf("url", "required: an absolute http or https URL")
		return
	}
	schemeEnd := strings.Index(raw, "://")
	if schemeEnd <= 0 {
		d.Errorf("url", "must be an absolute http or https URL, e.g. https://api.example.com/users/{id}")
		return
	}
	scheme := strings.ToLower(raw[:schemeEnd])
	if scheme != "http" && scheme != "https" {
		d.Errorf("url", "scheme must be http or https")
		return
	}
	rest := raw[schemeEnd+3:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, rest := rest[:authEnd], rest[authEnd:]
	var pathTmpl, query, fragment string
	pathTmpl = rest
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		pathTmpl, rest = rest[:i], rest[i:]
		if strings.HasPrefix(rest, "?") {
			query = rest[1:]
			if j := strings.IndexByte(query, '#'); j >= 0 {
				query, fragment = query[:j], query[j+1:]
			}
		} else {
			fragment = rest[1:]
		}
	}
	if strings.ContainsAny(authority, "{}") {
		d.Errorf("url", "{param} placeholders are only allowed in the path, not in the host")
		return
	}
	// Let net/url check the authority (userinfo, host, port). Its error
	// text is not used: it would quote the URL, which may carry secrets.
	u, err := url.Parse(scheme + "://" + authority + "/")
	if err != nil {
		d.Errorf("url", "invalid host, port or userinfo")
		return
	}
	if u.Host == "" || u.Hostname() == "" {
		d.Errorf("url", "missing host")
		return
	}
	if strings.ContainsAny(query, "{}") {
		d.Errorf("url", "{param} placeholders are only allowed in the path; send arguments as query parameters with the query field")
		return
	}
	if !validEscapes(query) {
		d.Errorf("url", "the query string has an invalid percent-encoding")
		return
	}
	if fragment != "" {
		d.Warnf("url", "the #fragment is never sent to the upstream and is ignored")
	}
	parts, ok := parsePathTemplate(pathTmpl, d)
	if !ok {
		return
	}
	for _, p := range parts {
		if p.param != "" {
			op.consumed[p.param] = true
		}
	}
	op.prefix = scheme + "://" + authority
	op.path = parts
	op.staticQuery = escapeLiteral(query, true)
	if op.method != "" {
		op.upstream = op.method + " " + scheme + "://" + u.Host
	}
}

// parsePathTemplate splits a path template at its {name} parameters.
func parsePathTemplate(tmpl string, d *diags) ([]pathPart, bool) {
	var parts []pathPart
	for len(tmpl) > 0 {
		open := strings.IndexByte(tmpl, '{')
		if cl := strings.IndexByte(tmpl, '}'); cl >= 0 && (open < 0 || cl < open) {
			d.Errorf("url", "unbalanced '}' in the path; write a literal brace as %%7D")
			return nil, false
		}
		if open < 0 {
			break
		}
		if open > 0 {
			if !validEscapes(tmpl[:open]) {
				d.Errorf("url", "the path has an invalid percent-encoding")
				return nil, false
			}
			parts = append(parts, pathPart{lit: escapeLiteral(tmpl[:open], false)})
		}
		tmpl = tmpl[open+1:]
		cl := strings.IndexByte(tmpl, '}')
		if cl < 0 {
			d.Errorf("url", "unclosed '{' in the path; write a literal brace as %%7B")
			return nil, false
		}
		name := tmpl[:cl]
		switch {
		case name == "":
			d.Errorf("url", "empty {} path parameter: name the tool argument, e.g. {id}")
			return nil, false
		case strings.IndexByte(name, '{') >= 0:
			d.Errorf("url", "nested '{' in the path parameter")
			return nil, false
		case !validArgName(name):
			d.Errorf("url", "path parameter {%s} is not a valid argument name (letters, digits, _ - . only)", name)
			return nil, false
		}
		parts = append(parts, pathPart{param: name})
		tmpl = tmpl[cl+1:]
	}
	if len(tmpl) > 0 {
		if !validEscapes(tmpl) {
			d.Errorf("url", "the path has an invalid percent-encoding")
			return nil, false
		}
		parts = append(parts, pathPart{lit: escapeLiteral(tmpl, false)})
	}
	return parts, true
}

func parseQuery(v json.RawMessage, op *operation, d *diags) {
	var list []string
	var obj map[string]string
	switch {
	case json.Unmarshal(v, &list) == nil:
		seen := map[string]bool{}
		for i, name := range list {
			name = strings.TrimSpace(name)
			switch {
			case !validArgName(name):
				d.Errorf(fmt.Sprintf("query[%d]", i), "%q is not a valid argument name (letters, digits, _ - . only)", name)
			case seen[name]:
				d.Errorf(fmt.Sprintf("query[%d]", i), "argument %q is listed twice", name)
			default:
				seen[name] = true
				op.query = append(op.query, queryParam{name: name, arg: name})
				op.consumed[name] = true
			}
		}
	case json.Unmarshal(v, &obj) == nil:
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			arg := strings.TrimSpace(obj[name])
			switch {
			case name == "":
				d.Errorf("query", "empty query parameter name")
			case !validArgName(arg):
				d.Errorf("query."+name, "%q is not a valid argument name (letters, digits, _ - . only)", arg)
			default:
				op.query = append(op.query, queryParam{name: name, arg: arg})
				op.consumed[arg] = true
			}
		}
	default:
		d.Errorf("query", "must be a list of argument names or an object {query_name: argument_name}")
	}
}

func parseHeaders(v json.RawMessage, op *operation, d *diags) {
	var list []sdk.Diagnostic
	op.headers, op.host, list = httpadapter.StaticHeaders(v)
	d.Add(list...)
}

func parseHeaderArgs(obj map[string]string, op *operation, d *diags) {
	seen := map[string]bool{}
	for _, name := range sortedKeys(obj) {
		field := "header_args." + name
		arg := strings.TrimSpace(obj[name])
		if !httpadapter.ValidHeaderName(name) {
			d.Errorf(field, "not a valid HTTP header name")
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if httpadapter.HopByHopHeader(canon) || canon == "Host" {
			d.Errorf(field, "%s is set by the adapter and cannot be configured", canon)
			continue
		}
		if seen[canon] {
			d.Errorf(field, "header %s is set twice (header names are case-insensitive)", canon)
			continue
		}
		if !validArgName(arg) {
			d.Errorf(field, "%q is not a valid argument name (letters, digits, _ - . only)", arg)
			continue
		}
		seen[canon] = true
		op.headerArgs = append(op.headerArgs, headerArg{name: canon, arg: arg})
		op.consumed[arg] = true
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// scalarString renders a JSON scalar as a plain string (no quotes).
func scalarString(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		if n := len(v); n >= 2 && v[n-1] == '"' && bytes.IndexByte(v[1:n-1], '\\') < 0 && bytes.IndexByte(v[1:n-1], '"') < 0 {
			return string(v[1 : n-1]), true
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	case '{', '[':
		return "", false
	}
	if bytes.Equal(v, []byte("null")) {
		return "", false
	}
	return string(v), true
}

// validArgName accepts the tool argument names the config can refer to.
func validArgName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validEscapes reports whether every '%' starts a two-digit hex escape.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// escapeLiteral percent-encodes the bytes of a configured path (or query)
// literal that may not appear raw in a URL, keeping existing escapes.
func escapeLiteral(s string, query bool) string {
	i := 0
	for i < len(s) && literalOK(s[i], query) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if literalOK(c, query) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

func literalOK(c byte, query bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-._~!$&'()*+,;=:@/%", c) >= 0 || query && c == '?'
}
