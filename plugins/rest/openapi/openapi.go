package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Fields is an import entry's openapi block as written, the field
// "openapi" of a REST config.
type Fields struct {
	Document          string                     `reach:"location" json:"document" jsonschema:"The OpenAPI 2.0, 3.0 or 3.1 document: a file relative to the operations file, or an http(s) URL."`
	BaseURL           *string                    `reach:"upstream" json:"base_url,omitempty" jsonschema:"Base URL of the calls; default: the document's first server."`
	AllowExternalRefs bool                       `reach:"file" json:"allow_external_refs,omitempty" default:"false" jsonschema:"Follow $refs to other files or URLs."`
	ToolPrefix        string                     `json:"tool_prefix,omitempty" jsonschema:"Prefix of the derived tool names."`
	Include           filterFields               `json:"include,omitzero" jsonschema:"Keep operations matching every list given."`
	Exclude           filterFields               `json:"exclude,omitzero" jsonschema:"Drop operations matching any list given."`
	Overrides         map[string]overrideFields  `json:"overrides,omitempty" jsonschema:"Per operation (operationId or \"METHOD /path\"): name, title, description, mode, a window's transport_behavior, limits, aggregation and safety (as an operations entry writes them), annotations."`
	Credentials       map[string]json.RawMessage `json:"credentials,omitempty" jsonschema:"Per security scheme: an API key or token, or {username, password} for http basic."`
	Headers           json.RawMessage            `json:"headers,omitempty" jsonschema:"Static headers of every tool."`
	Timeout           *string                    `json:"timeout,omitempty" jsonschema:"Per-call timeout of every tool, a Go duration."`
	MaxResponseBytes  int64                      `json:"max_response_bytes,omitempty" minimum:"0" jsonschema:"Largest answer of every tool."`
	OutputSchemas     bool                       `json:"output_schemas,omitempty" default:"true" jsonschema:"Derive output schemas from the 2xx JSON answers."`
	PortableNames     bool                       `json:"portable_names,omitempty" default:"false" jsonschema:"Give tools names every client's function calling takes (^[a-zA-Z0-9_-]{1,64}$): dots and other characters become _, a longer name is cut with a short hash of it at its end."`
	MaxDescription    int                        `json:"max_description,omitempty" default:"1024" minimum:"64" maximum:"65536" jsonschema:"Longest tool description taken from the document, in characters: past it, the whole paragraphs that fit (else the first, cut at a word), then an ellipsis. 1,024 is OpenAI's limit for a function's description."`
	OutputLimits      outputLimitFields          `json:"output_schema_limits,omitzero" jsonschema:"Budgets of the derived output schemas, in bytes of JSON: past them a tool's farthest definitions are left open ({}: any value), and a tool whose schema cannot fit publishes none."`
}

// filterFields is include or exclude as written.
type filterFields struct {
	Tags         []string `json:"tags,omitempty" jsonschema:"Operation tags."`
	OperationIDs []string `json:"operation_ids,omitempty" jsonschema:"operationId globs (* ? [a-z])."`
	Methods      []string `json:"methods,omitempty" jsonschema:"HTTP methods."`
	Paths        []string `json:"paths,omitempty" jsonschema:"Path prefixes, matched by whole segments."`
}

// outputLimitFields are the budgets of an entry's output schemas.
type outputLimitFields struct {
	ToolBytes     int `json:"tool_bytes,omitempty" default:"32768" minimum:"256" maximum:"16777216" jsonschema:"One tool's output schema."`
	DocumentBytes int `json:"document_bytes,omitempty" default:"2097152" minimum:"1024" maximum:"33554432" jsonschema:"The output schemas of all the entry's tools, shared out among the tools that need more than an even share."`
}

