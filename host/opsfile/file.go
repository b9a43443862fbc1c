package opsfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/pointer"

	"github.com/crankmcp/crank/host/schemacheck"

	yaml "go.yaml.in/yaml/v3"

	"github.com/crankmcp/crank/host/auth"
	"github.com/crankmcp/crank/host/ratelimit"
	"github.com/crankmcp/crank/host/window"
	"github.com/crankmcp/crank/plugins/sdk"
)

// fileDecl is an operations file as written: the tools a Crank handler
// serves and the third-party adapters they need, in YAML or JSON.
type fileDecl struct {
	Version    int                    `json:"version,omitempty" jsonschema:"The file format: 1 (the default)."`
	Adapters   map[string]AdapterDecl `json:"adapters,omitempty" jsonschema:"Third-party adapter executables by name; built-in adapters need no entry. Not in a catalog."`
	Operations []OperationDecl        `json:"operations" jsonschema:"The tools."`
	// RateLimits are checked by ratelimit.Limit.Check (decodeFile).
	RateLimits []ratelimit.Limit `json:"rate_limits,omitempty" jsonschema:"Rate limits on the tools' calls, besides the handler's: all that apply to a call must pass, so a catalog's can only tighten what its handler allows."`
}

// AdapterDecl declares an adapter executable.
type AdapterDecl struct {
	Command string   `json:"command" jsonschema:"The executable; a relative path is resolved against the operations file's directory."`
	Args    []string `json:"args,omitempty" jsonschema:"Its arguments."`
	// Env is extra environment for the process. The process inherits only
	// a few neutral variables of the gateway's environment (PATH, HOME,
	// TMPDIR, proxy and TLS settings), so secrets reach it only through
	// operation config or this map.
	Env map[string]string `json:"env,omitempty" jsonschema:"Extra environment for the process, which inherits only PATH, HOME, TMPDIR and the proxy and TLS settings of the gateway's."`
}

// OperationDecl is one operation as written in an operations file or a
// catalog: the one definition of an entry. Its tags drive the decoding
// (every unknown field, wrong type and value out of bounds reported at
// once, defaults filled in: sdk.Decode), the JSON Schema the admin API
// publishes (OperationSchema, GET /crank/schema/operation), the console's
// operation form and the reference table in docs/reference/operation-entry.md. What one field
// cannot say alone (a field that only applies to some modes, a preset's
// defaults) Parse checks.
type OperationDecl struct {
	Name        string `json:"name" jsonschema:"The MCP tool name: 1-128 characters of A-Z a-z 0-9 _ . -"`
	Title       string `json:"title,omitempty" jsonschema:"A title for people."`
	Description string `json:"description" jsonschema:"What the tool does; clients show it to the model."`
	Adapter     string `json:"adapter" jsonschema:"The adapter that runs it: rest, graphql, grpc, soap, websocket, mcp, or one an operations file declares."`
	Mode        Mode   `json:"mode,omitempty" enum:"unary,window,session,async_job" default:"unary" jsonschema:"How it runs: one call (unary), a bounded window over a stream or polls (window), a start/poll/stop tool family (session) or a start/status/result/cancel family (async_job). With a preset: the preset's."`
	Preset      string `json:"preset,omitempty" enum:"openai_chat" jsonschema:"Defaults for a kind of upstream, which what the entry writes overrides field by field; openai_chat: an OpenAI-compatible chat completions stream as a streaming text window."`
	// Timeout bounds one call (see Parse for a window's and a job's).
	Timeout sdk.Duration `json:"timeout,omitempty" default:"30s" jsonschema:"Bounds one call, e.g. 5s. A window: at least its window_duration_ms, which plus 5s is its default. An async_job of one request: its runtime, by default 1h."`
	ExecutionDecl
	Family       FamilyNames     `json:"family,omitzero" jsonschema:"Names of a session's or async_job's tools; each is {name}_{role} unless set here."`
	Job          JobConfig       `json:"job,omitzero" jsonschema:"An async_job: how long its result stays, and the upstream's own job to follow (status_operation)."`
	Scope        string          `json:"scope,omitempty" enum:"agent,workspace" default:"agent" jsonschema:"Who sees a session or job: the agent that started it (within its workspace), or its whole workspace."`
	InputSchema  json.RawMessage `json:"input_schema,omitempty" jsonschema:"The JSON Schema (2020-12, type object) of the tool's arguments; by default the adapter's, else none."`
	OutputSchema json.RawMessage `json:"output_schema,omitempty" jsonschema:"The JSON Schema of structuredContent (not for a window, whose output is fixed)."`
	// StrictOutputSchema: see Operation.StrictOutput.
	StrictOutputSchema bool                 `json:"strict_output_schema,omitempty" jsonschema:"Publish the output and item schemas the adapter derives (from an imported document, a .proto, a GraphQL or MCP schema) as derived. By default they are lenient where vendors drift from their documents: objects admit members the document does not name, and formats (date-time, byte, …) are said in the description rather than checked by clients."`
	Annotations        *Annotations         `json:"annotations,omitempty" jsonschema:"MCP tool hints."`
	UpstreamAuth       *auth.UpstreamConfig `json:"upstream_auth,omitempty" jsonschema:"A token for the upstream per caller (token_exchange) or for the gateway (client_credentials), which the config puts where the upstream wants it with {crank.upstream_token}."`
	// Config is the adapter's own; placeholders such as {env.API_TOKEN}
	// are expanded at load.
	Config json.RawMessage `json:"config" jsonschema:"The adapter's own configuration of the operation (its schema: GET /crank/adapters); placeholders such as {env.API_TOKEN} are expanded at load."`
}

