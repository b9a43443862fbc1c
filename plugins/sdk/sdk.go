package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/pointer"
)

// Adapter is the interface every adapter implements.
type Adapter interface {
	// Describe says who the adapter is and what it can do.
	Describe(ctx context.Context) (*Description, error)
	// Invoke runs one request-response call. Upstream failures are returned
	// as *UpstreamError.
	Invoke(ctx context.Context, req *Request) (*Result, error)
}

// OperationValidator is implemented by adapters that check an operation's
// config at load time. Returned diagnostics name the config field.
type OperationValidator interface {
	ValidateOperation(ctx context.Context, op *Operation) []Diagnostic
}

// OperationExpander is implemented by adapters that derive tools from an
// operations-file entry: many tools from one API description, or one tool
// whose schemas come from the upstream itself. Diagnostics with
// SeverityError fail the load; warnings report skipped parts.
type OperationExpander interface {
	ExpandOperation(ctx context.Context, op *Operation) ([]Tool, []Diagnostic)
}

// Tool is one tool an entry expands to. A single Tool with an empty Name
// (or the entry's name) is the entry itself, and what the operator wrote
// wins over what the adapter derived; otherwise every Tool is its own tool
// under its own Name.
type Tool struct {
	Name        string
	Title       string
	Description string
	// InputSchema is the JSON Schema (2020-12) of the arguments: an object
	// schema.
	InputSchema json.RawMessage
	// OutputSchema, optional, is the JSON Schema of the structured result.
	OutputSchema json.RawMessage
	Annotations  Annotations
	// Config is sent back as Operation.Config when the tool is invoked;
	// nil means the entry's config.
	Config json.RawMessage
	// Mode is the tool's own execution mode, e.g. ModeWindow for an API
	// operation that answers a stream; 0 means the entry's mode.
	// Execution is the tool's own execution config, as an operations-file
	// entry writes it ({transport_behavior, limits, aggregation, safety});
	// nil means the entry's (when Mode is the entry's) or the defaults.
	// ItemSchema is the JSON Schema of one stream item. The host checks
	// them as it checks an entry; hosts that predate them ignore them
	// (Operation.ToolExecution says whether the host reads them).
	Mode       Mode
	Execution  json.RawMessage
	ItemSchema json.RawMessage
	// ResumesStream says that the tool's stream resumes after an item's
	// ID or Cursor (Request.Cursor): a window of it returns a cursor that
	// continues it. Without it a stream window offers no cursor, since
	// one would only start the upstream over.
	ResumesStream bool
	// Meta is the tool's _meta, a JSON object the host publishes as the
	// tool's own: an MCP upstream's, such as MCP Apps' "ui" (resourceUri,
	// visibility). Keys under "io.crank/" are the host's and are dropped;
	// hosts that predate it drop it all.
	Meta json.RawMessage
}

