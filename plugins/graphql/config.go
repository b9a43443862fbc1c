package graphql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Defaults and bounds.
const (
	defaultTimeout          = 30 * time.Second
	defaultMaxResponseBytes = 8 << 20
	// maxIntrospectionBytes bounds an introspection answer: schemas of
	// large public APIs run to several MiB.
	maxIntrospectionBytes = 64 << 20
	// maxDocumentBytes bounds a .graphql document or SDL file.
	maxDocumentBytes = 16 << 20
	// errorExcerptBytes bounds the body excerpt of an HTTP error.
	errorExcerptBytes = 2 << 10
	defaultMaxDepth   = 2
	maxMaxDepth       = 5
)

// knownFields lists the config fields, in documentation order.
var knownFields = []string{
	"endpoint", "schema", "document", "query", "operations", "tool_prefix", "generate",
	"headers", "timeout", "max_response_bytes", "include_extensions", "tool",
}

var generateFields = []string{"query_fields", "max_depth"}

// config is a parsed, validated adapter config: an operations-file entry
// (schema, document, generate...) or the per-tool config ExpandOperation
// derived from one (tool). It is immutable and shared by all calls.
type config struct {
	// endpoint is the URL as configured (userinfo and query included).
	endpoint string
	// upstream names the endpoint in errors: scheme, host and path only.
	upstream string
	// hostport is the endpoint's host:port, for transport errors.
	hostport string
	headers  http.Header
	host     string // a static Host header
	timeout  time.Duration
	maxBytes int64
	// includeExtensions keeps the answer's "extensions" in results.
	includeExtensions bool

	// Entry fields.
	schemaFile   string
	documentFile string
	query        string // inline document
	hasQuery     bool
	operations   []string
	prefix       string
	generate     *generateConfig

	// tool is the compiled tool of a per-tool config.
	tool *tool
}

type generateConfig struct {
	// fields lists the Query fields to turn into tools; nil means all.
	fields   []string
	maxDepth int
}

// isEntry reports whether the config describes tools still to be derived.
func (c *config) isEntry() bool { return c.tool == nil }

// callTimeout is the effective per-call timeout: the host's wins, then the
// config's, then the default.
func (c *config) callTimeout(host time.Duration) time.Duration {
	switch {
	case host > 0:
		return host
	case c.timeout > 0:
		return c.timeout
	}
	return defaultTimeout
}

// parseResult is the outcome of parsing one raw config.
type parseResult struct {
	cfg   *config // nil when diags holds an error
	diags []sdk.Diagnostic
	err   error // summary of the error diagnostics, for Invoke

	// expanded caches the tools of an entry config invoked directly
	// (without the host's expansion), once derived successfully.
	expanded atomic.Pointer[[]*derivedTool]
}

func parseConfig(raw []byte) *parseResult {
	var d diags
	c := parseInto(raw, &d)
	res := &parseResult{diags: d.List()}
	if d.Failed() {
		res.err = errors.New(d.Summary("invalid graphql operation config"))
		return res
	}
	res.cfg = c
	return res
}

// diags collects a config's diagnostics.
type diags = sdk.Diagnostics