// Annotations are the MCP tool annotations an operator can set.
type Annotations struct {
	ReadOnly    *bool `json:"read_only,omitempty" jsonschema:"It changes nothing."`
	Destructive *bool `json:"destructive,omitempty" jsonschema:"It may destroy data."`
	Idempotent  *bool `json:"idempotent,omitempty" jsonschema:"Calling it again with the same arguments does nothing more."`
	OpenWorld   *bool `json:"open_world,omitempty" jsonschema:"It reaches a world beyond the gateway's."`
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
	// StrictOutput publishes the output and item schemas the adapter
	// derives as derived, rather than lenient (host: outputschema.go).
	StrictOutput bool
	Annotations  *Annotations
	// Meta is the _meta its adapter derived for the tool (sdk.Tool.Meta:
	// an MCP upstream's own, such as MCP Apps' "ui"), without the
	// gateway's "io.crank/" keys; ToolMeta publishes it.
	Meta map[string]any
	// Config is the adapter config with placeholders expanded. It may hold
	// secrets: it is only ever sent to the adapter.
	Config json.RawMessage
	// Execution is the window config of a mode window operation (and the
	// upstream reader of a session, or of an async_job that collects a
	// window), nil for a unary one.
	Execution *window.Config
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

	input         *schemacheck.Schema
	inputDeclared bool
	pos           positions     // of its file, for problems
	at            string        // the pointer of its entry in its file ("" when it has none)
	allow         *CatalogAllow // what it may reach, for a catalog's entry (reach.go)
}

// Input is the compiled InputSchema, which a call's arguments are
// validated against.
func (op *Operation) Input() *schemacheck.Schema { return op.input }

// InputDeclared reports whether the entry wrote its input_schema (a
// preset's counts): one an adapter derives does not replace it.
func (op *Operation) InputDeclared() bool { return op.inputDeclared }

// SetInputSchema makes raw (an object schema; nil for any object) the
// operation's input schema, closed to undeclared arguments and compiled:
// the schema of a tool the runtime derives from the operation (an
// adapter's, a window's with its cursor, a family tool's).
func (op *Operation) SetInputSchema(raw json.RawMessage) error {
	in, resolved, err := compileInputSchema(raw)
	if err != nil {
		return err
	}
	op.InputSchema, op.input = in, resolved
	return nil
}

// Derived is where a tool an adapter derived from the entry op starts:
// named name, with the entry's adapter, mode, timeout, config, file,
// window config, family and upstream_auth, its problems placed at the
// entry and reaching no further than the entry may.
func (op *Operation) Derived(name string) Operation {
	return Operation{Name: name, Adapter: op.Adapter, Mode: op.Mode, Timeout: op.Timeout, StrictOutput: op.StrictOutput,
		Config: op.Config, File: op.File, Dir: op.Dir, Execution: op.Execution, Family: op.Family,
		UpstreamAuth: op.UpstreamAuth, allow: op.allow, pos: op.pos, at: op.at}
}

