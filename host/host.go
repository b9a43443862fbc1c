package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/host/redact"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
	"github.com/crankmcp/crank/store"
)

// Store is what a Host keeps in the shared store: the stream sessions and
// jobs of its session and async_job operations (their quotas are checked
// as they are created), the stop and cancel requests their runners
// follow, and the key its cursors are sealed with (cursor.go).
type Store interface {
	StreamSessionStore
	JobStore
	SignalStore
	KeyStore
}

var _ Store = (*store.Etcd)(nil)

// Options configure a Host.
type Options struct {
	// File is the operations the host serves: an operations file (or
	// several, merged), or a catalog's document compiled as one.
	File *opsfile.File
	// Store holds the stream sessions and jobs of session and async_job
	// operations; a file with such operations needs one.
	Store Store
	// Quotas bound the open sessions and jobs per workspace and agent.
	Quotas Quotas
	// Audit receives the audit records of session and job tools (start,
	// poll, stop, status, result, cancel); default: Logger named "audit".
	Audit *zap.Logger
	// Adapter returns the supervisor of the named adapter. The caller owns
	// supervisors (they outlive a Host across config reloads).
	Adapter func(name string) (*Supervisor, error)
	Logger  *zap.Logger
	// Endpoint names the endpoint the host serves, for its stream session
	// readers and job runners: they end when a reload removes it (see
	// HoldEndpoint). Empty: they end only with the process.
	Endpoint string
	// OnLoadError is what the load does with an entry that cannot load
	// (load.go): LoadFail (the default) fails it, LoadRetry serves the
	// other entries and loads the entry again while the host is watched.
	OnLoadError LoadPolicy

	check bool // Check
}

// Host serves the tool calls of one loaded operations file.
type Host struct {
	file   *opsfile.File
	log    *zap.Logger
	redact *redact.Redactor
	// excerptMargin is sdk.Operation.ExcerptMargin of every operation:
	// the longest form of a secret redact redacts.
	excerptMargin int
	// tab is the tools served, replaced whole when an entry is expanded
	// again (reexpand.go).
	tab atomic.Pointer[toolTable]
	// entries are the operations-file entries with the tools each
	// stands for (reexpand.go).
	entries map[string]*entryTools
	// reexpand serialises re-expansions; watch is the adapters' watch.
	reexpand sync.Mutex
	watch    watchState

	// failed are the entries that could not load (load.go).
	failed failures
	// check: the host only checks the file (Check).
	check bool

	store    Store
	quotas   Quotas
	runners  *runnerSet // the process's (runners); a test's own
	endpoint string     // Options.Endpoint
	audit    *zap.Logger

	upstreams upstreamSources // upstream_auth.go
	// grants are the authorization_code upstreams by name
	// (upstream_grant.go).
	grants map[string]*userGrant
	// warnings are the adapters' warning diagnostics found at load.
	warnings opsfile.Problems
	// access receives one record per tool call (telemetry.go).
	access *zap.Logger
	// outputs are the tools' output schemas, compiled for the check of
	// every result (outputschema.go).
	outputs outputChecks
}

type boundOp struct {
	*opsfile.Operation
	sup *Supervisor
	// call is the operation as its adapter sees it.
	call sdk.Operation
	// base is the session or async_job operation a family tool belongs
	// to (nil for other tools).
	base *boundOp
	// upstreams are the addresses its config reaches (Tool.Upstreams),
	// read once.
	upstreams func() []string
	// builtin serves a tool of the host's own, without an adapter (the
	// grants tool, upstream_grant.go).
	builtin func(ctx context.Context, req CallRequest, args json.RawMessage) *Result
}