func parseInto(raw []byte, d *diags) *config {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		d.Errorf("", "the graphql adapter config must be a JSON object")
		return nil
	}
	d.UnknownFields(fields, knownFields, "")

	c := &config{}

	// endpoint
	var endpoint string
	if v, ok := fields["endpoint"]; !ok || isNull(v) {
		d.Errorf("endpoint", "required: the absolute http or https URL of the GraphQL endpoint")
	} else if json.Unmarshal(v, &endpoint) != nil {
		d.Errorf("endpoint", "must be a string: the absolute http or https URL of the GraphQL endpoint")
	} else {
		parseEndpoint(strings.TrimSpace(endpoint), c, d)
	}

	// headers
	if v, ok := fields["headers"]; ok && !isNull(v) {
		parseHeaders(v, c, d)
	}

	// timeout
	if v, ok := fields["timeout"]; ok && !isNull(v) {
		var s string
		if json.Unmarshal(v, &s) != nil {
			d.Errorf("timeout", `must be a Go duration string such as "10s" or "1500ms"`)
		} else if t, err := time.ParseDuration(strings.TrimSpace(s)); err != nil {
			d.Errorf("timeout", `not a valid duration: use a Go duration such as "10s" or "1500ms"`)
		} else if t <= 0 {
			d.Errorf("timeout", "must be positive")
		} else {
			c.timeout = t
		}
	}

	// max_response_bytes
	c.maxBytes = defaultMaxResponseBytes
	if v, ok := fields["max_response_bytes"]; ok && !isNull(v) {
		var n int64
		if json.Unmarshal(v, &n) != nil {
			d.Errorf("max_response_bytes", "must be an integer number of bytes")
		} else if n < 0 {
			d.Errorf("max_response_bytes", "must not be negative")
		} else if n > 0 {
			c.maxBytes = n
		}
	}

	// include_extensions
	if v, ok := fields["include_extensions"]; ok && !isNull(v) {
		if json.Unmarshal(v, &c.includeExtensions) != nil {
			d.Errorf("include_extensions", "must be true or false")
		}
	}

	// tool: a per-tool config written by ExpandOperation.
	if v, ok := fields["tool"]; ok && !isNull(v) {
		for _, f := range []string{"schema", "document", "query", "operations", "tool_prefix", "generate"} {
			if _, ok := fields[f]; ok {
				d.Errorf(f, "not allowed beside tool (a tool config is derived by the adapter from an entry)")
			}
		}
		t, err := compileTool(v)
		if err != nil {
			d.Errorf("tool", "%v", err)
		} else {
			c.tool = t
		}
		return c
	}

	c.schemaFile = stringField(fields, "schema", "must be a string: the path of an SDL file (.graphql/.graphqls); leave it out to introspect the endpoint", d)
	c.documentFile = stringField(fields, "document", "must be a string: the path of a .graphql file with named queries and mutations", d)
	if v, ok := fields["query"]; ok && !isNull(v) {
		if json.Unmarshal(v, &c.query) != nil {
			d.Errorf("query", "must be a string: a GraphQL document with one or more queries or mutations")
		} else if strings.TrimSpace(c.query) == "" {
			d.Errorf("query", "must not be empty")
		} else {
			c.hasQuery = true
		}
	}
	if c.documentFile != "" && c.hasQuery {
		d.Errorf("query", "set either document (a file) or query (inline), not both")
	}

	// operations
	if v, ok := fields["operations"]; ok && !isNull(v) {
		var list []string
		if json.Unmarshal(v, &list) != nil {
			d.Errorf("operations", "must be a list of operation names from the document")
		} else {
			seen := map[string]bool{}
			for i, name := range list {
				name = strings.TrimSpace(name)
				switch {
				case !validGraphQLName(name):
					d.Errorf(fmt.Sprintf("operations[%d]", i), "%q is not a GraphQL operation name", name)
				case seen[name]:
					d.Errorf(fmt.Sprintf("operations[%d]", i), "operation %q is listed twice", name)
				default:
					seen[name] = true
					c.operations = append(c.operations, name)
				}
			}
			if len(list) == 0 {
				d.Errorf("operations", "must not be empty: leave it out to serve every operation of the document")
			}
		}
		if c.documentFile == "" && !c.hasQuery {
			d.Errorf("operations", "needs a document or query to pick the operations from")
		}
	}

	// tool_prefix
	if v, ok := fields["tool_prefix"]; ok && !isNull(v) {
		if json.Unmarshal(v, &c.prefix) != nil || !validToolChars(c.prefix) || len(c.prefix) > 64 {
			d.Errorf("tool_prefix", "must be a string of at most 64 characters of A-Z a-z 0-9 _ . -")
			c.prefix = ""
		}
	}

	// generate
	if v, ok := fields["generate"]; ok && !isNull(v) {
		c.generate = parseGenerate(v, d)
	}

	if c.documentFile == "" && !c.hasQuery && c.generate == nil {
		d.Errorf("document", "required: a .graphql file of named operations (document), an inline document (query), or generate: {query_fields: true}")
	}
	return c
}