// File is a loaded operations file (or several merged, or a catalog's
// document compiled as one): its entries as written. An entry may expand
// into several tools once its adapter has seen it (see host.Host's
// Operations).
type File struct {
	// Source is the file it was loaded from ("catalog <name>" for a
	// catalog's document; the files joined by ", " when merged).
	Source     string
	Operations []*Operation
	// Adapters holds the third-party adapters declared by the file, with
	// commands resolved to absolute paths.
	Adapters map[string]AdapterDecl
	// Secrets are the values placeholders expanded to, redacted wherever
	// they might surface.
	Secrets []string
	// RateLimits are the file's rate limits (checked), the handler's
	// besides.
	RateLimits []ratelimit.Limit

	byName map[string]*Operation
	pos    positions // where each field is written, for problems
}

// BaseDir is the absolute directory of the operations file; adapters
// resolve relative paths in operation configs against it.
func (c *File) BaseDir() string {
	dir, err := filepath.Abs(filepath.Dir(c.Source))
	if err != nil {
		return filepath.Dir(c.Source)
	}
	return dir
}

// Lookup returns the operation serving the tool name.
func (c *File) Lookup(name string) (*Operation, bool) {
	op, ok := c.byName[name]
	return op, ok
}

// LoadOptions tune the loading of an operations file.
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
	// paths resolve against its first directory, and the runtime checks
	// every entry's config against it before an adapter sees it
	// (Operation.CheckReach). Nil for
	// an operations file, whose operator may reach anything.
	Allow *CatalogAllow
}

// LoadFile reads and validates an operations file.
func LoadFile(path string, opts LoadOptions) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Message: fmt.Sprintf("cannot read operations file: %v", err)}}
	}
	return Parse(path, data, opts)
}

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidToolName reports whether name is an MCP tool name: 1-128
// characters of A-Z a-z 0-9 _ . -
func ValidToolName(name string) bool { return toolNameRE.MatchString(name) }

// ErrAdapters explains why a catalog cannot declare adapter executables.
var ErrAdapters = errors.New("a catalog cannot declare adapter executables: whoever can write the catalog would run commands on every replica; declare them in an operations file of the handler, and the catalog's operations may use them")

// decodeFile decodes an operations file (as JSON) and checks its shape:
// unknown fields, wrong types, values outside their tags' bounds, names
// that are not tool names or are given twice, a version this build does
// not read, adapters in a catalog. Every problem is reported at once,
// placed by pointer (no file, no lines); bad lists the entries that had
// one, which the load checks no further.
func decodeFile(data []byte, catalog bool) (f *fileDecl, dec *sdk.Decoded, bad map[int]bool, probs Problems) {
	f = &fileDecl{}
	dec, diags := sdk.Decode(data, f)
	probs, _ = DiagnosticProblems("", diags)
	bad = map[int]bool{}
	for i := range probs {
		if n, _ := EntryOf(probs[i].Pointer); n >= 0 && n < len(f.Operations) {
			bad[n] = true
			probs[i].Operation = entryLabel(&f.Operations[n])
		}
	}
	if f.Version != 0 && f.Version != 1 {
		probs = append(probs, Problem{Pointer: "/version", Message: fmt.Sprintf("unsupported version %d (this build reads version 1)", f.Version)})
	}
	if catalog && dec.Has("/adapters") {
		probs = append(probs, Problem{Pointer: "/adapters", Message: ErrAdapters.Error()})
	}
	probs = append(probs, checkRateLimits(f.RateLimits, probs)...)
	first := map[string]int{}
	for i := range f.Operations {
		d, at := &f.Operations[i], EntryPointer(i)
		if bad[i] {
			continue
		}
		if msg := nameProblem(d.Name); msg != "" {
			probs, bad[i] = append(probs, Problem{Pointer: at + "/name", Operation: d.Name, Message: msg}), true
			continue
		}
		if j, dup := first[d.Name]; dup {
			probs, bad[i] = append(probs, Problem{Pointer: at + "/name", Operation: d.Name, Message: fmt.Sprintf("duplicate operation name (also %s)", EntryPointer(j))}), true
			continue
		}
		first[d.Name] = i
	}
	return f, dec, bad, probs
}