// New binds every operation of the file to its adapter: it starts the
// adapters, lets each validate its operations' configs and expand entries
// into the tools they stand for. Every problem found is reported, as
// Problems; an entry that cannot load (load.go) fails the load too, unless
// opts.OnLoadError is LoadRetry.
func New(ctx context.Context, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Audit == nil {
		opts.Audit = opts.Logger.Named("audit")
	}
	h := &Host{file: opts.File, log: opts.Logger, redact: redact.New(opts.File.Secrets), entries: map[string]*entryTools{},
		store: opts.Store, check: opts.check, quotas: opts.Quotas, audit: opts.Audit, runners: runners, endpoint: opts.Endpoint,
		access: opts.Logger.Named("access")}
	h.excerptMargin = redact.Chain{h.redact}.Longest()
	var errs opsfile.Problems
	tab := &toolTable{ops: map[string]*boundOp{}, families: map[string]*boundOp{}}
	var families []*boundOp
	for _, op := range h.file.Operations {
		res := h.loadEntry(ctx, op, opts.Adapter)
		errs = append(errs, res.config...)
		switch {
		case len(res.config) > 0:
			continue
		case len(res.load) > 0 && opts.loadPolicy() == LoadFail:
			errs = append(errs, res.load...)
			continue
		case len(res.load) > 0:
			h.failEntry(res) // load.go
			continue
		}
		errs = append(errs, tab.add(h, res)...)
		families = append(families, res.families...)
		h.entries[op.Name] = res.et
	}
	var all []*boundOp
	for _, op := range tab.list {
		all = append(all, tab.ops[op.Name])
	}
	uniqueTitles(all, nil)
	for i, x := range all {
		tab.list[i] = x.Operation
	}
	fail := func(op *opsfile.Operation, ptr, reason string) { errs = append(errs, h.problem(op, ptr, reason)) }
	h.bindUserGrants(fail) // upstream_grant.go
	h.addGrantsTool(tab, fail)
	h.tab.Store(tab)
	if len(families) > 0 {
		errs = append(errs, h.checkFamilies(tab, families)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return h, nil
}

// uniqueTitles makes the titles of the tools in added unique among
// themselves and the tools in kept (which keep theirs): a title two
// tools share says which each is, "Get order (order_GetOrder)". Titles
// are for people choosing among an endpoint's tools; two alike say
// nothing. A tool retitled gets an operation of its own (a copy: the
// file's entry stays as written); added is changed in place.
func uniqueTitles(added []*boundOp, kept []*opsfile.Operation) {
	n := map[string]int{}
	for _, op := range kept {
		if op.Title != "" {
			n[op.Title]++
		}
	}
	for _, x := range added {
		if x.Title != "" {
			n[x.Title]++
		}
	}
	for _, x := range added {
		if x.Title != "" && n[x.Title] > 1 {
			cp := *x.Operation
			cp.Title += " (" + cp.Name + ")"
			x.Operation = &cp
		}
	}
}

// sameName says where the two operations that publish one tool name
// come from, when that is not plain: different files or catalogs, or
// different entries an adapter expanded.
func sameName(first, second *opsfile.Operation) string {
	if first.File != second.File && first.File != "" {
		return fmt.Sprintf(" (also from %s)", first.File)
	}
	return ""
}

// Warnings returns the warnings the adapters reported about the
// operations as they loaded them (skipped parts of an OpenAPI document,
// and so on), redacted.
func (h *Host) Warnings() opsfile.Problems {
	h.failed.mu.Lock() // a retried entry's load adds to them (load.go)
	defer h.failed.mu.Unlock()
	return slices.Clone(h.warnings)
}

// report logs an adapter's warning diagnostics of op's config, fails on
// its errors and says whether there were any errors.
func (h *Host) report(op *opsfile.Operation, diags []sdk.Diagnostic, fail func(op *opsfile.Operation, ptr, reason string)) bool {
	errs, warns := opsfile.DiagnosticProblems("/config", diags)
	for _, w := range warns {
		p := op.Problem(w.Pointer, h.redact.String(w.Message))
		h.failed.mu.Lock()
		h.warnings = append(h.warnings, p)
		h.failed.mu.Unlock()
		h.log.Warn("operation config", zap.String("file", p.File), zap.String("operation", op.Name),
			zap.String("field", w.Pointer), zap.String("warning", p.Message))
	}
	for _, e := range errs {
		fail(op, e.Pointer, e.Message)
	}
	return len(errs) > 0
}

func (h *Host) bind(op *opsfile.Operation, sup *Supervisor) *boundOp {
	timeout := op.Timeout
	if op.Execution != nil {
		// A window's adapter bounds each upstream request (a poll, or a
		// stream until the upstream answers); the window bounds the rest.
		timeout = op.Execution.Limits.UpstreamTimeout()
	}
	b := &boundOp{Operation: op, sup: sup, call: sdk.Operation{
		Name: op.Name, Config: op.Config, Timeout: timeout, Mode: adapterMode(op), BaseDir: op.Dir,
		ToolExecution: true, // the host reads a derived tool's mode, execution and item schema
		// What the adapter connects to is held to the catalog's rules
		// (none for an operations file's entry) where it is dialled, and
		// its excerpts run long enough for the host to redact them before
		// it cuts them (describeUpstreamError).
		Egress: op.Egress(), ExcerptMargin: h.excerptMargin,
	}}
	b.upstreams = readUpstreams(b)
	return b
}

// expand turns the tools an adapter derived from an entry into operations.
// A single tool named like the entry (or unnamed) is the entry itself, and
// what the operator wrote wins; otherwise each tool is its own operation.
func (h *Host) expand(entry *opsfile.Operation, sup *Supervisor, tools []sdk.Tool, publishes bool) ([]*boundOp, error) {
	if len(tools) == 0 {
		if publishes {
			return nil, nil // resources or prompts only
		}
		return nil, errors.New("the adapter found no tools to serve in it")
	}
	self := len(tools) == 1 && (tools[0].Name == "" || tools[0].Name == entry.Name)
	var out []*boundOp
	for i := range tools {
		t := &tools[i]
		op := *entry
		if !self {
			if !opsfile.ValidToolName(t.Name) {
				return nil, fmt.Errorf("the adapter derived an invalid tool name %q", t.Name)
			}
			op = entry.Derived(t.Name)
		}
		if err := entry.DerivedReach(t.Config, sup.Description().ConfigSchema); err != nil {
			return nil, fmt.Errorf("tool %q: %w", op.Name, err)
		}
		label := op.Name
		if err := toolExecution(entry, &op, t, self, sup); err != nil {
			return nil, err
		}
		if op.Title == "" {
			op.Title = t.Title
		}
		if op.Description == "" {
			op.Description = t.Description
		}
		if len(t.Config) > 0 {
			op.Config = t.Config
		}
		if !op.InputDeclared() && len(t.InputSchema) > 0 {
			if err := op.SetInputSchema(t.InputSchema); err != nil {
				return nil, fmt.Errorf("tool %q: derived input schema: %v", label, err)
			}
		}
		if len(op.OutputSchema) == 0 && len(t.OutputSchema) > 0 && op.Execution == nil {
			if err := opsfile.CheckOutputSchema(t.OutputSchema); err != nil {
				return nil, fmt.Errorf("tool %q: derived output schema: %v", label, err)
			}
			op.OutputSchema = lenientSchema(t.OutputSchema, op.StrictOutput) // outputschema.go
		}
		meta, err := toolMeta(t.Meta)
		if err != nil {
			return nil, fmt.Errorf("tool %q: derived _meta: %v", label, err)
		}
		op.Meta = meta
		if op.Annotations == nil {
			a := t.Annotations
			op.Annotations = &opsfile.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
		}
		out = append(out, h.bind(&op, sup))
	}
	return out, nil
}

// expandEntry asks the adapter to expand an entry, with what it
// publishes besides its tools when it publishes anything.
func expandEntry(ctx context.Context, c *client.Client, op *sdk.Operation, publishes bool) ([]sdk.Tool, *sdk.Published, []sdk.Diagnostic, error) {
	if publishes {
		return c.ExpandPublished(ctx, op)
	}
	tools, diags, err := c.Expand(ctx, op)
	return tools, nil, diags, err
}

// adapterMode is the mode an adapter serves an operation in. Sessions and
// async jobs are the host's own: it builds them on the adapter's unary
// calls and windows (streams and polls), so adapters see only those two.
func adapterMode(op *opsfile.Operation) sdk.Mode {
	if op.Execution != nil {
		return sdk.ModeWindow
	}
	return sdk.ModeUnary
}

// ModesOf are the modes an operation of an adapter serving the adapter
// modes can take: the adapter's own (unary calls, windows) and those the
// host builds on them — an async_job on either, a session on a window.
func ModesOf(adapter []sdk.Mode) []opsfile.Mode {
	var unary, window bool
	for _, m := range adapter {
		unary = unary || m == sdk.ModeUnary
		window = window || m == sdk.ModeWindow
	}
	var out []opsfile.Mode
	if unary {
		out = append(out, opsfile.ModeUnary)
	}
	if window {
		out = append(out, opsfile.ModeWindow, opsfile.ModeSession)
	}
	if unary || window {
		out = append(out, opsfile.ModeAsyncJob)
	}
	return out
}

// sdkMode is a mode as adapters list it.
func sdkMode(m opsfile.Mode) sdk.Mode {
	switch m {
	case opsfile.ModeWindow:
		return sdk.ModeWindow
	case opsfile.ModeSession:
		return sdk.ModeSession
	case opsfile.ModeAsyncJob:
		return sdk.ModeAsyncJob
	}
	return sdk.ModeUnary
}

// File returns the operations the host serves, as written.
func (h *Host) File() *opsfile.File { return h.file }

// Operations returns the tools the host serves, in file order, with
// entries expanded by their adapters.
func (h *Host) Operations() []*opsfile.Operation { return h.tab.Load().list }

// Redactor returns the host's secret redactor, for logs written by callers.
func (h *Host) Redactor() *redact.Redactor { return h.redact }

// CallRequest is one tool call.
type CallRequest struct {
	// Tool is the tool called, resolved by Host.Tool.
	Tool Tool
	// Arguments is the JSON object of arguments; empty means {}.
	Arguments   json.RawMessage
	RequestID   string
	WorkspaceID string
	AgentID     string
	// ClientID is the client that sends the call (its user, else its agent
	// header, else its address: ratelimit.ClientOf), whose per-client
	// quotas count the sessions and jobs it starts; "" for none.
	ClientID    string
	TraceParent string
	TraceState  string
	// SubjectToken is the caller's verified access token ("" for none),
	// for operations whose upstream credentials are exchanged from it
	// (upstream_auth token_exchange, RFC 8693). It is a credential: the
	// host never logs it, stores it or sends it to an adapter.
	SubjectToken string
	// User is the caller's OAuth subject: the user of the verified access
	// token of the endpoint's auth ("" for none), whose own grants the
	// calls of authorization_code upstreams use (upstream_grant.go).
	// Session is the digest of the call's MCP session ("" for none), which
	// a consent's state is bound to. ConsentRedirect is the redirect URI
	// of a consent whose config names none: the endpoint's callback.
	// ElicitationComplete, when set, tells the client that a URL-mode
	// elicitation it was sent is complete.
	User                string
	Session             string
	ConsentRedirect     string
	ElicitationComplete func(ctx context.Context, elicitationID string)
	// MaxTimeout, when positive, bounds the call's timeout: a unary call
	// times out after the operation's timeout or MaxTimeout, whichever is
	// shorter, and a window collects for at most MaxTimeout. The MCP
	// endpoint sets it from a caller's X-Mesh-Timeout.
	MaxTimeout time.Duration
	// upstream is the token obtained for the operation's upstream_auth
	// (upstream_auth.go), set by Call.
	upstream *upstreamCredential
	// Progress, when set, receives the chunks of a window operation while
	// it collects, or the progress an adapter reports during a unary call
	// (in order, from the calling goroutine, never after Call returns).
	// The MCP endpoint sets it when the client asked for progress.
	Progress func(ctx context.Context, chunk ProgressChunk)
	// Log, when set with LogLevel (an MCP logging level), receives the
	// log messages an upstream sends for a unary call at LogLevel and
	// above (adapters that relay them, such as the mcp adapter), redacted,
	// like Progress. The MCP endpoint sets it when the client has set a
	// logging level.
	Log      func(ctx context.Context, msg LogMessage)
	LogLevel string
	// Ask, when set with ClientCapabilities (the client's MCP
	// ClientCapabilities object as JSON), sends the requests an upstream
	// makes of the client during a unary call (adapters that relay them,
	// such as the mcp adapter: sampling/createMessage, elicitation/create,
	// roots/list; their params redacted) and returns the client's result
	// as JSON or its *ClientError, from the calling goroutine like
	// Progress. The MCP endpoint sets it for a client on an MCP session.
	Ask                func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	ClientCapabilities json.RawMessage
	// InputRequired, with ClientCapabilities and without Ask: the client
	// (2026-07-28) takes an input-required result (Result.InputRequests)
	// for what the upstream would ask it, and Input is its retry
	// (input.go).
	InputRequired bool
	Input         *InputAnswer
	// input is the adapter's side of Input, its state opened (input.go).
	input *sdk.InputResponses
	// onResume, set by an async job's runner, receives the resume states
	// an adapter that resumes calls (Capabilities.Resume) reports during
	// the call, redacted; resume is the state an adopted job's call
	// resumes from (adopt.go).
	onResume func(state json.RawMessage)
	resume   json.RawMessage
	// background: an async job runs the call, after the request that
	// started it ended (job.go).
	background bool
}

// ClientError is a JSON-RPC error a client answered a request with
// (CallRequest.Ask).
type ClientError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

func (e *ClientError) Error() string { return fmt.Sprintf("client error %d: %s", e.Code, e.Message) }

// Result is the outcome of a tool call, in MCP terms.
type Result struct {
	// Structured is the JSON object for structuredContent; nil when the
	// answer has no structured form.
	Structured json.RawMessage
	// Text is the text content block.
	Text    string
	IsError bool
	// Content, when set, is the result's MCP content blocks as a JSON
	// array (sdk.Result.Content, redacted): served in place of the text
	// block.
	Content json.RawMessage

	// Protocol, when set, is the upstream's own JSON-RPC error answer to
	// the call (an MCP upstream's; sdk.UpstreamError.Protocol), redacted:
	// the MCP endpoint answers a tools/call with it. Text and IsError
	// describe the same failure as a tool result, for everything else
	// (jobs, tasks, logs).
	Protocol *sdk.ProtocolError
	// Upstream, on a failed result that is the upstream's own
	// (sdk.UpstreamError.Content, served unchanged), names the upstream
	// that answered it, for the endpoint to say in _meta.
	Upstream string
	// InputRequests, set, say that the call needs the client's input
	// first (CallRequest.InputRequired): the MCP inputRequests object,
	// redacted, with RequestState, the sealed state the client's retry
	// sends back (input.go). The other fields are then empty.
	InputRequests json.RawMessage
	RequestState  string

	// permanent: the upstream refused the request itself (the adapter
	// said so, sdk.UpstreamError.Rejected); repeating it cannot succeed.
	permanent bool
	// class is the outcome class of an error (telemetry.go); limit names
	// the quota that refused the call (the access record's limit).
	class, limit string
}

// limitName is the quota that refused the call, "" for none.
func (r *Result) limitName() string {
	if r == nil {
		return ""
	}
	return r.limit
}

// ErrUnknownTool is returned for a tool the host does not serve.
var ErrUnknownTool = errors.New("unknown tool")

// Call runs one tool call. Tool-level failures (bad arguments, upstream
// errors, adapter crashes, timeouts) come back as a Result with IsError
// set; the error return is kept for protocol-level failures (a tool the
// host does not serve).
func (h *Host) Call(ctx context.Context, req CallRequest) (res *Result, _ error) {
	op := req.Tool.b
	if op == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownTool, req.Tool.name)
	}
	ctx, obs := h.observeCall(ctx, op, &req) // telemetry.go
	defer func() {
		res = h.checkOutput(op, res) // outputschema.go
		obs.end(res)
	}()
	args := normalizeArguments(req.Arguments)
	validated := validationSpan(ctx)
	if msg := validateArguments(op.Operation, args); msg != "" {
		validated(true)
		return classed(errorResult(fmt.Sprintf("invalid arguments for tool %q: %s", op.Name, msg)), OutcomeInvalidArguments), nil
	}
	validated(false)
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if op.builtin != nil {
		return op.builtin(ctx, req, args), nil
	}
	if res := h.obtainUpstreamToken(ctx, op, &req); res != nil { // upstream_auth.go
		return res, nil
	}
	if res, err := h.openInput(ctx, op, &req, args); res != nil { // input.go
		return res, err
	}
	switch {
	case op.Role != "":
		return req.upstream.redact(h.callFamily(ctx, op, req, args)), nil
	case op.Execution != nil:
		return req.upstream.redact(h.callWindow(ctx, op, req, args)), nil
	}
	return h.invoke(ctx, op, req, args), nil
}