// overrideFields is one operation's override as written. The window
// fields are checked by the host, as an operations entry's; here only
// their shape.
type overrideFields struct {
	Name              string            `json:"name,omitempty" jsonschema:"The tool's name."`
	Title             string            `json:"title,omitempty" jsonschema:"The tool's title."`
	Description       string            `json:"description,omitempty" jsonschema:"The tool's description."`
	Mode              string            `json:"mode,omitempty" jsonschema:"The tool's mode: unary or window."`
	TransportBehavior json.RawMessage   `json:"transport_behavior,omitempty" jsonschema:"The window's transport_behavior, as an entry's."`
	Limits            json.RawMessage   `json:"limits,omitempty" jsonschema:"The window's limits, checked by the host as an entry's."`
	Aggregation       json.RawMessage   `json:"aggregation,omitempty" jsonschema:"The window's aggregation, checked by the host as an entry's."`
	Safety            json.RawMessage   `json:"safety,omitempty" jsonschema:"The window's safety, checked by the host as an entry's."`
	Annotations       *annotationFields `json:"annotations,omitempty" jsonschema:"The tool's annotations."`
}

// annotationFields are an override's annotations as written.
type annotationFields struct {
	ReadOnly    *bool `json:"read_only,omitempty" jsonschema:"The tool does not change its environment."`
	Destructive *bool `json:"destructive,omitempty" jsonschema:"The tool may destroy data."`
	Idempotent  *bool `json:"idempotent,omitempty" jsonschema:"Repeating a call has no further effect."`
	OpenWorld   *bool `json:"open_world,omitempty" jsonschema:"The tool reaches an open world of entities."`
}