// CheckEntry checks the shape of one entry (JSON) as decodeFile checks
// an entry of a file: the same problems, placed by pointer within the
// entry. The catalog checks a request's entry with it before it compiles
// the catalog, so both paths report an entry alike.
func CheckEntry(raw json.RawMessage) Problems {
	var d OperationDecl
	_, diags := sdk.Decode(raw, &d)
	probs, _ := DiagnosticProblems("", diags)
	if len(probs) == 0 {
		if msg := nameProblem(d.Name); msg != "" {
			probs = Problems{{Pointer: "/name", Message: msg}}
		}
	}
	for i := range probs {
		probs[i].Operation = entryLabel(&d)
	}
	return probs
}

// CheckFile checks the shape of an operations file (JSON) as a catalog's
// document: what decodeFile finds, adapters refused.
func CheckFile(data []byte) Problems {
	_, _, _, probs := decodeFile(data, true)
	return probs
}

// nameProblem is what is wrong with an operation's name, "" when nothing.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "is required: the MCP tool name, 1-128 characters of A-Z a-z 0-9 _ . -"
	case !toolNameRE.MatchString(name):
		return fmt.Sprintf("must be 1-128 characters of A-Z a-z 0-9 _ . - (got %q)", name)
	}
	return ""
}

// entryLabel is the operation a problem of the entry names: its name as
// written.
func entryLabel(d *OperationDecl) string { return d.Name }