// invoke makes one unary adapter call, bounded by the operation timeout.
func (h *Host) invoke(ctx context.Context, op *boundOp, req CallRequest, args json.RawMessage) *Result {
	outer := ctx // a consent after a refused token takes the user's time, not the operation's
	ctx, cancel := context.WithTimeout(ctx, req.bounded(op.Timeout)+time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()

	c, err := op.sup.Client(ctx)
	if err != nil {
		return classed(errorResult(h.redact.String(fmt.Sprintf("adapter %q is not available: %v", op.Adapter, err))), OutcomeAdapterUnavailable)
	}
	ar := adapterRequest(op, req, args, deadline)
	ar.Input = req.input                             // input.go
	ar.Resume = req.resume                           // adopt.go
	res, err := h.invokeAdapter(ctx, c, op, req, ar) // progress.go
	var ue *sdk.UpstreamError
	switch {
	case errors.As(err, &ue) && req.upstream.refusedBy(ue): // the user's token, refused (upstream_grant.go)
		if res := h.renewRefused(outer, op, &req); res != nil {
			return res
		}
		return h.invoke(outer, op, req, args)
	case errors.As(err, &ue):
		res := req.upstream.redact(h.upstreamErrorResult(h.redactorsOf(req), ue))
		if msg, ok := req.boundExpired(op, ue.Kind == sdk.KindTimeout); ok {
			// The adapter saw the deadline the caller's bound set
			// before the host did: the same timeout, told the same way.
			res.Text = h.redact.String(msg)
		}
		return res
	case err != nil:
		msg := h.describeCallError(ctx, op, err)
		if bound, ok := req.boundExpired(op, ctx.Err() == context.DeadlineExceeded); ok {
			msg = bound
		}
		return classed(errorResult(h.redact.String(msg)), callErrorOutcome(ctx, op, err))
	case res.InputRequired != nil && req.InputRequired:
		return h.inputRequiredResult(ctx, op, req, args, res.InputRequired) // input.go
	}
	return req.upstream.redact(h.successResult(res))
}

// boundExpired is the message of a call that timed out (expired) under
// the caller's MaxTimeout, shorter than the operation's timeout; ok is
// false when the call did not time out or the operation's own timeout
// applied.
func (req CallRequest) boundExpired(op *boundOp, expired bool) (msg string, ok bool) {
	b := req.bounded(op.Timeout)
	if !expired || b >= op.Timeout {
		return "", false
	}
	return fmt.Sprintf("tool %q timed out after %s, the bound its caller set (X-Mesh-Timeout)", op.Name, b), true
}

// bounded is d, bounded by the caller's MaxTimeout.
func (req CallRequest) bounded(d time.Duration) time.Duration {
	if req.MaxTimeout > 0 && req.MaxTimeout < d {
		return req.MaxTimeout
	}
	return d
}

// adapterRequest is the adapter request of a call: the operation, its
// arguments and the request context the adapter sees.
func adapterRequest(op *boundOp, req CallRequest, args json.RawMessage, deadline time.Time) *sdk.Request {
	return &sdk.Request{
		Context: sdk.RequestContext{
			RequestID: req.RequestID, WorkspaceID: req.WorkspaceID, AgentID: req.AgentID,
			TraceParent: req.TraceParent, TraceState: req.TraceState, Deadline: deadline,
		},
		Operation: req.upstream.operation(op.call), // upstream_auth.go
		Arguments: args,
	}
}

// describeCallError explains a failed adapter call (an *client.Error).
func (h *Host) describeCallError(ctx context.Context, op *boundOp, err error) string {
	code, msg := client.CodeOf(err), err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = ce.Message
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded || code == client.DeadlineExceeded:
		return fmt.Sprintf("tool %q timed out after %s", op.Name, op.Timeout)
	case ctx.Err() == context.Canceled || code == client.Cancelled && !op.sup.Exited():
		return fmt.Sprintf("tool %q was cancelled", op.Name)
	case code == client.Unavailable || op.sup.Exited():
		h.log.Warn("adapter connection lost during a call", zap.String("adapter", op.Adapter),
			zap.String("tool", op.Name), zap.String("error", h.redact.String(msg)))
		return fmt.Sprintf("adapter %q "+adapterStoppedDuringCall+" of tool %q (%s); it is restarted on the next call",
			op.Adapter, op.Name, msg)
	}
	return fmt.Sprintf("adapter %q failed on tool %q: %v", op.Adapter, op.Name, err)
}

