package graphql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Bounds of what the adapter reads; the config's defaults and bounds are
// its fields' tags.
const (
	// maxIntrospectionBytes bounds an introspection answer: schemas of
	// large public APIs run to several MiB.
	maxIntrospectionBytes = 64 << 20
	// maxDocumentBytes bounds a .graphql document or SDL file.
	maxDocumentBytes = 16 << 20
)

// configFields is an operation's graphql config as written: an
// operations-file entry, or the per-tool config ExpandOperation derives
// from one (tool). Decoding, unknown fields and the published schema come
// from it (sdk.Config); prepare checks the values.
type configFields struct {
	Endpoint          string             `reach:"upstream" json:"endpoint" jsonschema:"Absolute http or https URL of the GraphQL endpoint (requests are POSTs of JSON)."`
	Schema            *string            `reach:"file" json:"schema,omitempty" jsonschema:"Path of an SDL file (relative to the operations file). Default: introspect the endpoint at load."`
	Document          *string            `reach:"file" json:"document,omitempty" jsonschema:"Path of a .graphql file of named queries and mutations, one tool each (relative to the operations file)."`
	Query             *string            `json:"query,omitempty" jsonschema:"An inline GraphQL document, instead of document."`
	Operations        []string           `json:"operations,omitempty" jsonschema:"Serve only these operations of the document."`
	ToolPrefix        string             `json:"tool_prefix,omitempty" jsonschema:"Prefix of the derived tool names."`
	Generate          *generateFields    `json:"generate,omitempty" jsonschema:"Generate a query tool per top-level Query field."`
	Headers           json.RawMessage    `json:"headers,omitempty" jsonschema:"Static request headers (e.g. Authorization); values may come from placeholders."`
	Timeout           sdk.Duration       `json:"timeout,omitempty" default:"30s" jsonschema:"Per-call timeout as a Go duration; the host's operation timeout wins when set."`
	MaxResponseBytes  int64              `json:"max_response_bytes,omitempty" default:"8388608" zero:"default" minimum:"0" jsonschema:"Largest accepted answer body; 0 means the default."`
	IncludeExtensions bool               `json:"include_extensions,omitempty" default:"false" jsonschema:"Keep the answer's extensions in results."`
	Subscriptions     subscriptionFields `json:"subscriptions,omitzero" jsonschema:"How subscription operations are read: transport (graphql-transport-ws or GraphQL over SSE), connection_init, heartbeat, reconnect."`
	Tool              json.RawMessage    `json:"tool,omitempty" jsonschema:"Derived by the adapter when it expands an entry; never written by hand."`
}

// generateFields is the generate block as written.
type generateFields struct {
	QueryFields json.RawMessage `json:"query_fields" jsonschema:"true for every Query field, or a list of field names."`
	MaxDepth    int             `json:"max_depth,omitempty" default:"2" minimum:"1" maximum:"5" jsonschema:"How deep results are selected."`
}

// configKeywords state what the Go types of configFields cannot.
var configKeywords = map[string]string{
	"endpoint":              `{"format": "uri"}`,
	"operations":            `{"minItems": 1}`,
	"tool_prefix":           `{"maxLength": 64}`,
	"generate.query_fields": `{"oneOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]}`,
	"headers":               `{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}`,
	"tool":                  `{"type": "object"}`,
}

// newConfigs returns the config declaration of one adapter, with its cache
// of prepared configs.
func newConfigs() *sdk.Config[configFields, *prepared] {
	return &sdk.Config[configFields, *prepared]{Name: Name, Prepare: prepare, Keywords: configKeywords}
}