// Annotations are MCP tool hints; nil means "not said".
type Annotations struct {
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// Bool returns a pointer to b, for Annotations.
func Bool(b bool) *bool { return &b }

// Streamer is implemented by adapters that serve upstream streams. Stream
// sends events through send until the upstream ends (return nil), fails
// (return *UpstreamError) or ctx is cancelled (return ctx.Err() or nil).
// It must stop reading the upstream promptly when ctx is done.
type Streamer interface {
	Stream(ctx context.Context, req *Request, send StreamSender) error
}

// StreamSender delivers stream events to the host. Its methods return an
// error once the host has gone away; the adapter should then stop.
type StreamSender interface {
	Item(item Item) error
	Gap(reason string) error
}

// Mode is an execution mode an adapter's operations can serve. The host
// builds sessions and async jobs on unary calls and windows, so an adapter
// is only ever called in ModeUnary or ModeWindow.
type Mode int

// Execution modes.
const (
	// ModeUnary is one request-response call (Adapter.Invoke).
	ModeUnary Mode = 1
	// ModeWindow reads a bounded window of an upstream stream
	// (Streamer.Stream), or of polls of Invoke.
	ModeWindow Mode = 2
	// ModeSession is a stream the host reads in the background between
	// the client's polls.
	ModeSession Mode = 3
	// ModeAsyncJob is a call the host runs in the background as a job.
	ModeAsyncJob Mode = 4
)

var modeNames = []string{ModeUnary: "unary", ModeWindow: "window", ModeSession: "session", ModeAsyncJob: "async_job"}

// String returns the mode as an operations file spells it, e.g. "unary".
func (m Mode) String() string { return enumName(modeNames, int(m), "Mode") }

// Description is what Describe returns.
type Description struct {
	Name      string
	Version   string
	Protocols []string
	Modes     []Mode
	// ConfigSchema is the JSON Schema of an operation's adapter config.
	ConfigSchema json.RawMessage
	// Progress: the adapter reports its calls' progress (ReportProgress),
	// so the host asks for it when a client does (the protocol's
	// InvokeWithProgress).
	Progress bool
	// Log: the adapter relays its upstream's log messages for a call
	// (ReportLog), so the host asks for them when a client has set a
	// logging level. It needs Progress, whose RPC carries them.
	Log bool
	// ClientRequests: the adapter passes its upstream's requests of the
	// call's client on (AskClient, e.g. an MCP upstream's elicitation), so
	// the host tells it the client's capabilities (ClientCapabilities)
	// and answers them. It needs Progress, whose RPC carries them.
	ClientRequests bool
	// Resume: the adapter reports the resume state of an async job's
	// call (ReportResume) and resumes a call from one (Request.Resume),
	// so that another replica can take the job over should the one
	// running it die (resume.go). It needs Progress, whose RPC carries
	// the reports.
	Resume bool
	// Egress: the adapter opens every connection of an operation under
	// its Operation.Egress (see there), so the host lets an operations
	// catalog's entries use it; it serves none of an adapter without.
	Egress bool
}

// Operation is one configured operation.
type Operation struct {
	Name string
	// Config is the adapter-specific config object, placeholders expanded.
	// It may hold secrets: never log it or echo it in results.
	Config  json.RawMessage
	Timeout time.Duration
	Mode    Mode
	// BaseDir is the absolute directory of the operations file: resolve
	// relative file paths in Config against it (see ResolvePath).
	BaseDir string
	// ToolExecution, in ExpandOperation, reports that the host reads a
	// Tool's Mode, Execution and ItemSchema; an older host serves every
	// tool in its entry's mode and window config. The SDK sets it.
	ToolExecution bool
	// Egress are the rules every connection of the operation is held to
	// (a catalog's entry), nil for none (an operations file's entry).
	// Open connections through them — httpadapter.NewClient or
	// httpadapter.Clients with them, or Egress.DialContext and
	// Egress.Control for a dialer of your own — so that the address
	// dialled, after DNS resolution, on every redirect and reconnect, is
	// checked; and say so (Description.Egress).
	Egress *egress.Rules
	// ExcerptMargin is how much longer than its bound an excerpt of
	// upstream text may be (Excerpt does the cutting): the host redacts
	// secrets from it and cuts it then, so that no cut leaves part of a
	// secret behind.
	ExcerptMargin int
}

// ResolvePath returns path made absolute against the operation's BaseDir.
func (op *Operation) ResolvePath(path string) string {
	if path == "" || filepath.IsAbs(path) || op.BaseDir == "" {
		return path
	}
	return filepath.Join(op.BaseDir, path)
}

// RequestContext describes the caller of a request.
type RequestContext struct {
	// RequestID is the host's id of this call, for correlating logs.
	RequestID   string
	WorkspaceID string
	AgentID     string
	// TraceParent and TraceState are the call's W3C trace context.
	TraceParent string
	TraceState  string
	// Deadline is when the host stops waiting for the call; zero when it
	// set none. The call's context carries it too (ctx.Deadline), and
	// that is what to bound upstream calls with.
	Deadline time.Time
	// RecordSpans: the host exports the spans recorded for this call
	// (StartSpan records them when it is set and the trace context is
	// sampled). Adapters need not read it.
	RecordSpans bool
}

// Request is one call of an operation.
type Request struct {
	Context   RequestContext
	Operation Operation
	// Arguments is the JSON object of tool arguments, validated by the host
	// against the operation's input schema.
	Arguments json.RawMessage
	// Cursor is where a stream should resume, empty for a fresh start.
	Cursor string
	// Input, set, is the call sent again with the client's answers to the
	// adapter's Result.InputRequired (ask.go).
	Input *InputResponses
	// Resume, set, is the resume state an earlier call of this operation
	// reported (ReportResume), sent to an adapter whose Description says
	// Resume when the host takes that call's job over from a replica that
	// died: the adapter goes on following the upstream work it names,
	// rather than starting it again (Arguments are the job's, possibly
	// empty), and answers as that call would have (resume.go).
	Resume json.RawMessage
}

// Result is a successful upstream answer.
type Result struct {
	// Structured is the answer as a JSON value.
	Structured json.RawMessage
	// Text is a readable rendering; when empty the host renders Structured.
	Text        string
	ContentType string
	// Content, optional, is the answer as MCP content blocks: a JSON array
	// of blocks of the MCP schema (text, image, audio, resource_link,
	// resource), e.g. an MCP upstream's tool result content, passed on
	// unchanged. When set, the host sends these blocks as the tool
	// result's content in place of a text block of Text; Text should still
	// be the readable rendering (logs, jobs, and hosts that predate the
	// field use it).
	Content json.RawMessage
	// InputRequired, set only when the host takes it (TakesInputRequired),
	// says the call needs its client's input first; the other fields are
	// then empty (ask.go).
	InputRequired *InputRequired
}

// Item is one element of an upstream stream.
type Item struct {
	Data   json.RawMessage
	ID     string
	Cursor string
	// Partial, set, says why the item is incomplete (a GraphQL event's
	// data with errors beside it): it is delivered, and counted as
	// partial, not as a gap, since nothing was missed.
	Partial string
}

// Severity of a Diagnostic.
type Severity int

// Diagnostic severities.
const (
	// SeverityError fails the load of the operation. The zero Severity is
	// an error too.
	SeverityError Severity = 1
	// SeverityWarning is logged; the operation still loads.
	SeverityWarning Severity = 2
)

var severityNames = []string{SeverityError: "error", SeverityWarning: "warning"}

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == 0 {
		return "error"
	}
	return enumName(severityNames, int(s), "Severity")
}