// adapterStoppedDuringCall is in the failure of a call whose adapter
// process went away under it.
const adapterStoppedDuringCall = "stopped during the call"

func (h *Host) upstreamErrorResult(rs redact.Chain, ue *sdk.UpstreamError) *Result {
	r := errorResult(h.redact.String(describeUpstreamError(rs, ue)))
	if c := bytes.TrimSpace(ue.Content); len(c) > 0 && c[0] == '[' {
		// The upstream's own failed result, served as it came; Text,
		// which logs and jobs keep, and Upstream (the endpoint's _meta)
		// are Crank's context.
		r.Content, r.Upstream = h.redact.JSON(c), ue.Upstream
		if d := bytes.TrimSpace(ue.Detail); len(d) > 0 && d[0] == '{' {
			r.Structured = h.redact.JSON(d)
		}
	}
	r.Protocol = redactProtocol(h.redact, ue.Protocol)
	r.permanent = ue.Rejected || ue.Kind == sdk.KindInvalidArgument
	return classed(r, upstreamOutcome(ue))
}

// describeUpstreamError explains an upstream failure in one message. Its
// body excerpt is redacted by the call's redactors rs before it is cut to
// sdk.ExcerptBytes (the adapter sent it longer by the call's
// ExcerptMargin), so that no cut leaves part of a secret; the rest is
// the caller's to redact.
func describeUpstreamError(rs redact.Chain, ue *sdk.UpstreamError) string {
	var b strings.Builder
	switch ue.Kind {
	case sdk.KindUpstreamStatus:
		b.WriteString("upstream answered with an error")
	case sdk.KindTransport:
		b.WriteString("upstream could not be reached")
	case sdk.KindTimeout:
		b.WriteString("upstream timed out")
	case sdk.KindCancelled:
		b.WriteString("call was cancelled")
	case sdk.KindInvalidArgument:
		b.WriteString("arguments could not be turned into an upstream request")
	case sdk.KindBadResponse:
		b.WriteString("upstream answer could not be read")
	default:
		b.WriteString("upstream call failed")
	}
	if ue.Upstream != "" {
		fmt.Fprintf(&b, " (%s)", ue.Upstream)
	}
	if ue.Status != "" && !strings.Contains(ue.Message, ue.Status) {
		fmt.Fprintf(&b, ": status %s", ue.Status)
	}
	if ue.Message != "" {
		fmt.Fprintf(&b, ": %s", ue.Message)
	}
	if ue.Retryable {
		b.WriteString(" (retrying may succeed)")
	}
	if body := strings.TrimSpace(excerpt(rs, ue.Body)); body != "" {
		fmt.Fprintf(&b, "\nupstream body: %s", body)
	}
	if len(ue.Detail) > 0 {
		fmt.Fprintf(&b, "\ndetail: %s", ue.Detail)
	}
	return b.String()
}