var (
	// windowFields are the override fields that configure a window tool;
	// the host checks them as it checks an operations entry's.
	windowFields = []string{"transport_behavior", "limits", "aggregation", "safety"}
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// ErrEntry is what calling an import entry itself answers.
var ErrEntry = errors.New("this rest config imports an OpenAPI document: the host expands it at load into one tool per API operation (ExpandOperation); the entry itself cannot be called")

// Config is an import entry's config, checked without reading the
// document (Prepare).
type Config struct {
	document          string
	documentURL       *url.URL
	baseURL           string
	allowExternalRefs bool
	toolPrefix        string
	include, exclude  opFilter
	overrides         map[string]*opOverride
	credentials       map[string]*credential
	headers           map[string]json.RawMessage
	timeout           string
	maxResponseBytes  int64
	outputSchemas     bool
	outputLimits      struct{ tool, document int }
	portableNames     bool
	maxDescription    int
}

// opFilter selects operations. In include, every list given must match
// (a list matches when any of its entries does); in exclude, any list that
// matches excludes the operation.
type opFilter struct {
	tags, operationIDs, methods, paths []string
}

func (f *opFilter) empty() bool {
	return len(f.tags)+len(f.operationIDs)+len(f.methods)+len(f.paths) == 0
}

// opOverride changes one operation's tool.
type opOverride struct {
	key                            string
	name, title, description, mode string
	annotations                    sdk.Annotations
	hasAnnotations                 bool
	// window holds the window config fields given (windowFields), as
	// written.
	window map[string]json.RawMessage
	used   bool
}

// execution is the override's window config as Tool.Execution, nil when
// it sets none.
func (o *opOverride) execution() json.RawMessage {
	if o == nil || len(o.window) == 0 {
		return nil
	}
	b, _ := json.Marshal(o.window)
	return b
}

// windowField names the first window config field the override sets, ""
// when it sets none.
func (o *opOverride) windowField() string {
	if o == nil {
		return ""
	}
	for _, k := range windowFields {
		if _, ok := o.window[k]; ok {
			return "openapi.overrides." + o.key + "." + k
		}
	}
	return ""
}

// credential is what a security scheme is given: a key or token, or a
// username and password (http basic).
type credential struct {
	value              string
	username, password string
	basic              bool
}

// fetchTimeout bounds reading the document (and external $refs) from a
// URL: the entry's timeout, default 30s.
func (c *Config) fetchTimeout(op time.Duration) time.Duration {
	if op > 0 {
		return op
	}
	return defaultFetchTimeout
}

// Prepare checks an import entry's config (raw, decoded as o) without
// reading the document. The entry passes ValidateOperation when its
// config is well-formed; calling it fails with ErrEntry. It never quotes
// config values in diagnostics.
func Prepare(raw json.RawMessage, o *Fields, d *sdk.Diagnostics) *Config {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(raw, &fields) // an object: decoded already
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if k != "openapi" {
			d.Errorf(k, "an openapi entry takes its settings inside openapi (known fields: %s)", strings.Join(openAPIFieldNames, ", "))
		}
	}
	c := &Config{}

	// document
	if c.document = strings.TrimSpace(o.Document); c.document == "" {
		d.Errorf("openapi.document", "required: the OpenAPI document's file (relative to the operations file) or http(s) URL")
	} else if i := strings.Index(c.document, "://"); i > 0 {
		u, err := url.Parse(c.document)
		switch {
		case err != nil:
			d.Errorf("openapi.document", "not a valid URL")
		case u.Scheme == "http" || u.Scheme == "https":
			if u.Host == "" {
				d.Errorf("openapi.document", "the URL has no host")
			}
			c.documentURL = u
		case u.Scheme == "file":
			c.document = u.Path
		default:
			d.Errorf("openapi.document", "URL scheme must be http or https (or a file path)")
		}
	}

	// base_url
	if o.BaseURL != nil {
		if msg := checkBaseURL(strings.TrimSpace(*o.BaseURL)); msg != "" {
			d.Errorf("openapi.base_url", "%s", msg)
		} else {
			c.baseURL = strings.TrimRight(strings.TrimSpace(*o.BaseURL), "/")
		}
	}

	c.allowExternalRefs, c.outputSchemas = o.AllowExternalRefs, o.OutputSchemas
	c.outputLimits.tool, c.outputLimits.document = o.OutputLimits.ToolBytes, o.OutputLimits.DocumentBytes
	c.portableNames, c.maxDescription = o.PortableNames, o.MaxDescription
	if c.maxDescription <= 0 {
		c.maxDescription = 1024
	}
	if c.outputLimits.tool <= 0 { // a Fields decoded without its defaults
		c.outputLimits.tool = 32 << 10
	}
	if c.outputLimits.document <= 0 {
		c.outputLimits.document = 2 << 20
	}

	// tool_prefix
	if c.toolPrefix = o.ToolPrefix; len(c.toolPrefix) > 64 || c.toolPrefix != "" && !toolNameRE.MatchString(c.toolPrefix) {
		d.Errorf("openapi.tool_prefix", "must be at most 64 characters of A-Z a-z 0-9 _ . -")
	}

	c.include = prepareFilter(&o.Include, "openapi.include", d)
	c.exclude = prepareFilter(&o.Exclude, "openapi.exclude", d)
	c.overrides = prepareOverrides(o.Overrides, d)
	c.credentials = prepareCredentials(o.Credentials, d)

	// headers: static headers of every tool, checked as rest's headers.
	if o.Headers != nil {
		_, _, hd := httpadapter.StaticHeaders(o.Headers)
		for _, x := range hd {
			x.Field = "openapi." + x.Field
			d.Add(x)
		}
		_ = json.Unmarshal(o.Headers, &c.headers)
	}

	// timeout, max_response_bytes: copied to every tool.
	if o.Timeout != nil {
		c.timeout = *o.Timeout
		if t, err := time.ParseDuration(strings.TrimSpace(c.timeout)); err != nil || t <= 0 {
			d.Errorf("openapi.timeout", `must be a positive Go duration such as "10s"`)
		}
	}
	c.maxResponseBytes = o.MaxResponseBytes
	return c
}

// openAPIFieldNames lists the fields of the openapi block, for messages.
var openAPIFieldNames = []string{
	"document", "base_url", "allow_external_refs", "tool_prefix", "include", "exclude",
	"overrides", "credentials", "headers", "timeout", "max_response_bytes", "output_schemas", "output_schema_limits", "portable_names", "max_description",
}

// checkBaseURL returns why s is not a usable base URL, "" when it is.
func checkBaseURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return "must not be empty"
	case err != nil:
		return "not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http or https URL"
	case u.Host == "":
		return "the URL has no host"
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#"):
		return "must not have a query string or fragment"
	case strings.ContainsAny(s, "{}"):
		return "must not contain {placeholders} left unexpanded"
	}
	return ""
}

