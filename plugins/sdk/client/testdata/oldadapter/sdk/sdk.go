package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
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
}

// HostToolExecution is the host capability, sent with ExpandOperation,
// of reading Tool.Mode, Tool.Execution and Tool.ItemSchema.
const HostToolExecution = "tool_execution"

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

// Mode is an execution mode an adapter's operations can serve.
type Mode = adapterv1.ExecutionMode

// Execution modes.
const (
	ModeUnary    = adapterv1.ExecutionMode_EXECUTION_MODE_UNARY
	ModeWindow   = adapterv1.ExecutionMode_EXECUTION_MODE_WINDOW
	ModeSession  = adapterv1.ExecutionMode_EXECUTION_MODE_SESSION
	ModeAsyncJob = adapterv1.ExecutionMode_EXECUTION_MODE_ASYNC_JOB
)

// Description is what Describe returns.
type Description struct {
	Name      string
	Version   string
	Protocols []string
	Modes     []Mode
	// ConfigSchema is the JSON Schema of an operation's adapter config.
	ConfigSchema json.RawMessage
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
	// tool in its entry's mode and window config.
	ToolExecution bool
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
	RequestID   string
	WorkspaceID string
	AgentID     string
	TraceParent string
	TraceState  string
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
}

// Result is a successful upstream answer.
type Result struct {
	// Structured is the answer as a JSON value.
	Structured json.RawMessage
	// Text is a readable rendering; when empty the host renders Structured.
	Text        string
	ContentType string
}

// Item is one element of an upstream stream.
type Item struct {
	Data   json.RawMessage
	ID     string
	Cursor string
}

// Severity of a Diagnostic.
type Severity = adapterv1.Diagnostic_Severity

// Diagnostic severities.
const (
	SeverityError   = adapterv1.Diagnostic_SEVERITY_ERROR
	SeverityWarning = adapterv1.Diagnostic_SEVERITY_WARNING
)

// Diagnostic is one problem found in an operation's config.
type Diagnostic struct {
	Severity Severity
	// Field is the dotted path inside the adapter config, e.g. "url".
	Field   string
	Message string
}

// Errorf returns an error diagnostic for field.
func Errorf(field, format string, args ...any) Diagnostic {
	return Diagnostic{Severity: SeverityError, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorKind classifies an UpstreamError.
type ErrorKind = adapterv1.UpstreamError_Kind

// Error kinds.
const (
	KindUpstreamStatus  = adapterv1.UpstreamError_KIND_UPSTREAM_STATUS
	KindTransport       = adapterv1.UpstreamError_KIND_TRANSPORT
	KindTimeout         = adapterv1.UpstreamError_KIND_TIMEOUT
	KindCancelled       = adapterv1.UpstreamError_KIND_CANCELLED
	KindInvalidArgument = adapterv1.UpstreamError_KIND_INVALID_ARGUMENT
	KindBadResponse     = adapterv1.UpstreamError_KIND_BAD_RESPONSE
)

// UpstreamError is a failure of the upstream or of reaching it.
type UpstreamError struct {
	Kind ErrorKind
	// Upstream names the upstream, e.g. "GET http://billing/invoices/{id}".
	// Never put credentials here.
	Upstream string
	// Status is the protocol status, e.g. "404" or "UNAVAILABLE".
	Status  string
	Message string
	// Body is a bounded excerpt of the upstream's answer.
	Body      string
	Detail    json.RawMessage
	Retryable bool
}

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