// Parse validates an operations file held in memory; name is used in errors
// and to resolve relative adapter commands.
func Parse(name string, data []byte, opts LoadOptions) (*File, error) {
	if opts.Expand == nil {
		opts.Expand = ExpandEnv
	}
	jsonData, pos, err := yamlToJSON(data)
	if err != nil {
		return nil, Problems{{File: name, Message: fmt.Sprintf("not valid YAML or JSON: %v", err)}}
	}
	f, dec, bad, errs := decodeFile(jsonData, opts.Allow != nil)
	for i := range errs {
		errs[i].File, errs[i].Line = name, pos.line(errs[i].Pointer)
	}
	cat := &File{Source: name, Adapters: map[string]AdapterDecl{}, byName: map[string]*Operation{}, pos: pos}
	dir := cat.BaseDir()
	if opts.Dir != "" {
		if abs, err := filepath.Abs(opts.Dir); err == nil {
			dir = abs
		}
	}
	if a := opts.Allow; a != nil {
		dir = a.Dir(dir)
		opts.Expand = a.expander(opts.Expand)
		f.Adapters = nil
	}

	for _, an := range slices.Sorted(maps.Keys(f.Adapters)) {
		ad := f.Adapters[an]
		if ad.Command == "" {
			ptr := "/adapters/" + pointer.Key(an) + "/command"
			errs = append(errs, Problem{File: name, Line: pos.line(ptr), Pointer: ptr, Message: "is required"})
			continue
		}
		if !filepath.IsAbs(ad.Command) && strings.ContainsRune(ad.Command, filepath.Separator) {
			ad.Command = filepath.Join(dir, ad.Command)
		}
		cat.Adapters[an] = ad
	}

	secrets := map[string]bool{}
	if len(f.Operations) == 0 && !opts.AllowEmpty {
		errs = append(errs, Problem{File: name, Line: pos.line("/operations"), Pointer: "/operations", Message: "at least one operation is required"})
	}
	for i := range f.Operations {
		if bad[i] {
			continue
		}
		d := &f.Operations[i]
		op := &Operation{
			Name: d.Name, Title: d.Title, Description: d.Description, Adapter: d.Adapter,
			Mode: d.Mode, Annotations: d.Annotations, Timeout: time.Duration(d.Timeout), File: name, Dir: dir, pos: pos,
			StrictOutput: d.StrictOutputSchema,
			at:           EntryPointer(i), allow: opts.Allow,
		}
		has := func(ptr string) bool { return dec.Has(op.at + ptr) }
		fail := func(ptr, format string, args ...any) {
			errs = append(errs, op.Problem(ptr, fmt.Sprintf(format, args...)))
		}
		if op.Adapter == "" {
			fail("/adapter", "is required")
		}
		pr, hasPreset := presets[d.Preset]
		if hasPreset && !has("/mode") {
			op.Mode = pr.mode
		}
		op.Execution = parseExecution(execDecl{ExecutionDecl: d.ExecutionDecl, mode: op.Mode, preset: d.Preset, has: has}, fail)
		timeoutSet := has("/timeout")
		if op.Mode == ModeAsyncJob && op.Execution == nil && !timeoutSet {
			op.Timeout = DefaultJobRuntime
		}
		op.Family = parseFamily(familyDecl{mode: op.Mode, name: op.Name, names: d.Family, job: d.Job, scope: d.Scope, has: has}, fail)
		if ex := op.Execution; ex != nil {
			if !timeoutSet {
				op.Timeout = ex.Limits.Window() + WindowGrace
			} else if op.Timeout < ex.Limits.Window() {
				fail("/timeout", "must be at least limits.window_duration_ms (%s): it bounds the whole window", ex.Limits.Window())
			}
			if len(d.OutputSchema) > 0 {
				fail("/output_schema", "the output schema of a %s tool is fixed (items, summary, stats, truncated, window_complete, has_more, cursor): leave it out", op.Mode)
				d.OutputSchema = nil
			}
			if len(d.InputSchema) == 0 && hasPreset && pr.input != "" {
				d.InputSchema = json.RawMessage(pr.input)
			}
		}
		in, resolved, err := compileInputSchema(d.InputSchema)
		if err != nil {
			fail("/input_schema", "%v", err)
		}
		op.InputSchema, op.input, op.inputDeclared = in, resolved, len(d.InputSchema) > 0
		if op.Mode == ModeWindow && err == nil {
			if _, err := window.InputSchema(in, false); err != nil {
				fail("/input_schema", "%v", err)
			}
		}
		if len(d.OutputSchema) > 0 {
			if err := CheckOutputSchema(d.OutputSchema); err != nil {
				fail("/output_schema", "%v", err)
			}
			op.OutputSchema = d.OutputSchema
		}
		if len(d.Config) == 0 || d.Config[0] != '{' {
			fail("/config", "is required and must be an object")
		} else {
			if opts.Allow != nil {
				opts.Allow.checkPlaceholders(d.Config, fail)
			}
			cfg, err := expandConfig(d.Config, opts.Expand, secrets)
			if err != nil {
				fail("/config", "%v", err)
			}
			op.Config = cfg
		}
		parseUpstreamAuth(d.UpstreamAuth, op, opts.Expand, secrets, fail)
		cat.Operations = append(cat.Operations, op)
		cat.byName[op.Name] = op
	}
	cat.Secrets = slices.Sorted(maps.Keys(secrets))
	cat.RateLimits = f.RateLimits
	if opts.Allow != nil {
		for i := range cat.RateLimits {
			cat.RateLimits[i].Namespace = name // a catalog's: its own budgets
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cat, nil
}

// YAMLToJSON reads YAML 1.2 or JSON as yamlToJSON does, returning it as
// JSON: the one conversion of Crank's YAML texts.
func YAMLToJSON(data []byte) ([]byte, error) {
	out, _, err := yamlToJSON(data)
	return out, err
}

// checkRateLimits reports the problems of a file's rate limits that its
// decoding (decoded, its problems) did not: Limit.Check's, and a name
// given twice; placed by pointer.
func checkRateLimits(ls []ratelimit.Limit, decoded Problems) Problems {
	var probs Problems
	first := map[string]int{}
	for i := range ls {
		at := fmt.Sprintf("/rate_limits/%d", i)
		if slices.ContainsFunc(decoded, func(p Problem) bool { return p.Pointer == at || strings.HasPrefix(p.Pointer, at+"/") }) {
			continue
		}
		for _, p := range ls[i].Check() {
			probs = append(probs, Problem{Pointer: at + pointer.FromDotted(p.Field), Message: p.Message})
		}
		if j, dup := first[ls[i].Name]; dup {
			probs = append(probs, Problem{Pointer: at + "/name", Message: fmt.Sprintf("duplicate rate limit name (also /rate_limits/%d)", j)})
		}
		first[ls[i].Name] = i
	}
	return probs
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
	out, err := json.Marshal(stringKeyed(v))
	return out, positionsOf(&doc), err
}

// stringKeyed turns the maps YAML decodes with non-string keys into
// string-keyed ones, so the value can be encoded as JSON.
func stringKeyed(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = stringKeyed(e)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = stringKeyed(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = stringKeyed(e)
		}
	}
	return v
}
