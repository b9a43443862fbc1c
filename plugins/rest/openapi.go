package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// The REST adapter expands an entry whose config is {"openapi": {...}} into
// one tool per operation of an OpenAPI document (see doc.go, "OpenAPI
// import"); a plain REST entry is its own tool.
var _ sdk.OperationExpander = (*adapter)(nil)

var openAPIFields = []string{
	"document", "base_url", "allow_external_refs", "tool_prefix", "include", "exclude",
	"overrides", "credentials", "headers", "timeout", "max_response_bytes", "output_schemas",
}

var (
	filterFields   = []string{"tags", "operation_ids", "methods", "paths"}
	overrideFields = []string{"name", "title", "description", "mode", "transport_behavior", "limits", "aggregation", "safety", "annotations"}
	// windowFields are the override fields that configure a window tool;
	// the host checks them as it checks an operations entry's.
	windowFields = []string{"transport_behavior", "limits", "aggregation", "safety"}
	annotFields  = []string{"read_only", "destructive", "idempotent", "open_world"}
	toolNameRE   = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
)

// errOpenAPIEntry is what calling an import entry itself answers.
var errOpenAPIEntry = errors.New("this rest config imports an OpenAPI document: the host expands it at load into one tool per API operation (ExpandOperation); the entry itself cannot be called")

