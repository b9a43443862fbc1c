package openapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// maxDescription bounds a tool description taken from the document.
const maxDescription = 8 << 10

// importer turns one import entry into tools.
type importer struct {
	t   Target
	cfg *Config
	op  *sdk.Operation
	d   *sdk.Diagnostics

	ld     *loadedDoc
	doc    *openapi3.T
	window bool
	names  map[string]bool
	// baseErr is reported once when an operation needs a base URL that
	// neither the config nor the document gives.
	baseErr bool
}

// candidate is one operation of the document.
type candidate struct {
	path, method string
	item         *openapi3.PathItem
	op           *openapi3.Operation
	ptr          string
	override     *opOverride
	name         string
}

func (c *candidate) label() string {
	s := c.method + " " + c.path
	if c.op.OperationID != "" {
		s += " (" + c.op.OperationID + ")"
	}
	return s
}

// skip is why an operation is left out, with the pointer of the part at
// fault.
type skip struct{ ptr, msg string }

func (im *importer) skipf(ptr, format string, args ...any) *skip {
	return &skip{ptr: ptr, msg: fmt.Sprintf(format, args...)}
}

func (im *importer) run(ctx context.Context) []sdk.Tool {
	im.window = im.op.Mode == sdk.ModeWindow
	src, err := im.readDocument(ctx)
	if err != nil {
		im.d.Errorf("openapi.document", "%v", err)
		return nil
	}
	return im.runSource(ctx, src)
}

// runSource imports a document that has been read.
func (im *importer) runSource(ctx context.Context, src *docSource) []sdk.Tool {
	cfg := im.cfg
	ld, prob := im.loadDocument(ctx, src, cfg.fetchTimeout(im.op.Timeout))
	if prob != nil {
		im.d.Errorf("openapi.document", "the OpenAPI document cannot be used: %s", prob)
		return nil
	}
	im.ld = ld
	for _, s := range ld.skipped {
		im.d.Warnf("openapi.document", "operation %s skipped: %s", s.op, s)
	}
	if ld.doc == nil {
		im.noTools()
		return nil
	}
	im.doc = ld.doc
	if im.doc.Components != nil {
		for _, name := range slices.Sorted(maps.Keys(cfg.credentials)) {
			if im.doc.Components.SecuritySchemes[name] == nil {
				im.d.Warnf("openapi.credentials."+name, "the document has no security scheme of this name")
			}
		}
	} else if len(cfg.credentials) > 0 {
		im.d.Warnf("openapi.credentials", "the document declares no security schemes")
	}

	// The operations, in path order then method order.
	var cands []*candidate
	paths := im.doc.Paths.Map()
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item := paths[p]
		if item == nil {
			continue
		}
		pptr := ld.opPointer["*"+p]
		if pptr == "" {
			pptr = "#/paths/" + escapePointer(p)
		}
		ops := item.Operations()
		for _, m := range httpMethods {
			o := ops[strings.ToUpper(m)]
			if o == nil {
				continue
			}
			M := strings.ToUpper(m)
			if !cfg.match(p, M, o.Tags, o.OperationID) {
				continue
			}
			ptr := ld.opPointer[M+" "+p]
			if ptr == "" {
				ptr = pptr + "/" + m
			}
			c := &candidate{path: p, method: M, item: item, op: o, ptr: ptr}
			if o.OperationID != "" {
				c.override = cfg.overrides[o.OperationID]
			}
			if c.override == nil {
				c.override = cfg.overrides[M+" "+p]
			}
			if c.override != nil {
				c.override.used = true
			}
			cands = append(cands, c)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.overrides)) {
		if !cfg.overrides[k].used {
			im.d.Warnf("openapi.overrides."+k, `no imported operation has this operationId or "METHOD /path"`)
		}
	}

	// Names: overrides first, then the document's, made unique.
	im.names = map[string]bool{}
	for _, c := range cands {
		if c.override != nil && c.override.name != "" {
			c.name = c.override.name
			im.names[c.name] = true
		}
	}
	for _, c := range cands {
		if c.name == "" {
			c.name = im.uniqueName(baseToolName(c))
		}
	}

	var tools []sdk.Tool
	for _, c := range cands {
		t, sk := im.build(ctx, c)
		if sk != nil {
			im.d.Warnf("openapi.document", "operation %s skipped: %s: %s", c.label(), sk.ptr, sk.msg)
			continue
		}
		if t != nil {
			tools = append(tools, *t)
		}
	}
	if len(tools) == 0 && !im.d.Failed() {
		im.noTools()
	}
	return tools
}

func (im *importer) noTools() {
	msg := "no operation of the document can be served"
	if !im.cfg.include.empty() || !im.cfg.exclude.empty() {
		msg += " (after openapi.include and openapi.exclude)"
	}
	im.d.Errorf("openapi.document", "%s; the warnings above say why operations were skipped", msg)
}

var nameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// baseToolName is the tool name an operation gets: its operationId, or
// its method and path, with characters MCP does not allow replaced.
func baseToolName(c *candidate) string {
	if id := strings.Trim(nameRE.ReplaceAllString(c.op.OperationID, "_"), "_"); id != "" {
		return id
	}
	var parts []string
	for _, seg := range strings.Split(c.path, "/") {
		seg = strings.Trim(nameRE.ReplaceAllString(seg, "_"), "_.")
		if seg != "" {
			parts = append(parts, seg)
		}
	}
	return strings.ToLower(c.method) + "_" + strings.Join(parts, "_")
}