func prepareFilter(in *filterFields, field string, d *sdk.Diagnostics) opFilter {
	f := opFilter{tags: in.Tags}
	for i, s := range in.OperationIDs {
		if _, err := path.Match(s, ""); err != nil || s == "" {
			d.Errorf(fmt.Sprintf("%s.operation_ids[%d]", field, i), "not a valid glob pattern (* ? [a-z], \\ escapes)")
			continue
		}
		f.operationIDs = append(f.operationIDs, s)
	}
	for i, s := range in.Methods {
		m := strings.ToUpper(strings.TrimSpace(s))
		if !slices.Contains(httpMethods, strings.ToLower(m)) {
			d.Errorf(fmt.Sprintf("%s.methods[%d]", field, i), "unknown HTTP method (GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE, QUERY)")
			continue
		}
		f.methods = append(f.methods, m)
	}
	for i, s := range in.Paths {
		if !strings.HasPrefix(s, "/") {
			d.Errorf(fmt.Sprintf("%s.paths[%d]", field, i), "a path prefix starts with / (e.g. /pets)")
			continue
		}
		f.paths = append(f.paths, s)
	}
	return f
}

func prepareOverrides(m map[string]overrideFields, d *sdk.Diagnostics) map[string]*opOverride {
	if m == nil {
		return nil
	}
	out := map[string]*opOverride{}
	names := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		field := "openapi.overrides." + key
		o := m[key]
		ov := &opOverride{key: key, name: o.Name, title: o.Title, description: o.Description, mode: o.Mode}
		if ov.name != "" {
			if !toolNameRE.MatchString(ov.name) {
				d.Errorf(field+".name", "must be 1-128 characters of A-Z a-z 0-9 _ . -")
			} else if other, dup := names[ov.name]; dup {
				d.Errorf(field+".name", "tool name %q is also given to %s", ov.name, other)
			} else {
				names[ov.name] = key
			}
		}
		if ov.mode != "" && ov.mode != "unary" && ov.mode != "window" {
			d.Errorf(field+".mode", `must be "unary" or "window"`)
		}
		// The host checks the window fields field by field, as it checks
		// an operations entry's; here only their shape.
		for i, v := range []json.RawMessage{o.TransportBehavior, o.Limits, o.Aggregation, o.Safety} {
			k := windowFields[i]
			var str string
			var obj map[string]json.RawMessage
			switch {
			case v == nil:
			case k == "transport_behavior" && json.Unmarshal(v, &str) != nil:
				d.Errorf(field+"."+k, `must be "server_stream" or "request_response"`)
			case k != "transport_behavior" && (json.Unmarshal(v, &obj) != nil || obj == nil):
				d.Errorf(field+"."+k, "must be an object, as an operations entry writes it")
			default:
				if ov.window == nil {
					ov.window = map[string]json.RawMessage{}
				}
				ov.window[k] = v
			}
		}
		if a := o.Annotations; a != nil {
			ov.hasAnnotations = true
			ov.annotations = sdk.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
		}
		if ov.mode == "unary" && len(ov.window) > 0 {
			d.Errorf(ov.windowField(), "configures a window, and this override sets mode unary")
		}
		out[overrideKey(key)] = ov
	}
	return out
}

// overrideKey normalizes "get /pets" to "GET /pets"; an operationId stays.
func overrideKey(k string) string {
	if m, p, ok := strings.Cut(strings.TrimSpace(k), " "); ok && strings.HasPrefix(strings.TrimSpace(p), "/") && slices.Contains(httpMethods, strings.ToLower(m)) {
		return strings.ToUpper(m) + " " + strings.TrimSpace(p)
	}
	return k
}