func (h *Host) successResult(r *sdk.Result) *Result {
	out := &Result{Text: r.Text}
	if c := bytes.TrimSpace(r.Content); len(c) > 0 && c[0] == '[' {
		out.Content = h.redact.JSON(c)
	}
	raw := bytes.TrimSpace(r.Structured)
	if len(raw) > 0 {
		if raw[0] != '{' {
			// structuredContent is an object: wrap other JSON values.
			raw = append(append([]byte(`{"result":`), raw...), '}')
		}
		out.Structured = h.redact.JSON(raw)
		if out.Text == "" {
			out.Text = string(out.Structured) // redacted already
			return out
		}
	}
	out.Text = h.redact.String(out.Text)
	return out
}

// redactorsOf are the redactors of a call: the host's and, for an
// operation with upstream_auth, the call's upstream credential's.
func (h *Host) redactorsOf(req CallRequest) redact.Chain {
	if req.upstream == nil {
		return redact.Chain{h.redact}
	}
	return redact.Chain{h.redact, req.upstream.redactor}
}

// redacted returns r with its structured content and text redacted: r
// itself when they hold no secret.
func (h *Host) redacted(r *Result) *Result { return redactResult(h.redact, r) }

// redactResult is r with rd's secrets redacted.
func redactResult(rd *redact.Redactor, r *Result) *Result {
	structured, changed := rd.JSONFound(r.Structured)
	var text string
	if changed && r.Text == string(r.Structured) {
		text = string(structured) // a family tool's text is its structured content
	} else {
		text = rd.String(r.Text)
	}
	content, contentChanged := rd.JSONFound(r.Content)
	if !changed && !contentChanged && text == r.Text && r.Protocol == nil {
		return r
	}
	out := *r
	out.Structured, out.Text, out.Content = structured, text, content
	out.Protocol = redactProtocol(rd, r.Protocol)
	return &out
}