// uniqueName prefixes, bounds (128 characters) and deduplicates a name.
func (im *importer) uniqueName(base string) string {
	prefix := im.cfg.toolPrefix
	limit := 128 - len(prefix)
	name := prefix + truncate(base, limit)
	for i := 2; im.names[name]; i++ {
		suffix := fmt.Sprintf("_%d", i)
		name = prefix + truncate(base, limit-len(suffix)) + suffix
	}
	im.names[name] = true
	return name
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// build makes the tool of one operation, or says why it cannot.
func (im *importer) build(ctx context.Context, c *candidate) (*sdk.Tool, *skip) {
	doc := im.doc
	if !im.t.Sends(c.method) {
		return nil, im.skipf(c.ptr, "the rest adapter does not send %s requests", c.method)
	}
	vopts := []openapi3.ValidationOption{openapi3.DisableExamplesValidation(), openapi3.DisableSchemaDefaultsValidation(),
		openapi3.DisableSchemaPatternValidation()}
	if doc.IsOpenAPI31OrLater() {
		vopts = append(vopts, openapi3.IsOpenAPI31OrLater())
	}
	if doc.IsOpenAPI32OrLater() {
		vopts = append(vopts, openapi3.IsOpenAPI32OrLater())
	}
	if err := c.op.Validate(openapi3.WithValidationOptions(ctx, vopts...)); err != nil {
		return nil, im.skipf(c.ptr, "invalid operation: %v", err)
	}

	// What the operation answers: the 2xx responses.
	// Its mode: window for a stream, and for everything a window entry
	// imports; an override wins. A host that reads tools' own modes
	// (ToolExecution) serves each tool in its own mode; an older one
	// serves every tool in its entry's.
	resp := im.responses(c)
	window := resp.stream || im.window
	if c.override != nil && c.override.mode != "" {
		window = c.override.mode == "window"
	}
	own := im.op.ToolExecution
	switch {
	case !window && c.override.windowField() != "":
		im.d.Errorf(c.override.windowField(), "configures a window, and operation %s is unary: set mode: window", c.label())
		return nil, nil
	case !own && c.override.windowField() != "":
		im.d.Errorf(c.override.windowField(), "this Crank host gives every tool its entry's window config: "+
			"upgrade it, or serve the operation from an operations entry with mode: window whose openapi.include.operation_ids names it")
		return nil, nil
	case !own && !im.window && window:
		why := "it is overridden to mode window"
		if resp.stream {
			why = "it answers a text/event-stream"
		}
		return nil, im.skipf(c.ptr+"/responses", "%s: serve it from an operations entry with mode: window (and its limits) "+
			"whose openapi.include.operation_ids names it", why)
	case !own && im.window && !window:
		return nil, im.skipf(c.ptr, "this entry has mode window and the operation is overridden to mode unary")
	}

	base, sk := im.baseURL(c)
	if sk != nil {
		return nil, sk
	}

	rc := &restConfig{method: c.method, headers: map[string]any{}, query: map[string]string{}, headerArgs: map[string]string{},
		styles: map[string]any{}}
	for k, v := range im.cfg.headers {
		rc.headers[k] = v
	}
	if a := acceptHeader(c.op); a != "" && !slices.ContainsFunc(slices.Collect(maps.Keys(rc.headers)), func(k string) bool {
		return http.CanonicalHeaderKey(k) == "Accept"
	}) {
		rc.headers["Accept"] = a
	}

	// Security: the first requirement the credentials satisfy.
	credHeaders, credQuery, sk := im.security(c, rc)
	if sk != nil {
		return nil, sk
	}

	in := newInputBuilder(window)
	if sk := im.parameters(c, rc, in, credHeaders, credQuery); sk != nil {
		return nil, sk
	}
	if sk := im.body(c, rc, in); sk != nil {
		return nil, sk
	}

	// The URL: base + path, path parameters renamed to their arguments.
	pathTmpl, sk := im.pathTemplate(c, rc)
	if sk != nil {
		return nil, sk
	}
	rc.url = base + pathTmpl
	if len(rc.staticQuery) > 0 {
		rc.url += "?" + strings.Join(rc.staticQuery, "&")
	}
	if im.cfg.timeout != "" {
		rc.timeout = im.cfg.timeout
	}
	rc.maxBytes = im.cfg.maxResponseBytes

	// Schemas.
	inSchema, warns := in.schema()
	for _, w := range warns {
		im.d.Warnf("openapi.document", "operation %s: %s", c.label(), w)
	}
	if inSchema == nil {
		return nil, im.skipf(c.ptr, "its input schema is too large")
	}
	inJSON, err := checkSchema(inSchema)
	if err != nil {
		return nil, im.skipf(c.ptr, "its input schema is not valid JSON Schema 2020-12: %v", err)
	}
	var outJSON, itemJSON json.RawMessage
	if window {
		if item := im.itemSchema(resp); item != nil {
			if itemJSON, err = checkSchema(item); err != nil {
				im.d.Warnf("openapi.document", "operation %s: item schema left out: %v", c.label(), err)
				itemJSON = nil
			}
		}
	} else if out := im.outputSchema(c, resp); out != nil {
		if outJSON, err = checkSchema(out); err != nil {
			im.d.Warnf("openapi.document", "operation %s: output schema left out: %v", c.label(), err)
			outJSON = nil
		}
	}

	cfgJSON, err := json.Marshal(rc.toMap())
	if err != nil {
		return nil, im.skipf(c.ptr, "cannot encode its rest config: %v", err)
	}
	if diags := im.t.Check(&sdk.Operation{Config: cfgJSON, BaseDir: im.op.BaseDir}); len(diags) > 0 {
		var d sdk.Diagnostics
		d.Add(diags...)
		return nil, im.skipf(c.ptr, "%s", d.Summary("it makes no valid rest config"))
	}

	t := &sdk.Tool{
		Name:         c.name,
		Title:        toolTitle(c),
		Description:  toolDescription(c),
		InputSchema:  inJSON,
		OutputSchema: outJSON,
		Annotations:  methodAnnotations(c.method),
		Config:       cfgJSON,
		ItemSchema:   itemJSON,
		Execution:    c.override.execution(),
	}
	if window != im.window {
		t.Mode = sdk.ModeUnary
		if window {
			t.Mode = sdk.ModeWindow
		}
	}
	if o := c.override; o != nil {
		if o.title != "" {
			t.Title = o.title
		}
		if o.description != "" {
			t.Description = o.description
		}
		if o.hasAnnotations {
			a := &t.Annotations
			for _, p := range []struct{ dst, src **bool }{{&a.ReadOnly, &o.annotations.ReadOnly},
				{&a.Destructive, &o.annotations.Destructive}, {&a.Idempotent, &o.annotations.Idempotent},
				{&a.OpenWorld, &o.annotations.OpenWorld}} {
				if *p.src != nil {
					*p.dst = *p.src
				}
			}
		}
	}
	return t, nil
}

func toolTitle(c *candidate) string {
	s := strings.TrimSpace(c.op.Summary)
	if s == "" || strings.ContainsAny(s, "\r\n") || len(s) > 200 {
		return ""
	}
	return s
}

func toolDescription(c *candidate) string {
	sum, desc := strings.TrimSpace(c.op.Summary), strings.TrimSpace(c.op.Description)
	var s string
	switch {
	case sum != "" && desc != "" && !strings.HasPrefix(desc, sum):
		s = sum + "\n\n" + desc
	case desc != "":
		s = desc
	case sum != "":
		s = sum
	default:
		s = c.method + " " + c.path
	}
	if c.op.Deprecated {
		s = "Deprecated. " + s
	}
	if len(s) > maxDescription {
		s = s[:maxDescription] + "…"
	}
	return s
}

// methodAnnotations are the hints an HTTP method gives: GET, HEAD and
// OPTIONS read only; DELETE destructive; PUT and DELETE idempotent.
func methodAnnotations(method string) sdk.Annotations {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return sdk.Annotations{ReadOnly: sdk.Bool(true), Idempotent: sdk.Bool(true)}
	case http.MethodDelete:
		return sdk.Annotations{ReadOnly: sdk.Bool(false), Destructive: sdk.Bool(true), Idempotent: sdk.Bool(true)}
	case http.MethodPut:
		return sdk.Annotations{ReadOnly: sdk.Bool(false), Idempotent: sdk.Bool(true)}
	case http.MethodPost:
		return sdk.Annotations{ReadOnly: sdk.Bool(false), Idempotent: sdk.Bool(false)}
	}
	return sdk.Annotations{ReadOnly: sdk.Bool(false)}
}