func prepareCredentials(m map[string]json.RawMessage, d *sdk.Diagnostics) map[string]*credential {
	if m == nil {
		return nil
	}
	out := map[string]*credential{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		f := "openapi.credentials." + name
		var s string
		if json.Unmarshal(m[name], &s) == nil {
			if !httpadapter.ValidHeaderValue(s) {
				d.Errorf(f, "contains a control character such as a line break")
				continue
			}
			out[name] = &credential{value: s}
			continue
		}
		var up map[string]json.RawMessage
		if json.Unmarshal(m[name], &up) != nil || up == nil {
			d.Errorf(f, "must be a string (API key or token) or {username, password}")
			continue
		}
		c := &credential{basic: true}
		for _, k := range slices.Sorted(maps.Keys(up)) {
			var s string
			switch {
			case k != "username" && k != "password":
				d.Errorf(f+"."+k, "unknown field (known fields: username, password)")
			case json.Unmarshal(up[k], &s) != nil:
				d.Errorf(f+"."+k, "must be a string")
			case k == "username":
				c.username = s
			default:
				c.password = s
			}
		}
		if strings.Contains(c.username, ":") {
			d.Errorf(f+".username", "must not contain ':' (http basic)")
		}
		out[name] = c
	}
	return out
}

// match applies the filters to one operation.
func (c *Config) match(p, method string, tags []string, opID string) bool {
	in := &c.include
	if len(in.tags) > 0 && !anyTag(in.tags, tags) ||
		len(in.operationIDs) > 0 && !globMatch(in.operationIDs, opID) ||
		len(in.methods) > 0 && !slices.Contains(in.methods, method) ||
		len(in.paths) > 0 && !prefixMatch(in.paths, p) {
		return false
	}
	ex := &c.exclude
	return !(len(ex.tags) > 0 && anyTag(ex.tags, tags) ||
		len(ex.operationIDs) > 0 && globMatch(ex.operationIDs, opID) ||
		len(ex.methods) > 0 && slices.Contains(ex.methods, method) ||
		len(ex.paths) > 0 && prefixMatch(ex.paths, p))
}

// rawMatch applies the filters to an operation as written.
func (c *Config) rawMatch(p, method string, op map[string]any) bool {
	var tags []string
	if list, ok := op["tags"].([]any); ok {
		for _, t := range list {
			if s, ok := t.(string); ok {
				tags = append(tags, s)
			}
		}
	}
	id, _ := op["operationId"].(string)
	return c.match(p, strings.ToUpper(method), tags, id)
}

// pathItemRefMayMatch tells whether operations of a path item written as a
// $ref may pass the filters (the rest is checked once it is loaded).
func (c *Config) pathItemRefMayMatch(p string) bool {
	return (len(c.include.paths) == 0 || prefixMatch(c.include.paths, p)) &&
		!(len(c.exclude.paths) > 0 && prefixMatch(c.exclude.paths, p))
}

func anyTag(want, have []string) bool {
	for _, t := range have {
		if slices.Contains(want, t) {
			return true
		}
	}
	return false
}

func globMatch(globs []string, s string) bool {
	if s == "" {
		return false
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// prefixMatch matches whole path segments: /pets matches /pets and
// /pets/{id}, not /petstore.
func prefixMatch(prefixes []string, p string) bool {
	for _, pre := range prefixes {
		pre = strings.TrimRight(pre, "/")
		if pre == "" || p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// Target is the REST adapter as the importer writes tools for it.
type Target struct {
	// Client reads documents and external $refs from http(s) URLs (with
	// redirects kept within the first request's origin) and UserAgent
	// names the reader.
	Client    *http.Client
	UserAgent string
	// Sends reports whether the adapter sends requests of an HTTP method
	// (upper case); operations of other methods are skipped.
	Sends func(method string) bool
	// ArgName reports whether a name can be a tool argument of a config.
	ArgName func(name string) bool
	// Check returns the problems of a tool's config that the adapter
	// refuses, none when it takes it; an operation whose config it
	// refuses is skipped.
	Check func(op *sdk.Operation) []sdk.Diagnostic
}

// Import reads the document of the import entry op (its config prepared
// as cfg) and returns one tool per operation it selects, each with its
// REST config, schemas, annotations and mode. Operations that cannot be
// served are skipped with a warning in d naming the JSON pointer of the
// part at fault; a document that cannot be used at all is an error on
// openapi.document. Diagnostics never quote config values.
func Import(ctx context.Context, cfg *Config, op *sdk.Operation, t Target, d *sdk.Diagnostics) []sdk.Tool {
	return (&importer{t: t, cfg: cfg, op: op, d: d}).run(ctx)
}