// openAPIConfig is an import entry's config, checked without reading the
// document.
type openAPIConfig struct {
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
func (c *openAPIConfig) fetchTimeout(op time.Duration) time.Duration {
	if op > 0 {
		return op
	}
	return defaultFetchTimeout
}

// parseOpenAPIEntry returns the parse result of an import entry's config,
// nil when raw is not one (it has no "openapi" field). The entry passes
// ValidateOperation when its config is well-formed; calling it fails with
// errOpenAPIEntry.
func parseOpenAPIEntry(raw []byte) *parseResult {
	if !bytes.Contains(raw, []byte(`"openapi"`)) {
		return nil
	}
	var d diags
	if parseOpenAPIConfig(raw, &d) == nil && !d.Failed() {
		return nil
	}
	res := &parseResult{diags: d.List(), err: errOpenAPIEntry}
	if d.Failed() {
		res.err = errors.New(d.Summary("invalid rest operation config"))
	}
	return res
}

// parseOpenAPIConfig parses an import entry's config; it returns nil
// without diagnostics when raw has no "openapi" field. It never quotes
// config values in diagnostics.
func parseOpenAPIConfig(raw []byte, d *diags) *openAPIConfig {
	var fields map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimSpace(raw), &fields) != nil {
		return nil
	}
	v, ok := fields["openapi"]
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(fields) {
		if k != "openapi" {
			d.Errorf(k, "an openapi entry takes its settings inside openapi (known fields: %s)", strings.Join(openAPIFields, ", "))
		}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		d.Errorf("openapi", "must be an object {document, base_url, include, exclude, overrides, credentials, ...}")
		return &openAPIConfig{}
	}
	d.UnknownFields(obj, openAPIFields, "openapi.")
	c := &openAPIConfig{outputSchemas: true}

	// document
	if dv, ok := obj["document"]; !ok || isNull(dv) {
		d.Errorf("openapi.document", "required: the OpenAPI document's file (relative to the operations file) or http(s) URL")
	} else if json.Unmarshal(dv, &c.document) != nil || strings.TrimSpace(c.document) == "" {
		d.Errorf("openapi.document", "must be a file path or an http(s) URL")
	} else {
		c.document = strings.TrimSpace(c.document)
		if i := strings.Index(c.document, "://"); i > 0 {
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
	}

	// base_url
	if bv, ok := obj["base_url"]; ok && !isNull(bv) {
		if json.Unmarshal(bv, &c.baseURL) != nil {
			d.Errorf("openapi.base_url", "must be an absolute http or https URL")
		} else if msg := checkBaseURL(strings.TrimSpace(c.baseURL)); msg != "" {
			d.Errorf("openapi.base_url", "%s", msg)
		} else {
			c.baseURL = strings.TrimRight(strings.TrimSpace(c.baseURL), "/")
		}
	}

	parseBool(obj, "allow_external_refs", &c.allowExternalRefs, d)
	parseBool(obj, "output_schemas", &c.outputSchemas, d)

	// tool_prefix
	if pv, ok := obj["tool_prefix"]; ok && !isNull(pv) {
		if json.Unmarshal(pv, &c.toolPrefix) != nil || len(c.toolPrefix) > 64 ||
			c.toolPrefix != "" && !toolNameRE.MatchString(c.toolPrefix) {
			d.Errorf("openapi.tool_prefix", "must be at most 64 characters of A-Z a-z 0-9 _ . -")
		}
	}

	c.include = parseFilter(obj, "include", d)
	c.exclude = parseFilter(obj, "exclude", d)
	c.overrides = parseOverrides(obj, d)
	c.credentials = parseCredentials(obj, d)

	// headers: static headers of every tool, checked as rest's headers.
	if hv, ok := obj["headers"]; ok && !isNull(hv) {
		if json.Unmarshal(hv, &c.headers) != nil {
			d.Errorf("openapi.headers", "must be an object {Header-Name: value}")
		} else {
			var hd diags
			parseHeaders(hv, &operation{}, &hd)
			for _, x := range hd.List() {
				x.Field = "openapi." + x.Field
				d.Add(x)
			}
		}
	}

	// timeout, max_response_bytes: copied to every tool.
	if tv, ok := obj["timeout"]; ok && !isNull(tv) {
		var t time.Duration
		var err error
		if json.Unmarshal(tv, &c.timeout) == nil {
			t, err = time.ParseDuration(strings.TrimSpace(c.timeout))
		}
		if c.timeout == "" || err != nil || t <= 0 {
			d.Errorf("openapi.timeout", `must be a positive Go duration such as "10s"`)
		}
	}
	if mv, ok := obj["max_response_bytes"]; ok && !isNull(mv) {
		if json.Unmarshal(mv, &c.maxResponseBytes) != nil || c.maxResponseBytes < 0 {
			d.Errorf("openapi.max_response_bytes", "must be a non-negative integer number of bytes")
		}
	}
	return c
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

func parseBool(obj map[string]json.RawMessage, k string, dst *bool, d *diags) {
	if v, ok := obj[k]; ok && !isNull(v) {
		if json.Unmarshal(v, dst) != nil {
			d.Errorf("openapi."+k, "must be true or false")
		}
	}
}

func parseFilter(obj map[string]json.RawMessage, name string, d *diags) opFilter {
	var f opFilter
	v, ok := obj[name]
	if !ok || isNull(v) {
		return f
	}
	field := "openapi." + name
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		d.Errorf(field, "must be an object {tags, operation_ids, methods, paths}")
		return f
	}
	for _, k := range sortedKeys(m) {
		if !contains(filterFields, k) {
			d.Errorf(field+"."+k, "unknown field (known fields: %s)", strings.Join(filterFields, ", "))
			continue
		}
		var list []string
		if json.Unmarshal(m[k], &list) != nil {
			d.Errorf(field+"."+k, "must be a list of strings")
			continue
		}
		for i, s := range list {
			f2 := fmt.Sprintf("%s.%s[%d]", field, k, i)
			switch k {
			case "tags":
				f.tags = append(f.tags, s)
			case "operation_ids":
				if _, err := path.Match(s, ""); err != nil || s == "" {
					d.Errorf(f2, "not a valid glob pattern (* ? [a-z], \\ escapes)")
					continue
				}
				f.operationIDs = append(f.operationIDs, s)
			case "methods":
				m := strings.ToUpper(strings.TrimSpace(s))
				if !contains(httpMethods, strings.ToLower(m)) {
					d.Errorf(f2, "unknown HTTP method (GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH, TRACE, QUERY)")
					continue
				}
				f.methods = append(f.methods, m)
			case "paths":
				if !strings.HasPrefix(s, "/") {
					d.Errorf(f2, "a path prefix starts with / (e.g. /pets)")
					continue
				}
				f.paths = append(f.paths, s)
			}
		}
	}
	return f
}

func parseOverrides(obj map[string]json.RawMessage, d *diags) map[string]*opOverride {
	v, ok := obj["overrides"]
	if !ok || isNull(v) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		d.Errorf("openapi.overrides", `must be an object {operationId or "METHOD /path": {name, title, description, mode, limits, aggregation, safety, annotations}}`)
		return nil
	}
	out := map[string]*opOverride{}
	names := map[string]string{}
	for _, key := range sortedKeys(m) {
		field := "openapi.overrides." + key
		var o map[string]json.RawMessage
		if json.Unmarshal(m[key], &o) != nil || o == nil {
			d.Errorf(field, "must be an object {name, title, description, mode, limits, aggregation, safety, annotations}")
			continue
		}
		ov := &opOverride{key: key}
		for _, k := range sortedKeys(o) {
			fv := o[k]
			f := field + "." + k
			if isNull(fv) {
				continue
			}
			switch k {
			case "name":
				if json.Unmarshal(fv, &ov.name) != nil || !toolNameRE.MatchString(ov.name) {
					d.Errorf(f, "must be 1-128 characters of A-Z a-z 0-9 _ . -")
				} else if other, dup := names[ov.name]; dup {
					d.Errorf(f, "tool name %q is also given to %s", ov.name, other)
				} else {
					names[ov.name] = key
				}
			case "title", "description":
				var s string
				if json.Unmarshal(fv, &s) != nil {
					d.Errorf(f, "must be a string")
				} else if k == "title" {
					ov.title = s
				} else {
					ov.description = s
				}
			case "mode":
				if json.Unmarshal(fv, &ov.mode) != nil || ov.mode != "unary" && ov.mode != "window" {
					d.Errorf(f, `must be "unary" or "window"`)
				}
			case "transport_behavior", "limits", "aggregation", "safety":
				// The host checks these field by field, as it checks an
				// operations entry's; here only their shape.
				var str string
				var obj map[string]json.RawMessage
				switch {
				case k == "transport_behavior" && json.Unmarshal(fv, &str) != nil:
					d.Errorf(f, `must be "server_stream" or "request_response"`)
				case k != "transport_behavior" && (json.Unmarshal(fv, &obj) != nil || obj == nil):
					d.Errorf(f, "must be an object, as an operations entry writes it")
				default:
					if ov.window == nil {
						ov.window = map[string]json.RawMessage{}
					}
					ov.window[k] = fv
				}
			case "annotations":
				var a map[string]json.RawMessage
				if json.Unmarshal(fv, &a) != nil || a == nil {
					d.Errorf(f, "must be an object {read_only, destructive, idempotent, open_world}")
					continue
				}
				ov.hasAnnotations = true
				for _, ak := range sortedKeys(a) {
					var b bool
					if !contains(annotFields, ak) {
						d.Errorf(f+"."+ak, "unknown field (known fields: %s)", strings.Join(annotFields, ", "))
						continue
					}
					if isNull(a[ak]) {
						continue
					}
					if json.Unmarshal(a[ak], &b) != nil {
						d.Errorf(f+"."+ak, "must be true or false")
						continue
					}
					switch ak {
					case "read_only":
						ov.annotations.ReadOnly = sdk.Bool(b)
					case "destructive":
						ov.annotations.Destructive = sdk.Bool(b)
					case "idempotent":
						ov.annotations.Idempotent = sdk.Bool(b)
					case "open_world":
						ov.annotations.OpenWorld = sdk.Bool(b)
					}
				}
			default:
				d.Errorf(f, "unknown field (known fields: %s)", strings.Join(overrideFields, ", "))
			}
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
	if m, p, ok := strings.Cut(strings.TrimSpace(k), " "); ok && strings.HasPrefix(strings.TrimSpace(p), "/") && contains(httpMethods, strings.ToLower(m)) {
		return strings.ToUpper(m) + " " + strings.TrimSpace(p)
	}
	return k
}

func parseCredentials(obj map[string]json.RawMessage, d *diags) map[string]*credential {
	v, ok := obj["credentials"]
	if !ok || isNull(v) {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil || m == nil {
		d.Errorf("openapi.credentials", `must be an object {security scheme name: "key or token" | {username, password}}`)
		return nil
	}
	out := map[string]*credential{}
	for _, name := range sortedKeys(m) {
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
		for _, k := range sortedKeys(up) {
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
func (c *openAPIConfig) match(p, method string, tags []string, opID string) bool {
	in := &c.include
	if len(in.tags) > 0 && !anyTag(in.tags, tags) ||
		len(in.operationIDs) > 0 && !globMatch(in.operationIDs, opID) ||
		len(in.methods) > 0 && !contains(in.methods, method) ||
		len(in.paths) > 0 && !prefixMatch(in.paths, p) {
		return false
	}
	ex := &c.exclude
	return !(len(ex.tags) > 0 && anyTag(ex.tags, tags) ||
		len(ex.operationIDs) > 0 && globMatch(ex.operationIDs, opID) ||
		len(ex.methods) > 0 && contains(ex.methods, method) ||
		len(ex.paths) > 0 && prefixMatch(ex.paths, p))
}

// rawMatch applies the filters to an operation as written.
func (c *openAPIConfig) rawMatch(p, method string, op map[string]any) bool {
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
func (c *openAPIConfig) pathItemRefMayMatch(p string) bool {
	return (len(c.include.paths) == 0 || prefixMatch(c.include.paths, p)) &&
		!(len(c.exclude.paths) > 0 && prefixMatch(c.exclude.paths, p))
}

func anyTag(want, have []string) bool {
	for _, t := range have {
		if contains(want, t) {
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

// ExpandOperation implements sdk.OperationExpander. A plain REST entry is
// its own tool; an import entry ({"openapi": {...}}) becomes one tool per
// operation of the document, each with its own REST config. Operations that
// cannot be served are skipped with a warning naming the JSON pointer of
// the part at fault; a document that cannot be used at all is an error on
// openapi.document.
func (a *adapter) ExpandOperation(ctx context.Context, op *sdk.Operation) (tools []sdk.Tool, out []sdk.Diagnostic) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "rest adapter: panic in ExpandOperation: %T\n%s", r, debug.Stack())
			tools, out = nil, []sdk.Diagnostic{sdk.Errorf("openapi", "internal error while importing the document (panic), see the adapter log")}
		}
	}()
	var d diags
	cfg := parseOpenAPIConfig(op.Config, &d)
	if cfg == nil {
		return []sdk.Tool{{}}, nil // a plain REST operation: the entry itself
	}
	if d.Failed() {
		return nil, d.List()
	}
	imp := &importer{a: a, cfg: cfg, op: op, d: &d}
	tools = imp.run(ctx)
	if d.Failed() {
		return nil, d.List()
	}
	return tools, d.List()
}