// baseURL is the URL the operation's path is appended to: openapi.base_url,
// else the first server of the operation, its path item or the document
// (variables at their defaults; a relative one resolved against the
// document's URL).
func (im *importer) baseURL(c *candidate) (string, *skip) {
	if im.cfg.baseURL != "" {
		return im.cfg.baseURL, nil
	}
	servers := im.doc.Servers
	ptr := "#/servers/0"
	if c.item.Servers != nil && len(c.item.Servers) > 0 {
		servers, ptr = c.item.Servers, strings.TrimSuffix(c.ptr, "/"+strings.ToLower(c.method))+"/servers/0"
	}
	if c.op.Servers != nil && len(*c.op.Servers) > 0 {
		servers, ptr = *c.op.Servers, c.ptr+"/servers/0"
	}
	if im.ld.version == "2.0" {
		ptr = "#/host"
	}
	if len(servers) == 0 || servers[0] == nil {
		return "", im.baseMissing(ptr, "the document names no server")
	}
	s := servers[0]
	raw := s.URL
	for name, v := range s.Variables {
		if v != nil {
			raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || strings.ContainsAny(raw, "{}") {
		return "", im.baseMissing(ptr, "its server URL is not a valid URL")
	}
	if !u.IsAbs() {
		if src := im.cfg.documentURL; src != nil {
			u = src.ResolveReference(u)
		} else {
			return "", im.baseMissing(ptr, "its server URL is relative and the document was read from a file")
		}
	}
	out := strings.TrimRight(u.String(), "/")
	if msg := checkBaseURL(out); msg != "" {
		return "", im.baseMissing(ptr, "its server URL "+msg)
	}
	return out, nil
}

func (im *importer) baseMissing(ptr, why string) *skip {
	if !im.baseErr {
		im.baseErr = true
		im.d.Errorf("openapi.base_url", "required: %s (%s); set openapi.base_url to the upstream's base URL", why, ptr)
	}
	return &skip{ptr: ptr, msg: "no base URL"}
}

// restConfig is the rest config of one tool, as it is built.
type restConfig struct {
	method, url, body, timeout string
	headers                    map[string]any
	query                      map[string]string
	headerArgs                 map[string]string
	styles                     map[string]any
	bodyFormat                 map[string]any
	pathParams                 map[string]string
	staticQuery                []string
	maxBytes                   int64
}

func (rc *restConfig) toMap() map[string]any {
	m := map[string]any{"method": rc.method, "url": rc.url}
	if len(rc.query) > 0 {
		m["query"] = rc.query
	}
	if len(rc.headers) > 0 {
		m["headers"] = rc.headers
	}
	if len(rc.headerArgs) > 0 {
		m["header_args"] = rc.headerArgs
	}
	if len(rc.styles) > 0 {
		m["param_styles"] = rc.styles
	}
	if rc.body != "" {
		m["body"] = rc.body
	}
	if rc.bodyFormat != nil {
		m["body_format"] = rc.bodyFormat
	}
	if rc.timeout != "" {
		m["timeout"] = rc.timeout
	}
	if rc.maxBytes > 0 {
		m["max_response_bytes"] = rc.maxBytes
	}
	return m
}

// security applies the first security requirement of the operation that
// the configured credentials satisfy. It returns the headers and query
// parameters the credentials set (parameters of those names are left out
// of the tool's arguments).
func (im *importer) security(c *candidate, rc *restConfig) (map[string]bool, map[string]bool, *skip) {
	reqs := im.doc.Security
	ptr := "#/security"
	if c.op.Security != nil {
		reqs, ptr = *c.op.Security, c.ptr+"/security"
	}
	if len(reqs) == 0 {
		return nil, nil, nil
	}
	var schemes openapi3.SecuritySchemes
	if im.doc.Components != nil {
		schemes = im.doc.Components.SecuritySchemes
	}
	var wanted []string
	for _, alt := range reqs {
		if len(alt) == 0 {
			return nil, nil, nil // security is optional
		}
		headers, query := map[string]any{}, []string{}
		hset, qset := map[string]bool{}, map[string]bool{}
		ok := true
		var names []string
		for _, name := range slices.Sorted(maps.Keys(alt)) {
			names = append(names, name)
			sr, cred := schemes[name], im.cfg.credentials[name]
			if sr == nil || sr.Value == nil || cred == nil {
				ok = false
				continue
			}
			if !applyCredential(sr.Value, cred, headers, &query, hset, qset) {
				ok = false
			}
		}
		if ok {
			for k, v := range headers {
				if _, set := rc.headers[k]; !set {
					rc.headers[k] = v
				}
			}
			rc.staticQuery = append(rc.staticQuery, query...)
			return hset, qset, nil
		}
		wanted = append(wanted, strings.Join(names, " and "))
	}
	return nil, nil, im.skipf(ptr, "it needs credentials for security scheme %s: set openapi.credentials (a key or token, or {username, password} for http basic)",
		strings.Join(wanted, ", or "))
}

// applyCredential adds what a credential sends for its scheme; false when
// the credential does not fit the scheme or the scheme is not supported.
func applyCredential(s *openapi3.SecurityScheme, cred *credential, headers map[string]any, query *[]string, hset, qset map[string]bool) bool {
	switch strings.ToLower(s.Type) {
	case "apikey":
		if cred.basic || s.Name == "" {
			return false
		}
		switch strings.ToLower(s.In) {
		case "header":
			canon := http.CanonicalHeaderKey(s.Name)
			headers[canon] = cred.value
			hset[canon] = true
		case "query":
			*query = append(*query, url.QueryEscape(s.Name)+"="+url.QueryEscape(cred.value))
			qset[s.Name] = true
		case "cookie":
			pair := s.Name + "=" + cred.value
			if prev, ok := headers["Cookie"].(string); ok {
				pair = prev + "; " + pair
			}
			headers["Cookie"] = pair
			hset["Cookie"] = true
		default:
			return false
		}
	case "http":
		switch strings.ToLower(s.Scheme) {
		case "bearer":
			if cred.basic {
				return false
			}
			headers["Authorization"] = "Bearer " + cred.value
		case "basic":
			if !cred.basic {
				return false
			}
			headers["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(cred.username+":"+cred.password))
		default:
			return false
		}
		hset["Authorization"] = true
	case "oauth2", "openidconnect":
		if cred.basic {
			return false
		}
		headers["Authorization"] = "Bearer " + cred.value
		hset["Authorization"] = true
	default:
		return false
	}
	return true
}

// inputBuilder collects a tool's arguments.
type inputBuilder struct {
	props    []inputProp
	used     map[string]bool
	required []string
	// flat is the request body's object schema whose properties are
	// arguments themselves.
	flat *openapi3.SchemaRef
	// flatRequired: the body is required, and so are its required
	// properties.
	flatRequired bool
	// strict refuses unknown arguments (additionalProperties: false).
	strict bool
	// files are the multipart body's file properties, given in base64:
	// their descriptions.
	files map[string]string
}

type inputProp struct {
	name        string
	schema      *openapi3.SchemaRef
	description string
	deprecated  bool
	// path: the argument fills a path parameter, which cannot be empty.
	path bool
}

func newInputBuilder(window bool) *inputBuilder {
	in := &inputBuilder{used: map[string]bool{}, strict: true}
	if window {
		in.used["cursor"] = true // the window's own argument
	}
	return in
}

// argName picks a unique argument name for a parameter.
func (in *inputBuilder) argName(name, loc string) string {
	base := strings.Trim(nameRE.ReplaceAllString(name, "_"), "_")
	if base == "" {
		base = loc + "_param"
	}
	if !in.used[base] {
		in.used[base] = true
		return base
	}
	alt := base + "_" + loc
	for i := 2; in.used[alt]; i++ {
		alt = fmt.Sprintf("%s_%s%d", base, loc, i)
	}
	in.used[alt] = true
	return alt
}

// schema builds the input schema: an object of the arguments.
func (in *inputBuilder) schema() (map[string]any, []string) {
	var roots []*openapi3.SchemaRef
	for _, p := range in.props {
		roots = append(roots, p.schema)
	}
	if in.flat != nil {
		roots = append(roots, in.flat)
	}
	return convertRoots(true, roots, func(c *schemaConv) map[string]any {
		props := map[string]any{}
		root := map[string]any{"type": "object", "properties": props}
		for _, p := range in.props {
			s := c.convert(p.schema)
			if m, ok := s.(map[string]any); ok {
				if _, has := m["description"]; !has && p.description != "" {
					m["description"] = p.description
				}
				if p.deprecated {
					m["deprecated"] = true
				}
				if _, has := m["minLength"]; p.path && !has && mayBeString(m["type"]) {
					// An empty path segment is refused at call time:
					// say so (it constrains strings only).
					m["minLength"] = 1
				}
			}
			props[p.name] = s
		}
		req := append([]string(nil), in.required...)
		if in.flat != nil {
			fs := in.flat.Value
			fprops, dropped := c.properties(fs.Properties)
			for k, v := range fprops {
				if desc, ok := in.files[k]; ok {
					v = map[string]any{"type": "string", "contentEncoding": "base64", "description": desc}
				}
				props[k] = v
			}
			if in.flatRequired {
				req = append(req, filterOut(fs.Required, dropped)...)
			}
			if v := c.boolSchema(fs.AdditionalProperties); v != nil {
				root["additionalProperties"] = v
			}
		} else if in.strict {
			root["additionalProperties"] = false
		}
		if len(req) > 0 {
			sort.Strings(req)
			root["required"] = req
		}
		return root
	})
}

// acceptHeader is the Accept header of an operation whose 2xx answers
// are not all JSON (an image, a tar, a PDF): their media types, so that
// the API does not refuse the adapter's default application/json with
// a 406. "" when the default serves.
func acceptHeader(op *openapi3.Operation) string {
	if op.Responses == nil {
		return ""
	}
	seen := map[string]bool{}
	other := false
	for code, r := range op.Responses.Map() {
		if len(code) != 3 || code[0] != '2' || r == nil || r.Value == nil {
			continue
		}
		for mt := range r.Value.Content {
			t, _, err := mime.ParseMediaType(mt)
			if err != nil {
				continue
			}
			seen[t] = true
			other = other || !isJSONMediaType(t)
		}
	}
	if !other {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(seen)), ", ")
}

// mayBeString tells whether a converted schema's type admits strings
// (no type admits anything).
func mayBeString(t any) bool {
	switch t := t.(type) {
	case nil:
		return true
	case string:
		return t == "string"
	case []string:
		return slices.Contains(t, "string")
	case []any:
		return slices.Contains(t, any("string"))
	}
	return false
}

// parameters turns the operation's path, query and header parameters into
// arguments.
func (im *importer) parameters(c *candidate, rc *restConfig, in *inputBuilder, credHeaders, credQuery map[string]bool) *skip {
	type param struct {
		p   *openapi3.Parameter
		ptr string
	}
	itemPtr := strings.TrimSuffix(c.ptr, "/"+strings.ToLower(c.method))
	merged := map[string]param{}
	var order []string
	add := func(list openapi3.Parameters, base string) {
		for i, r := range list {
			if r == nil || r.Value == nil {
				continue
			}
			ptr := fmt.Sprintf("%s/parameters/%d", base, i)
			if im.ld.version == "2.0" {
				ptr = c.ptr
			}
			k := r.Value.In + "\x00" + r.Value.Name
			if _, seen := merged[k]; !seen {
				order = append(order, k)
			}
			merged[k] = param{r.Value, ptr}
		}
	}
	add(c.item.Parameters, itemPtr)
	add(c.op.Parameters, c.ptr)
	rank := map[string]int{"path": 0, "query": 1, "header": 2, "cookie": 3}
	sort.SliceStable(order, func(i, j int) bool {
		return rank[merged[order[i]].p.In] < rank[merged[order[j]].p.In]
	})
	for _, k := range order {
		pp := merged[k]
		p := pp.p
		switch p.In {
		case "path", "query", "header":
		case "cookie":
			if p.Required {
				return im.skipf(pp.ptr, "required cookie parameter %q: the rest adapter does not send cookie parameters", p.Name)
			}
			im.d.Warnf("openapi.document", "operation %s: cookie parameter %q left out (%s): the rest adapter does not send cookie parameters", c.label(), p.Name, pp.ptr)
			continue
		default:
			return im.skipf(pp.ptr, "parameter %q: unknown location %q", p.Name, p.In)
		}
		if p.In == "header" {
			canon := http.CanonicalHeaderKey(p.Name)
			switch {
			case canon == "Accept" || canon == "Content-Type" || canon == "Authorization":
				continue // OpenAPI: such header parameters are ignored
			case credHeaders[canon]:
				continue // the credential sets it
			case httpadapter.HopByHopHeader(canon) || canon == "Host" || !httpadapter.ValidHeaderName(p.Name):
				if p.Required {
					return im.skipf(pp.ptr, "header parameter %q cannot be sent by the rest adapter", p.Name)
				}
				im.d.Warnf("openapi.document", "operation %s: header parameter %q left out (%s): it cannot be sent by the rest adapter", c.label(), p.Name, pp.ptr)
				continue
			case rc.headerArgs[canon] != "":
				return im.skipf(pp.ptr, "header parameter %q is declared twice (header names are case-insensitive)", p.Name)
			}
		}
		if p.In == "query" && credQuery[p.Name] {
			continue
		}
		schema := p.Schema
		style, explode := p.Style, false
		jsonContent := false
		if schema == nil && len(p.Content) > 0 {
			mt, media := pickJSON(p.Content)
			if media == nil {
				for _, k := range slices.Sorted(maps.Keys(p.Content)) {
					mt, media = k, p.Content[k]
					break
				}
			}
			if media != nil {
				schema = media.Schema
			}
			jsonContent = isJSONMediaType(mt)
			if !jsonContent {
				return im.skipf(pp.ptr, "parameter %q: content %s is not supported (only JSON)", p.Name, mt)
			}
		}
		if schema == nil {
			schema = &openapi3.SchemaRef{Value: &openapi3.Schema{}}
		}
		arg := in.argName(p.Name, p.In)
		in.props = append(in.props, inputProp{name: arg, schema: schema, description: p.Description, deprecated: p.Deprecated, path: p.In == "path"})
		if p.In == "path" || p.Required {
			in.required = append(in.required, arg)
		}
		loc := p.In
		if style == "" {
			style = map[string]string{"path": StyleSimple, "query": StyleForm, "header": StyleSimple}[loc]
		}
		explode = style == StyleForm || style == StyleDeepObject
		if p.Explode != nil {
			explode = *p.Explode
		}
		if jsonContent {
			style, explode = StyleJSON, false
		}
		if !slices.Contains(StylesIn[loc], style) {
			return im.skipf(pp.ptr, "parameter %q: style %s is not supported for a %s parameter", p.Name, style, loc)
		}
		if style == StyleDeepObject && !explode {
			return im.skipf(pp.ptr, "parameter %q: style deepObject must be exploded", p.Name)
		}
		prim := isPrimitiveSchema(schema)
		needStyle := false
		switch loc {
		case "path":
			if !strings.Contains(c.path, "{"+p.Name+"}") {
				return im.skipf(pp.ptr, "path parameter %q does not appear in the path %s", p.Name, c.path)
			}
			rc.pathArgs(p.Name, arg)
			needStyle = style != StyleSimple || !prim
		case "query":
			rc.query[p.Name] = arg
			needStyle = style != StyleForm || !explode || p.AllowReserved || !(prim || isPrimitiveArray(schema))
		case "header":
			rc.headerArgs[http.CanonicalHeaderKey(p.Name)] = arg
			needStyle = style != StyleSimple || !prim
		}
		if needStyle {
			st := map[string]any{"style": style}
			if style != StyleJSON {
				st["explode"] = explode
			}
			if p.AllowReserved && loc == "query" {
				st["allow_reserved"] = true
			}
			rc.styles[arg] = st
		}
	}
	return nil
}

// pathArgs records that the path parameter name is filled by arg.
func (rc *restConfig) pathArgs(name, arg string) {
	if rc.pathParams == nil {
		rc.pathParams = map[string]string{}
	}
	rc.pathParams[name] = arg
}

func isPrimitiveSchema(r *openapi3.SchemaRef) bool {
	if r == nil || r.Value == nil || r.Value.Type == nil || len(*r.Value.Type) == 0 {
		return false
	}
	for _, t := range *r.Value.Type {
		switch t {
		case "string", "number", "integer", "boolean", "null":
		default:
			return false
		}
	}
	return true
}

func isPrimitiveArray(r *openapi3.SchemaRef) bool {
	if r == nil || r.Value == nil || r.Value.Type == nil || !r.Value.Type.Is("array") {
		return false
	}
	return r.Value.Items == nil || isPrimitiveSchema(r.Value.Items)
}

var pathParamRE = regexp.MustCompile(`\{([^{}]*)\}`)

// pathTemplate rewrites the operation's path with the arguments' names.
func (im *importer) pathTemplate(c *candidate, rc *restConfig) (string, *skip) {
	var bad *skip
	out := pathParamRE.ReplaceAllStringFunc(c.path, func(m string) string {
		name := m[1 : len(m)-1]
		arg, ok := rc.pathParams[name]
		if !ok && bad == nil {
			bad = im.skipf(c.ptr, "path parameter {%s} is not declared in parameters", name)
		}
		return "{" + arg + "}"
	})
	return out, bad
}

// pickJSON returns the JSON media type of a content map: application/json
// first, then any other JSON type.
func pickJSON(content openapi3.Content) (string, *openapi3.MediaType) {
	if m := content["application/json"]; m != nil {
		return "application/json", m
	}
	for _, k := range slices.Sorted(maps.Keys(content)) {
		if isJSONMediaType(k) && content[k] != nil {
			return k, content[k]
		}
	}
	return "", nil
}

func isJSONMediaType(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return false
	}
	return t == "application/json" || t == "text/json" || strings.HasSuffix(t, "+json")
}

func isSSEMediaType(mt string) bool {
	t, _, err := mime.ParseMediaType(mt)
	return err == nil && t == "text/event-stream"
}

// Request body media types the rest adapter sends besides JSON (its
// body_format).
const (
	mediaForm      = "application/x-www-form-urlencoded"
	mediaMultipart = "multipart/form-data"
)

// pickBody picks the request body's media type: JSON first, then a
// form, multipart, then a raw body (application/octet-stream first).
func pickBody(content openapi3.Content) (string, *openapi3.MediaType) {
	if mt, m := pickJSON(content); m != nil {
		return mt, m
	}
	keys := slices.Sorted(maps.Keys(content))
	for _, want := range []string{mediaForm, mediaMultipart, "application/octet-stream"} {
		for _, k := range keys {
			if t, _, err := mime.ParseMediaType(k); err == nil && t == want && content[k] != nil {
				return k, content[k]
			}
		}
	}
	for _, k := range keys {
		if content[k] != nil {
			return k, content[k]
		}
	}
	return "", nil
}

// body turns the request body into arguments: the properties of an object
// body are arguments themselves (unless one is named like a parameter),
// any other body is the argument "body". JSON, form and multipart bodies
// are objects; any other media type is sent raw from a string argument
// (base64 unless text). A body whose schema requires properties is
// published required even when the document leaves requestBody.required
// false (its default): in practice the API refuses the call without
// them, and the caller should be told before it is sent.
func (im *importer) body(c *candidate, rc *restConfig, in *inputBuilder) *skip {
	rb := c.op.RequestBody
	if rb == nil || rb.Value == nil || len(rb.Value.Content) == 0 {
		rc.body = "none"
		return nil
	}
	ptr := c.ptr + "/requestBody"
	if im.ld.version == "2.0" {
		ptr = c.ptr
	}
	mt, media := pickBody(rb.Value.Content)
	if media == nil {
		return im.skipf(ptr+"/content", "request body %s: no media type is declared with a schema", strings.Join(slices.Sorted(maps.Keys(rb.Value.Content)), ", "))
	}
	kind, _, _ := mime.ParseMediaType(mt)
	schema := media.Schema
	if schema == nil {
		schema = &openapi3.SchemaRef{Value: &openapi3.Schema{}}
	}
	if sv := schema.Value; sv != nil && sv.Type.Is("object") && len(sv.Properties) == 0 && sv.AdditionalProperties.Has != nil &&
		!*sv.AdditionalProperties.Has && len(sv.AllOf)+len(sv.AnyOf)+len(sv.OneOf) == 0 {
		// An object that admits no member (Stripe's GET operations
		// declare one): there is nothing to send.
		rc.body = "none"
		return nil
	}
	required := rb.Value.Required || schema.Value != nil && len(schema.Value.Required) > 0
	format := map[string]any{"media_type": mt}
	switch {
	case isJSONMediaType(mt):
		format = nil
		if mt != "application/json" {
			rc.headers["Content-Type"] = mt
		}
	case kind == mediaForm || kind == mediaMultipart:
		if enc := im.bodyEncoding(schema, media, kind == mediaMultipart, in); len(enc) > 0 {
			format["encoding"] = enc
		}
	default: // raw
		if strings.Contains(kind, "*") {
			// A range (*/*, image/*) is no Content-Type: send bytes.
			mt, kind = "application/octet-stream", "application/octet-stream"
			format["media_type"] = mt
		}
		sv := schema.Value
		if sv != nil && sv.Type != nil && len(*sv.Type) > 0 && !sv.Type.Is("string") {
			return im.skipf(ptr+"/content/"+escapePointer(mt), "request body %s: it is sent raw from a string, and its schema is %s", mt, describeType(sv))
		}
		text := !httpadapter.BinaryMediaType(mt)
		format["base64"] = !text
		desc := rb.Value.Description
		if desc == "" {
			desc = "The request body (" + mt + ")."
		}
		if text {
			schema = &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"string"}, Description: desc}}
		} else {
			schema = &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"string"}, ContentEncoding: "base64",
				ContentMediaType: kind, Description: desc + " Its bytes in base64 (standard encoding)."}}
		}
		rc.bodyFormat = format
		im.bodyArg(rc, in, schema, desc, rb.Value.Required)
		return nil
	}
	rc.bodyFormat = format
	if im.flattenable(schema, in) {
		in.flat = schema
		in.flatRequired = required
		for k := range schema.Value.Properties {
			in.used[k] = true
		}
		rc.body = "arguments"
		return nil
	}
	desc := rb.Value.Description
	if desc == "" {
		desc = "The request body."
	}
	im.bodyArg(rc, in, schema, desc, required)
	return nil
}

