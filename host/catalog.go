package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/crankmcp/crank/host/auth"
	yaml "go.yaml.in/yaml/v3"
)

// File is an operations file: the tools a Crank handler serves and the
// third-party adapters they need. It is written in YAML or JSON.
type File struct {
	// Version of the file format; 1 (the default).
	Version int `json:"version,omitempty"`
	// Adapters declares third-party adapter executables by name. Built-in
	// adapters (rest, ...) need no entry.
	Adapters map[string]AdapterDecl `json:"adapters,omitempty"`
	// Operations are the tools.
	Operations []OperationDecl `json:"operations"`
}

// AdapterDecl declares an adapter executable.
type AdapterDecl struct {
	// Command is the executable; a relative path is resolved against the
	// operations file's directory.
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	// Env is extra environment for the process. The process inherits only
	// a few neutral variables of the gateway's environment (PATH, HOME,
	// TMPDIR, proxy and TLS settings), so secrets reach it only through
	// operation config or this map.
	Env map[string]string `json:"env,omitempty"`
}

// OperationDecl is one operation as written in the operations file.
type OperationDecl struct {
	// Name is the MCP tool name: 1–128 characters of [A-Za-z0-9_.-].
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	// Adapter names the adapter that runs the operation, e.g. "rest".
	Adapter string `json:"adapter"`
	// Mode is the execution mode: "unary" (the default), "window",
	// "session" (a start/poll/stop tool family) or "async_job" (a
	// start/status/result/cancel tool family).
	Mode string `json:"mode,omitempty"`
	// TransportBehavior is how a window reads its upstream:
	// "server_stream" (the default for a window) or "request_response"
	// (polling).
	TransportBehavior string `json:"transport_behavior,omitempty"`
	// Preset fills in defaults for a kind of upstream, e.g. "openai_chat".
	Preset string `json:"preset,omitempty"`
	// Limits, Aggregation and Safety configure a window (see Execution);
	// they are checked field by field, naming the operation and field.
	Limits      json.RawMessage `json:"limits,omitempty"`
	Aggregation json.RawMessage `json:"aggregation,omitempty"`
	Safety      json.RawMessage `json:"safety,omitempty"`
	// Timeout bounds one call, e.g. "5s". Default 30s.
	Timeout string `json:"timeout,omitempty"`
	// InputSchema is the JSON Schema (2020-12) of the tool's arguments; it
	// must be an object schema. Default: an object with no constraints.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// OutputSchema, optional, is the JSON Schema of structuredContent.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Annotations are MCP tool hints.
	Annotations *Annotations `json:"annotations,omitempty"`
	// Config is the adapter's own configuration of the operation.
	// Placeholders such as {env.API_TOKEN} are expanded at load.
	Config json.RawMessage `json:"config"`
	// Family renames the tools of a session or async_job family (see
	// FamilyNames); Job configures an async_job (see JobConfig); Scope is
	// who sees a session or job: "agent" (the default: only the agent that
	// started it, within its workspace) or "workspace".
	Family json.RawMessage `json:"family,omitempty"`
	Job    json.RawMessage `json:"job,omitempty"`
	Scope  string          `json:"scope,omitempty"`
	// UpstreamAuth obtains a token for the upstream per caller (token
	// exchange) or for the gateway (client credentials); the config puts
	// it where the upstream wants it with {crank.upstream_token}
	// (upstream_auth.go).
	UpstreamAuth *auth.UpstreamConfig `json:"upstream_auth,omitempty"`
}