func stringField(fields map[string]json.RawMessage, name, msg string, d *diags) string {
	v, ok := fields[name]
	if !ok || isNull(v) {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		d.Errorf(name, "%s", msg)
		return ""
	}
	if s = strings.TrimSpace(s); s == "" {
		d.Errorf(name, "must not be empty")
	}
	return s
}

func parseGenerate(v json.RawMessage, d *diags) *generateConfig {
	var fields map[string]json.RawMessage
	if json.Unmarshal(v, &fields) != nil {
		d.Errorf("generate", "must be an object such as {query_fields: true, max_depth: 2}")
		return nil
	}
	d.UnknownFields(fields, generateFields, "generate.")
	g := &generateConfig{maxDepth: defaultMaxDepth}
	qf, ok := fields["query_fields"]
	if !ok || isNull(qf) {
		d.Errorf("generate.query_fields", "required: true for every top-level Query field, or a list of field names")
		return nil
	}
	var all bool
	var list []string
	switch {
	case json.Unmarshal(qf, &all) == nil:
		if !all {
			return nil // generate nothing
		}
	case json.Unmarshal(qf, &list) == nil:
		if len(list) == 0 {
			d.Errorf("generate.query_fields", "must not be an empty list")
		}
		seen := map[string]bool{}
		for i, f := range list {
			f = strings.TrimSpace(f)
			switch {
			case !validGraphQLName(f):
				d.Errorf(fmt.Sprintf("generate.query_fields[%d]", i), "%q is not a GraphQL field name", f)
			case seen[f]:
				d.Errorf(fmt.Sprintf("generate.query_fields[%d]", i), "field %q is listed twice", f)
			default:
				seen[f] = true
				g.fields = append(g.fields, f)
			}
		}
	default:
		d.Errorf("generate.query_fields", "must be true or a list of Query field names")
	}
	if md, ok := fields["max_depth"]; ok && !isNull(md) {
		var n int
		if json.Unmarshal(md, &n) != nil || n < 1 || n > maxMaxDepth {
			d.Errorf("generate.max_depth", "must be an integer from 1 to %d", maxMaxDepth)
		} else {
			g.maxDepth = n
		}
	}
	return g
}

func parseEndpoint(raw string, c *config, d *diags) {
	if raw == "" {
		d.Errorf("endpoint", "required: the absolute http or https URL of the GraphQL endpoint")
		return
	}
	// The error of url.Parse quotes the URL, which may carry secrets:
	// never use its text.
	u, err := url.Parse(raw)
	if err != nil {
		d.Errorf("endpoint", "not a valid URL")
		return
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		d.Errorf("endpoint", "must be an absolute http or https URL, e.g. https://api.example.com/graphql")
		return
	}
	if u.Host == "" || u.Hostname() == "" {
		d.Errorf("endpoint", "missing host")
		return
	}
	if u.Fragment != "" {
		d.Warnf("endpoint", "the #fragment is never sent to the upstream and is ignored")
		u.Fragment = ""
	}
	c.endpoint = u.String()
	c.hostport = u.Host
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	c.upstream = scheme + "://" + u.Host + path
}

func parseHeaders(v json.RawMessage, c *config, d *diags) {
	var list []sdk.Diagnostic
	// Content-Type is the adapter's: GraphQL over HTTP posts JSON.
	c.headers, c.host, list = httpadapter.StaticHeaders(v, "Content-Type")
	d.Add(list...)
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// validGraphQLName reports a GraphQL Name: /[_A-Za-z][_0-9A-Za-z]*/.
func validGraphQLName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// validToolChars reports whether s uses only MCP tool-name characters.
func validToolChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