// bodyArg makes the body one argument, "body" unless a parameter has
// that name.
func (im *importer) bodyArg(rc *restConfig, in *inputBuilder, schema *openapi3.SchemaRef, desc string, required bool) {
	arg := "body"
	for i := 2; in.used[arg]; i++ {
		arg = fmt.Sprintf("body%d", i)
	}
	in.used[arg] = true
	in.props = append(in.props, inputProp{name: arg, schema: schema, description: desc})
	if required {
		in.required = append(in.required, arg)
	}
	rc.body = arg
}

// bodyEncoding is the body_format encoding of a form or multipart body:
// the document's encoding object per property (style, explode,
// contentType), and for multipart the files: properties of format
// binary (3.0) or with a contentMediaType or contentEncoding (3.1),
// given as base64 arguments (in.files).
func (im *importer) bodyEncoding(schema *openapi3.SchemaRef, media *openapi3.MediaType, multipart bool, in *inputBuilder) map[string]any {
	enc := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(media.Encoding)) {
		e := media.Encoding[name]
		if e == nil {
			continue
		}
		m := map[string]any{}
		if e.Style != "" && slices.Contains([]string{StyleForm, StyleSpaceDelimited, StylePipeDelimited, StyleDeepObject}, e.Style) {
			m["style"] = e.Style
			if e.Explode != nil {
				m["explode"] = *e.Explode
			} else if e.Style == StyleDeepObject {
				m["explode"] = true
			}
		}
		if e.ContentType != "" {
			if ct, _, _ := strings.Cut(e.ContentType, ","); ct != "" {
				if _, _, err := mime.ParseMediaType(strings.TrimSpace(ct)); err == nil {
					m["content_type"] = strings.TrimSpace(ct)
				}
			}
		}
		if len(m) > 0 {
			enc[name] = m
		}
	}
	if !multipart || schema.Value == nil {
		return enc
	}
	for _, name := range slices.Sorted(maps.Keys(schema.Value.Properties)) {
		p := schema.Value.Properties[name]
		if p == nil || p.Value == nil {
			continue
		}
		v := p.Value
		if v.Format != "binary" && v.Format != "byte" && v.ContentMediaType == "" && v.ContentEncoding == "" {
			continue
		}
		m, _ := enc[name].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		m["file"] = true
		if _, ok := m["content_type"]; !ok && v.ContentMediaType != "" {
			m["content_type"] = v.ContentMediaType
		}
		delete(m, "style")
		delete(m, "explode")
		enc[name] = m
		if in.files == nil {
			in.files = map[string]string{}
		}
		in.files[name] = strings.TrimSpace(v.Description + " The file's bytes in base64 (standard encoding).")
	}
	return enc
}