// config is a parsed, validated adapter config: an operations-file entry
// (schema, document, generate...) or the per-tool config ExpandOperation
// derived from one (tool). It is immutable and shared by all calls.
type config struct {
	// endpoint is the URL as configured (userinfo and query included).
	endpoint string
	// upstream names the endpoint in errors: scheme and host only (a path
	// or query may carry a capability token).
	upstream string
	// hostport is the endpoint's host:port, for transport errors.
	hostport string
	headers  http.Header
	host     string // a static Host header
	// egress are the rules the entry's connections are held to.
	egress   *egress.Rules
	timeout  time.Duration
	maxBytes int64
	// includeExtensions keeps the answer's "extensions" in results.
	includeExtensions bool
	// sub is how subscription operations are read.
	sub subConfig

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

// callTimeout is the effective per-call timeout: the host's wins, else
// the config's (its default when it sets none).
func (c *config) callTimeout(host time.Duration) time.Duration {
	if host > 0 {
		return host
	}
	return c.timeout
}

// prepared is a config ready for calls.
type prepared struct {
	cfg *config
	// expanded caches the tools of an entry config invoked directly
	// (without the host's expansion), once derived successfully.
	expanded atomic.Pointer[[]*derivedTool]
}

// diags collects a config's diagnostics.
type diags = sdk.Diagnostics

// prepare checks a decoded config. It never echoes config values (they
// may be secrets) in diagnostics.
func prepare(op *sdk.Operation, f *configFields, d *diags) *prepared {
	c := &config{egress: op.Egress}

	// endpoint
	if f.Endpoint == "" {
		d.Errorf("endpoint", "required: the absolute http or https URL of the GraphQL endpoint")
	} else {
		parseEndpoint(strings.TrimSpace(f.Endpoint), c, d)
	}

	if f.Headers != nil {
		parseHeaders(f.Headers, c, d)
	}
	c.timeout = time.Duration(f.Timeout)

	c.maxBytes = f.MaxResponseBytes
	c.includeExtensions = f.IncludeExtensions
	parseSubscriptions(&f.Subscriptions, c, d)

	// tool: a per-tool config written by ExpandOperation.
	if f.Tool != nil {
		var present map[string]json.RawMessage
		_ = json.Unmarshal(op.Config, &present) // an object: decoded already
		for _, k := range []string{"schema", "document", "query", "operations", "tool_prefix", "generate"} {
			if _, ok := present[k]; ok {
				d.Errorf(k, "not allowed beside tool (a tool config is derived by the adapter from an entry)")
			}
		}
		t, err := compileTool(f.Tool)
		if err != nil {
			d.Errorf("tool", "%v", err)
		} else {
			c.tool = t
		}
		return done(c, d)
	}

	c.schemaFile = nonEmpty(f.Schema, "schema", d)
	c.documentFile = nonEmpty(f.Document, "document", d)
	if f.Query != nil {
		if strings.TrimSpace(*f.Query) == "" {
			d.Errorf("query", "must not be empty")
		} else {
			c.query, c.hasQuery = *f.Query, true
		}
	}
	if c.documentFile != "" && c.hasQuery {
		d.Errorf("query", "set either document (a file) or query (inline), not both")
	}

	// operations
	if f.Operations != nil {
		seen := map[string]bool{}
		for i, name := range f.Operations {
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
		if len(f.Operations) == 0 {
			d.Errorf("operations", "must not be empty: leave it out to serve every operation of the document")
		}
		if c.documentFile == "" && !c.hasQuery {
			d.Errorf("operations", "needs a document or query to pick the operations from")
		}
	}

	// tool_prefix
	if !validToolChars(f.ToolPrefix) || len(f.ToolPrefix) > 64 {
		d.Errorf("tool_prefix", "must be a string of at most 64 characters of A-Z a-z 0-9 _ . -")
	} else {
		c.prefix = f.ToolPrefix
	}

	if f.Generate != nil {
		c.generate = parseGenerate(f.Generate, d)
	}

	if c.documentFile == "" && !c.hasQuery && c.generate == nil {
		d.Errorf("document", "required: a .graphql file of named operations (document), an inline document (query), or generate: {query_fields: true}")
	}
	return done(c, d)
}

// done is the prepared form of c, nil when d holds an error.
func done(c *config, d *diags) *prepared {
	if d.Failed() {
		return nil
	}
	return &prepared{cfg: c}
}

// nonEmpty returns a path field's value, "" when it is absent.
func nonEmpty(v *string, name string, d *diags) string {
	if v == nil {
		return ""
	}
	s := strings.TrimSpace(*v)
	if s == "" {
		d.Errorf(name, "must not be empty")
	}
	return s
}

func parseGenerate(f *generateFields, d *diags) *generateConfig {
	g := &generateConfig{maxDepth: f.MaxDepth}
	qf := f.QueryFields
	if qf == nil {
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
	c.upstream = scheme + "://" + u.Host
}

func parseHeaders(v json.RawMessage, c *config, d *diags) {
	var list []sdk.Diagnostic
	// Content-Type is the adapter's: GraphQL over HTTP posts JSON.
	c.headers, c.host, list = httpadapter.StaticHeaders(v, "Content-Type",
		// The WebSocket client's (subscriptions).
		"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol", "Sec-Websocket-Accept")
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