// Diagnostic is one problem found in an operation's config.
type Diagnostic struct {
	// Severity is SeverityError when zero.
	Severity Severity
	// Field is the dotted path inside the adapter config, e.g. "url".
	Field   string
	Message string
	// Pointer is the field as a JSON pointer into the config (RFC 6901,
	// "/headers/X-Api.Key"), for a field whose path has a member name
	// holding a dot, where Field is ambiguous; "" means Field's. The SDK
	// sends both; a host of before reads Field.
	Pointer string
}

// Errorf returns an error diagnostic for field.
func Errorf(field, format string, args ...any) Diagnostic {
	return Diagnostic{Severity: SeverityError, Field: field, Message: fmt.Sprintf(format, args...)}
}

// KeyErrorf returns an error diagnostic for the member key of the object
// at parent (a dotted path: "headers"), a key of the config's own choosing
// that may hold a dot, so placed by a pointer too.
func KeyErrorf(parent, key, format string, args ...any) Diagnostic {
	field := key
	if parent != "" {
		field = parent + "." + key
	}
	return Errorf(field, format, args...).At(pointer.Join(pointer.FromDotted(parent), key))
}

// At is d placed at a JSON pointer into the config (pointer.Join builds
// one), for a field whose dotted path is ambiguous.
func (d Diagnostic) At(ptr string) Diagnostic {
	d.Pointer = ptr
	return d
}

// Where is the diagnostic's field as a JSON pointer into the config.
func (d Diagnostic) Where() string {
	if d.Pointer != "" {
		return d.Pointer
	}
	return pointer.FromDotted(d.Field)
}

// Diagnostics collects the problems found while reading an operation's
// config, in order; the zero value is ready to use. An adapter returns
// List from ValidateOperation and ExpandOperation.
type Diagnostics struct{ list []Diagnostic }

// KeyErrorf adds an error diagnostic for a member key of the object at
// parent (the package function KeyErrorf).
func (d *Diagnostics) KeyErrorf(parent, key, format string, args ...any) {
	d.list = append(d.list, KeyErrorf(parent, key, format, args...))
}

// Errorf adds an error diagnostic for field.
func (d *Diagnostics) Errorf(field, format string, args ...any) {
	d.list = append(d.list, Errorf(field, format, args...))
}