// describeType names a schema's type for a message.
func describeType(s *openapi3.Schema) string {
	if s.Type == nil || len(*s.Type) == 0 {
		return "untyped"
	}
	return strings.Join(*s.Type, " or ")
}

// flattenable tells whether a body's properties can be the tool's own
// arguments: a plain object schema whose property names are valid argument
// names and clash with no parameter.
func (im *importer) flattenable(r *openapi3.SchemaRef, in *inputBuilder) bool {
	s := r.Value
	if s == nil || s.Nullable || len(s.Properties) == 0 || len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) > 0 ||
		s.Not != nil || s.If != nil || len(s.PatternProperties) > 0 || s.Discriminator != nil ||
		s.UnevaluatedProperties.Has != nil || s.UnevaluatedProperties.Schema != nil || len(s.DependentSchemas) > 0 ||
		len(s.DependentRequired) > 0 || s.PropertyNames != nil || s.MinProps > 0 || s.MaxProps != nil {
		return false
	}
	if s.Type != nil && len(*s.Type) > 0 && !(len(*s.Type) == 1 && s.Type.Is("object")) {
		return false
	}
	for k := range s.Properties {
		if in.used[k] || !im.t.ArgName(k) {
			return false
		}
	}
	return true
}

// responseInfo is what an operation's 2xx responses say.
type responseInfo struct {
	// json is the schema shared by every 2xx answer when all are JSON.
	json *openapi3.SchemaRef
	// stream: an answer is text/event-stream and none is JSON; item is
	// the schema of an event's data, when declared (itemSchema).
	stream bool
	item   *openapi3.SchemaRef
}