// redactProtocol is pe with its message and data redacted.
func redactProtocol(rd *redact.Redactor, pe *sdk.ProtocolError) *sdk.ProtocolError {
	if pe == nil {
		return nil
	}
	out := &sdk.ProtocolError{Code: pe.Code, Message: rd.String(pe.Message)}
	if len(pe.Data) > 0 {
		out.Data = rd.JSON(pe.Data)
	}
	return out
}

// normalizeArguments makes absent or null arguments an empty object.
func normalizeArguments(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	return args
}

func errorResult(msg string) *Result { return &Result{Text: msg, IsError: true} }

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validateArguments checks args against the operation's input schema and
// returns a message naming the failing field, or "".
func validateArguments(op *opsfile.Operation, args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "arguments must be a JSON object"
	}
	if msg := duplicateMember(args, v); msg != "" {
		return msg // arguments.go
	}
	if f := op.Input().Check(m); f != nil {
		return f.Error()
	}
	return ""
}

// excerpt is an adapter's excerpt of an upstream's answer as shown: the
// adapter's truncation note taken off, the text redacted by rs and cut
// to sdk.ExcerptBytes of it as written (redact.Chain.Excerpt), and the
// note put back when either side cut it.
func excerpt(rs redact.Chain, body string) string {
	body, cut := strings.CutSuffix(body, sdk.TruncatedNote)
	body, hostCut := rs.Excerpt(body, sdk.ExcerptBytes)
	if cut || hostCut {
		body += sdk.TruncatedNote
	}
	return body
}