// Annotations are the MCP tool annotations an operator can set.
type Annotations struct {
	ReadOnly    *bool `json:"read_only,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	Idempotent  *bool `json:"idempotent,omitempty"`
	OpenWorld   *bool `json:"open_world,omitempty"`
}

// Mode is an execution mode.
type Mode string

// Execution modes. Unary and window operations are published as one tool
// each; session and async_job operations as tool families.
const (
	ModeUnary    Mode = "unary"
	ModeWindow   Mode = "window"
	ModeSession  Mode = "session"
	ModeAsyncJob Mode = "async_job"
)

// DefaultTimeout bounds a call whose operation sets no timeout.
const DefaultTimeout = 30 * time.Second

// Operation is a loaded, validated operation.
type Operation struct {
	Name         string
	Title        string
	Description  string
	Adapter      string
	Mode         Mode
	Timeout      time.Duration
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  *Annotations
	// Config is the adapter config with placeholders expanded. It may hold
	// secrets: it is only ever sent to the adapter.
	Config json.RawMessage
	// Execution is the window config of a mode window operation (and the
	// upstream reader of a session, or of an async_job that collects a
	// window), nil for a unary one.
	Execution *Execution
	// Family is the tool family of a session or async_job operation, and
	// Role the part a published tool plays in it ("" for the operation
	// itself; start, poll, stop, status, result or cancel).
	Family *Family
	Role   string
	// UpstreamAuth is how the upstream's token is obtained, nil for none
	// (upstream_auth.go).
	UpstreamAuth *auth.UpstreamConfig
	// File is the operations file the operation comes from, and Dir its
	// absolute directory; adapters resolve relative paths in Config
	// against Dir.
	File, Dir string

	input         *jsonschema.Resolved
	inputDeclared bool
	pos           positions     // of its file, for errors
	allow         *CatalogAllow // what it may reach, for a catalog's entry (reach.go)
}

// Catalog is a loaded operations file: its entries as written. An entry
// may expand into several tools once its adapter has seen it (see
// Host.Operations).
type Catalog struct {
	// Source is the file the catalog was loaded from.
	Source     string
	Operations []*Operation
	// Adapters holds the third-party adapters declared by the file, with
	// commands resolved to absolute paths.
	Adapters map[string]AdapterDecl
	// Secrets are the values placeholders expanded to, redacted wherever
	// they might surface.
	Secrets []string

	byName map[string]*Operation
	pos    positions // where each field is written, for errors
}

// BaseDir is the absolute directory of the operations file; adapters
// resolve relative paths in operation configs against it.
func (c *Catalog) BaseDir() string {
	dir, err := filepath.Abs(filepath.Dir(c.Source))
	if err != nil {
		return filepath.Dir(c.Source)
	}
	return dir
}

// Lookup returns the operation serving the tool name.
func (c *Catalog) Lookup(name string) (*Operation, bool) {
	op, ok := c.byName[name]
	return op, ok
}

// LoadOptions tune catalog loading.
type LoadOptions struct {
	// Expand replaces placeholders such as {env.API_TOKEN} in a config
	// string and leaves unknown ones, such as a URL's {id}, as they are.
	// Default: ExpandEnv.
	Expand func(string) string
	// Dir, when set, is the directory relative paths in the operations
	// resolve against, instead of the file's own (an operations catalog
	// held in etcd has no file).
	Dir string
	// AllowEmpty accepts a file without operations (an empty catalog).
	AllowEmpty bool
	// Allow, for an operations catalog, is what its entries may reach
	// (reach.go): only the placeholders it allows are expanded, relative
	// paths resolve against its first directory, and the host checks
	// every entry's config against it before an adapter sees it. Nil for
	// an operations file, whose operator may reach anything.
	Allow *CatalogAllow
}

// ConfigError is a problem in an operations file. Its message names the
// file, the operation and the field.
type ConfigError struct {
	File      string
	Line      int // of the field (or the nearest part of it the file has); 0 when unknown
	Operation string
	Field     string
	Reason    string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Operation != "" {
		fmt.Fprintf(&b, ": operation %q", e.Operation)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Reason)
	return b.String()
}

// LoadFile reads and validates an operations file.
func LoadFile(path string, opts LoadOptions) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: path, Reason: fmt.Sprintf("cannot read operations file: %v", err)}
	}
	return Parse(path, data, opts)
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Parse validates an operations file held in memory; name is used in errors
// and to resolve relative adapter commands.
func Parse(name string, data []byte, opts LoadOptions) (*Catalog, error) {
	if opts.Expand == nil {
		opts.Expand = ExpandEnv
	}
	jsonData, pos, err := yamlToJSON(data)
	if err != nil {
		return nil, &ConfigError{File: name, Reason: fmt.Sprintf("not valid YAML or JSON: %v", err)}
	}
	// The file's top level first, then each operation on its own, so that
	// an error names the operation (and a bad one does not hide the rest).
	var top struct {
		Version    int                    `json:"version,omitempty"`
		Adapters   map[string]AdapterDecl `json:"adapters,omitempty"`
		Operations []json.RawMessage      `json:"operations"`
	}
	if err := strictDecode(jsonData, &top); err != nil {
		field, reason := describeDecodeError(err, JSONFields(reflect.TypeOf(File{})))
		return nil, &ConfigError{File: name, Line: pos.find(field), Field: field, Reason: reason}
	}
	if top.Version != 0 && top.Version != 1 {
		return nil, &ConfigError{File: name, Line: pos.line("", "version"), Field: "version", Reason: fmt.Sprintf("unsupported version %d (this build reads version 1)", top.Version)}
	}
	f := File{Version: top.Version, Adapters: top.Adapters, Operations: make([]OperationDecl, len(top.Operations))}
	undecoded := map[int]*ConfigError{}
	for i, raw := range top.Operations {
		if err := strictDecode(raw, &f.Operations[i]); err != nil {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &named)
			label := named.Name
			if label == "" || !toolNameRE.MatchString(label) {
				label = fmt.Sprintf("#%d", i+1)
			}
			field, reason := describeDecodeError(err, JSONFields(reflect.TypeOf(OperationDecl{})))
			undecoded[i] = &ConfigError{File: name, Line: pos.line(label, field), Operation: label, Field: field, Reason: reason}
		}
	}

	cat := &Catalog{Source: name, Adapters: map[string]AdapterDecl{}, byName: map[string]*Operation{}, pos: pos}
	dir := cat.BaseDir()
	if opts.Dir != "" {
		if abs, err := filepath.Abs(opts.Dir); err == nil {
			dir = abs
		}
	}
	var errs []error
	fail := func(op, field, format string, args ...any) {
		errs = append(errs, &ConfigError{File: name, Line: pos.line(op, field), Operation: op, Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if a := opts.Allow; a != nil {
		dir = a.Dir(dir)
		opts.Expand = a.expander(opts.Expand)
		if len(f.Adapters) > 0 {
			fail("", "adapters", "a catalog cannot declare adapters: whoever writes it would run commands on every replica")
			f.Adapters = nil
		}
	}

	for an, ad := range f.Adapters {
		if ad.Command == "" {
			fail("", "adapters."+an+".command", "is required")
			continue
		}
		if !filepath.IsAbs(ad.Command) && strings.ContainsRune(ad.Command, filepath.Separator) {
			ad.Command = filepath.Join(dir, ad.Command)
		}
		cat.Adapters[an] = ad
	}

	secrets := map[string]bool{}
	if len(f.Operations) == 0 && !opts.AllowEmpty {
		fail("", "operations", "at least one operation is required")
	}
	for i, d := range f.Operations {
		if e := undecoded[i]; e != nil {
			errs = append(errs, e)
			continue
		}
		label := d.Name
		if label == "" {
			label = fmt.Sprintf("#%d", i+1)
		}
		if !toolNameRE.MatchString(d.Name) {
			fail(label, "name", "must be 1-128 characters of A-Z a-z 0-9 _ . - (got %q)", d.Name)
			continue
		}
		if cat.byName[d.Name] != nil {
			fail(label, "name", "duplicate operation name")
			continue
		}
		op := &Operation{
			Name: d.Name, Title: d.Title, Description: d.Description, Adapter: d.Adapter,
			Mode: Mode(d.Mode), Annotations: d.Annotations, Timeout: DefaultTimeout, File: name, Dir: dir, pos: pos,
			allow: opts.Allow,
		}
		if op.Adapter == "" {
			fail(label, "adapter", "is required")
		}
		pr, hasPreset := presets[d.Preset]
		switch op.Mode {
		case "":
			op.Mode = ModeUnary
			if hasPreset {
				op.Mode = pr.mode
			}
		case ModeUnary, ModeWindow, ModeSession, ModeAsyncJob:
		default:
			fail(label, "mode", "unknown mode %q (one of unary, window, session, async_job)", d.Mode)
		}
		if d.Timeout != "" {
			t, err := time.ParseDuration(d.Timeout)
			if err != nil || t <= 0 {
				fail(label, "timeout", "must be a positive duration such as 5s (got %q)", d.Timeout)
			} else {
				op.Timeout = t
			}
		}
		op.Execution = parseExecution(execDecl{mode: op.Mode, transport: d.TransportBehavior, preset: d.Preset,
			limits: d.Limits, aggregation: d.Aggregation, safety: d.Safety},
			func(field, format string, args ...any) { fail(label, field, format, args...) })
		if op.Mode == ModeAsyncJob && op.Execution == nil && d.Timeout == "" {
			op.Timeout = DefaultJobRuntime
		}
		op.Family = parseFamily(familyDecl{mode: op.Mode, name: op.Name, names: d.Family, job: d.Job, scope: d.Scope},
			func(field, format string, args ...any) { fail(label, field, format, args...) })
		if ex := op.Execution; ex != nil {
			if d.Timeout == "" {
				op.Timeout = ex.Window() + windowGrace
			} else if op.Timeout < ex.Window() {
				fail(label, "timeout", "must be at least limits.window_duration_ms (%s): it bounds the whole window", ex.Window())
			}
			if len(d.OutputSchema) > 0 {
				fail(label, "output_schema", "the output schema of a %s tool is fixed (items, summary, stats, truncated, window_complete, has_more, cursor): leave it out", op.Mode)
				d.OutputSchema = nil
			}
			if len(d.InputSchema) == 0 && hasPreset && pr.input != "" {
				d.InputSchema = json.RawMessage(pr.input)
			}
		}
		in, resolved, err := compileInputSchema(d.InputSchema)
		if err != nil {
			fail(label, "input_schema", "%v", err)
		}
		op.InputSchema, op.input, op.inputDeclared = in, resolved, len(d.InputSchema) > 0
		if op.Mode == ModeWindow && err == nil {
			if _, err := windowInputSchema(in); err != nil {
				fail(label, "input_schema", "%v", err)
			}
		}
		if len(d.OutputSchema) > 0 {
			if err := checkOutputSchema(d.OutputSchema); err != nil {
				fail(label, "output_schema", "%v", err)
			}
			op.OutputSchema = d.OutputSchema
		}
		if len(d.Config) == 0 || d.Config[0] != '{' {
			fail(label, "config", "is required and must be an object")
		} else {
			if opts.Allow != nil {
				opts.Allow.checkPlaceholders(d.Config, func(field, format string, args ...any) { fail(label, field, format, args...) })
			}
			cfg, err := expandConfig(d.Config, opts.Expand, secrets)
			if err != nil {
				fail(label, "config", "%v", err)
			}
			op.Config = cfg
		}
		parseUpstreamAuth(d.UpstreamAuth, op, opts.Expand, secrets, func(field, format string, args ...any) { fail(label, field, format, args...) })
		cat.Operations = append(cat.Operations, op)
		cat.byName[op.Name] = op
	}
	for s := range secrets {
		cat.Secrets = append(cat.Secrets, s)
	}
	slices.Sort(cat.Secrets)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cat, nil
}

// yamlToJSON reads YAML 1.2 (so keys such as y, n, on or yes stay strings,
// unlike YAML 1.1) or JSON, and returns it as JSON, with where each of its
// fields is written (one parse serves both).
func yamlToJSON(data []byte) ([]byte, positions, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, positions{}, err
	}
	var v any
	if doc.Kind != 0 { // an empty file is null
		if err := doc.Decode(&v); err != nil {
			return nil, positions{}, err
		}
	}
	out, err := json.Marshal(StringKeyed(v))
	return out, positionsOf(&doc), err
}

// StringKeyed turns the maps YAML decodes with non-string keys into
// string-keyed ones, so the value can be encoded as JSON.
func StringKeyed(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = StringKeyed(e)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = StringKeyed(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = StringKeyed(e)
		}
	}
	return v
}

// strictDecode decodes one JSON value, refusing fields dst does not have.
func strictDecode(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// describeDecodeError is the field and reason of a strictDecode error;
// known are the fields of the value decoded, for a misspelling's
// suggestion.
func describeDecodeError(err error, known []string) (field, reason string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field, fmt.Sprintf("expected %s, got %s", jsonTypeName(te.Type), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		f, _ = strconv.Unquote(f)
		if s := closest(f, known); s != "" {
			return f, fmt.Sprintf("unknown field (did you mean %q?)", s)
		}
		return f, "unknown field (known fields: " + strings.Join(known, ", ") + ")"
	}
	return "", msg
}

// jsonTypeName names a Go type as the JSON value it decodes.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return t.String()
}

func checkOutputSchema(raw json.RawMessage) error {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("not a JSON Schema: %v", err)
	}
	if s.Type != "object" {
		return errors.New(`must have "type": "object" (structuredContent is an object)`)
	}
	_, err := s.Resolve(nil)
	return err
}

func compileInputSchema(raw json.RawMessage) (json.RawMessage, *jsonschema.Resolved, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	raw = closeInputSchema(raw) // arguments.go
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return raw, nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	if s.Type != "object" {
		return raw, nil, errors.New(`must have "type": "object" (tool arguments are an object)`)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return raw, nil, err
	}
	return raw, r, nil
}

// expandConfig expands placeholders in every string of a JSON config and
// records as secrets the values that replaced placeholders, except plain
// addresses (an absolute URL of a host alone, host:port), which error
// messages need to name the upstream; see secretsOf. A credential pair
// built from placeholders, an object's username and password or a URL's
// userinfo, is recorded as "username:password" too: adapters send it as
// Basic authorization, which the redactor recognises in base64.
func expandConfig(raw json.RawMessage, expand func(string) string, secrets map[string]bool) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// walk expands v and reports whether a placeholder expanded in it.
	var walk func(any) (any, bool)
	walk = func(v any) (any, bool) {
		switch t := v.(type) {
		case string:
			return expandString(t, expand, secrets)
		case map[string]any:
			exp, user, pass := false, false, false
			for k, e := range t {
				var x bool
				t[k], x = walk(e)
				exp = exp || x
				user = user || k == "username" && x
				pass = pass || k == "password" && x
			}
			u, uok := t["username"].(string)
			p, pok := t["password"].(string)
			if uok && pok && (user || pass) {
				addSecret(secrets, u+":"+p)
			}
			return t, exp
		case []any:
			exp := false
			for i, e := range t {
				var x bool
				t[i], x = walk(e)
				exp = exp || x
			}
			return t, exp
		}
		return v, false
	}
	v, _ = walk(v)
	return json.Marshal(v)
}

// placeholderRE matches a placeholder as Caddy's replacer reads one:
// {env.NAME}, {file./run/secrets/key}, or a brace expression the gateway
// leaves alone ({id} in a URL path).
var placeholderRE = regexp.MustCompile(`\{[A-Za-z_][^{}\s]*\}`)

// expandString expands s, records its secrets and reports whether a
// placeholder expanded in it.
func expandString(s string, expand func(string) string, secrets map[string]bool) (string, bool) {
	if !strings.Contains(s, "{") {
		return s, false
	}
	expanded := false
	for _, ph := range placeholderRE.FindAllString(s, -1) {
		if val := expand(ph); val != ph {
			expanded = true
			for _, sec := range secretsOf(val) {
				addSecret(secrets, sec)
			}
		}
	}
	out := expand(s)
	if expanded {
		// Credentials written around placeholders, as in
		// https://{env.USER}:{env.PASS}@host/.
		if u, err := url.Parse(out); err == nil && u.User != nil {
			for _, sec := range userinfoSecrets(u.User) {
				addSecret(secrets, sec)
			}
		}
	}
	return out, expanded
}

func addSecret(secrets map[string]bool, s string) {
	if len(s) >= MinSecretLength {
		secrets[s] = true
	}
}

// secretsOf returns the secrets a placeholder's value stands for: none for
// a plain address (an absolute URL of a host alone, or host:port); for a
// URL with a path, query or userinfo (a capability URL, a ?key=) the URL,
// its path, long path segments, its query and long query values, its
// credentials, so that an upstream echoing one part does not leak it;
// otherwise the value itself.
func secretsOf(val string) []string {
	u, err := url.Parse(val)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		host, port, ok := strings.Cut(val, ":")
		if ok && host != "" && port != "" && !strings.ContainsAny(val, "/@ ") && strings.Trim(port, "0123456789") == "" {
			return nil // host:port
		}
		return []string{val}
	}
	if u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return nil // the address of a host
	}
	out := []string{val}
	if len(u.Path) >= minURLPathSecret {
		out = append(out, u.EscapedPath(), u.Path)
		for seg := range strings.SplitSeq(u.Path, "/") {
			if len(seg) >= minURLPathSecret {
				out = append(out, seg)
			}
		}
	}
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
		q, _ := url.ParseQuery(u.RawQuery)
		for _, vs := range q {
			for _, v := range vs {
				if len(v) >= minURLValueSecret {
					out = append(out, v)
				}
			}
		}
	}
	if u.User != nil {
		out = append(out, userinfoSecrets(u.User)...)
	}
	return out
}

// The parts of a secret URL that are secrets of their own: a path, or a
// path segment, of at least minURLPathSecret bytes (a capability token),
// a query value of at least minURLValueSecret bytes (a key), so that
// plain words such as "/api", "services" or "json" are not redacted
// everywhere.
const (
	minURLPathSecret  = 16
	minURLValueSecret = 8
)

// userinfoSecrets returns the secrets of a URL's userinfo: as written,
// and "user:password" and the password decoded.
func userinfoSecrets(ui *url.Userinfo) []string {
	out := []string{ui.String()}
	if pw, ok := ui.Password(); ok {
		out = append(out, ui.Username()+":"+pw, pw)
	} else {
		out = append(out, ui.Username())
	}
	return out
}

var envRE = regexp.MustCompile(`\{env\.([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandEnv replaces {env.NAME} placeholders with environment variables (an
// unset variable expands to the empty string, as in Caddy) and leaves every
// other brace expression alone. The Caddy module uses Caddy's replacer
// instead, which knows more placeholders.
func ExpandEnv(s string) string {
	return envRE.ReplaceAllStringFunc(s, func(m string) string {
		return os.Getenv(m[len("{env.") : len(m)-1])
	})
}

// AdapterSpec returns how to run the named adapter: the file's own
// declaration when it has one, otherwise builtin's answer (nil builtin: no
// built-ins).
func (c *Catalog) AdapterSpec(name string, builtin func(name string) (AdapterSpec, bool)) (AdapterSpec, error) {
	if d, ok := c.Adapters[name]; ok {
		spec := AdapterSpec{Name: name, Command: d.Command, Args: d.Args}
		for k, v := range d.Env {
			spec.Env = append(spec.Env, k+"="+v)
		}
		slices.Sort(spec.Env)
		return spec, nil
	}
	if builtin != nil {
		if spec, ok := builtin(name); ok {
			return spec, nil
		}
	}
	return AdapterSpec{}, fmt.Errorf("no adapter named %q: declare it under adapters: in the operations file or use a built-in one", name)
}