func (im *importer) responses(c *candidate) responseInfo {
	var ri responseInfo
	if c.op.Responses == nil {
		return ri
	}
	var jsonSchemas []*openapi3.SchemaRef
	anyJSON, anySSE, other := false, false, false
	for code, r := range c.op.Responses.Map() {
		if !(len(code) == 3 && code[0] == '2' && (code[1:] == "XX" || code[1:] == "xx" || code[1] >= '0' && code[1] <= '9' && code[2] >= '0' && code[2] <= '9')) {
			continue
		}
		if r == nil || r.Value == nil || len(r.Value.Content) == 0 {
			other = true // an empty answer ({} for the tool)
			continue
		}
		if _, m := pickJSON(r.Value.Content); m != nil {
			anyJSON = true
			jsonSchemas = append(jsonSchemas, m.Schema)
			continue
		}
		sse := false
		for _, k := range slices.Sorted(maps.Keys(r.Value.Content)) {
			if isSSEMediaType(k) {
				sse = true
				if m := r.Value.Content[k]; m != nil && ri.item == nil {
					ri.item = sseItemSchema(m)
				}
			}
		}
		if sse {
			anySSE = true
		} else {
			other = true
		}
	}
	ri.stream = anySSE && !anyJSON
	if anyJSON && !other && !anySSE {
		first := jsonSchemas[0]
		same := first != nil
		for _, s := range jsonSchemas[1:] {
			same = same && s != nil && s.Value == first.Value
		}
		if same {
			ri.json = first
		}
	}
	return ri
}