// Warnf adds a warning for field: the operation still loads.
func (d *Diagnostics) Warnf(field, format string, args ...any) {
	d.list = append(d.list, Diagnostic{Severity: SeverityWarning, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Add adds diagnostics found elsewhere.
func (d *Diagnostics) Add(ds ...Diagnostic) { d.list = append(d.list, ds...) }

// UnknownFields adds an error for each member of fields that known does not
// list, in name order, at field prefix+name: with the nearest known name
// as a suggestion, or else the list of known fields. Config objects are
// checked this way rather than with DisallowUnknownFields, so every unknown
// field is reported, not just the first.
func (d *Diagnostics) UnknownFields(fields map[string]json.RawMessage, known []string, prefix string) {
	var unknown []string
	for k := range fields {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		if s := Suggest(k, known); s != "" {
			d.Errorf(prefix+k, "unknown field (did you mean %q?)", s)
		} else {
			d.Errorf(prefix+k, "unknown field (known fields: %s)", strings.Join(known, ", "))
		}
	}
}

// List returns the diagnostics added so far.
func (d *Diagnostics) List() []Diagnostic { return d.list }

// Failed reports whether an error was added.
func (d *Diagnostics) Failed() bool {
	for _, x := range d.list {
		if x.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Summary joins the errors into one message after prefix, each as
// "field: message": for a call made with a config that does not load.
func (d *Diagnostics) Summary(prefix string) string {
	var msgs []string
	for _, x := range d.list {
		if x.Severity != SeverityError {
			continue
		}
		if x.Field == "" {
			msgs = append(msgs, x.Message)
		} else {
			msgs = append(msgs, x.Field+": "+x.Message)
		}
	}
	return prefix + ": " + strings.Join(msgs, "; ")
}

// ErrorKind classifies an UpstreamError.
type ErrorKind int

// Error kinds.
const (
	// KindUpstreamStatus: the upstream answered with an error status (an
	// HTTP non-2xx, a gRPC status, a SOAP fault, GraphQL errors).
	KindUpstreamStatus ErrorKind = 1
	// KindTransport: the upstream could not be reached, or the connection
	// broke.
	KindTransport ErrorKind = 2
	// KindTimeout: the operation's timeout or the call's deadline expired.
	KindTimeout ErrorKind = 3
	// KindCancelled: the host cancelled the call.
	KindCancelled ErrorKind = 4
	// KindInvalidArgument: the arguments (or the config) could not be
	// turned into an upstream request. The host never repeats such a call.
	KindInvalidArgument ErrorKind = 5
	// KindBadResponse: the upstream answered something the adapter cannot
	// read.
	KindBadResponse ErrorKind = 6
)

var kindNames = []string{KindUpstreamStatus: "upstream_status", KindTransport: "transport", KindTimeout: "timeout",
	KindCancelled: "cancelled", KindInvalidArgument: "invalid_argument", KindBadResponse: "bad_response"}

// String returns the kind in lower case, e.g. "upstream_status".
func (k ErrorKind) String() string { return enumName(kindNames, int(k), "ErrorKind") }

// UpstreamError is a failure of the upstream or of reaching it.
type UpstreamError struct {
	Kind ErrorKind
	// Upstream names the upstream by its scheme and host, e.g. "GET
	// http://billing:8080", and may add the path of the call when the
	// upstream answered about it ("GET http://billing:8080/invoices/7").
	// Never put credentials, userinfo or a query here; the host redacts
	// the configured secrets, not values it does not know.
	Upstream string
	// Status is the protocol status, e.g. "404" or "UNAVAILABLE".
	Status  string
	Message string
	// Body is a bounded excerpt of the upstream's answer.
	Body string
	// Detail is structured detail as JSON (e.g. a gRPC status's details).
	Detail json.RawMessage
	// Retryable: repeating the same call may succeed.
	Retryable bool
	// Rejected: the upstream refused this request as such (an HTTP 4xx
	// other than 408 and 429, a SOAP Client or Sender fault, a gRPC
	// INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
	// UNAUTHENTICATED, FAILED_PRECONDITION, OUT_OF_RANGE or UNIMPLEMENTED,
	// a GraphQL request error), so that repeating it cannot succeed. The
	// host then stops at once where it would otherwise try again, such as
	// polling the status of an upstream job. KindInvalidArgument implies
	// it.
	Rejected bool
	// Protocol, set by an adapter whose upstream speaks JSON-RPC (an MCP
	// server), is the upstream's own JSON-RPC error answer to the
	// request: the host answers its MCP client with the same error (code,
	// message, data; redacted) rather than a tool result. Set Kind
	// KindUpstreamStatus, Status the code and Message the message too:
	// hosts that predate the field, and calls that are not an MCP client's
	// tools/call (jobs, windows), serve the failure as a tool result.
	Protocol *ProtocolError
	// Content, optional, is the upstream's own failed result as a JSON
	// array of MCP content blocks (an MCP tool's isError result): the
	// host serves it unchanged as the tool result's content, with Detail
	// as its structured content, in place of a message of its own
	// wording. Message should still be its text (logs, jobs, and hosts
	// that predate the field use it).
	Content json.RawMessage
}

// ProtocolError is a JSON-RPC error object (an UpstreamError's Protocol).
type ProtocolError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON; nil when it has none.
	Data json.RawMessage
}

// Error returns "upstream: status: message", leaving out what is empty.
func (e *UpstreamError) Error() string {
	s := e.Message
	if e.Status != "" {
		s = e.Status + ": " + s
	}
	if e.Upstream != "" {
		s = e.Upstream + ": " + s
	}
	return s
}

// enumName is names[v], or type(v) for a value without a name.
func enumName(names []string, v int, typ string) string {
	if v > 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}