// sseItemSchema is the schema of one event's data (what a window item
// is) a text/event-stream media type declares: from its itemSchema
// (OpenAPI 3.2), else from its schema when that describes the events (an
// object, or an array of them) rather than the stream's text.
func sseItemSchema(m *openapi3.MediaType) *openapi3.SchemaRef {
	s := m.ItemSchema
	if s == nil && m.Schema != nil && m.Schema.Value != nil {
		v := m.Schema.Value
		switch {
		case v.Type.Is("array") && v.Items != nil:
			s = v.Items
		case v.Type.Is("object") || len(v.Properties) > 0:
			s = m.Schema
		}
	}
	if s == nil {
		return nil
	}
	return sseDataSchema(s)
}

// sseDataSchema is the schema of an event's data: the data property's
// contentSchema when the schema describes whole events (OpenAPI 3.2),
// else the schema itself.
func sseDataSchema(item *openapi3.SchemaRef) *openapi3.SchemaRef {
	if item.Value != nil {
		if d := item.Value.Properties["data"]; d != nil && d.Value != nil && d.Value.ContentSchema != nil {
			return d.Value.ContentSchema
		}
	}
	return item
}

// itemSchema is a window tool's item schema (Tool.ItemSchema): the schema
// of one event's data, its $defs at its root. The host's fixed window
// output schema describes its items with it.
func (im *importer) itemSchema(ri responseInfo) map[string]any {
	if !im.cfg.outputSchemas || ri.item == nil {
		return nil
	}
	root, _ := convertRoots(false, []*openapi3.SchemaRef{ri.item}, func(cv *schemaConv) map[string]any {
		s, _ := cv.convert(ri.item).(map[string]any)
		return s
	})
	return root
}

// outputSchema is a unary tool's output schema: the JSON answer's schema
// (an object; arrays and scalars wrapped as {"result": ...} as the host
// wraps them).
func (im *importer) outputSchema(c *candidate, ri responseInfo) map[string]any {
	if !im.cfg.outputSchemas {
		return nil
	}
	if ri.json == nil || c.method == http.MethodHead {
		return nil
	}
	switch {
	case isObjectSchema(ri.json, 0):
		root, _ := convertRoots(false, []*openapi3.SchemaRef{ri.json}, func(cv *schemaConv) map[string]any {
			s, ok := cv.convert(ri.json).(map[string]any)
			if !ok {
				return nil
			}
			if _, has := s["type"]; !has {
				s["type"] = "object"
			}
			return s
		})
		return root
	case isNonObjectSchema(ri.json):
		root, _ := convertRoots(false, []*openapi3.SchemaRef{ri.json}, func(cv *schemaConv) map[string]any {
			return map[string]any{"type": "object", "properties": map[string]any{"result": cv.convert(ri.json)},
				"required": []string{"result"}}
		})
		return root
	}
	return nil
}
