package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Name is the adapter's name in operations files.
const Name = "mcp"

const version = "0.1.0"

// maxMessage bounds the text of an upstream error quoted in a result.
const maxMessage = 2048

type adapter struct {
	configs sdk.Config[config, *upstream]
	pool    *pool
}

// New returns the MCP upstream adapter.
func New() sdk.Adapter { return newAdapter() }

func newAdapter() *adapter {
	return &adapter{configs: sdk.Config[config, *upstream]{Name: Name, Prepare: prepare}, pool: newPool()}
}

// Describe implements sdk.Adapter.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"mcp"},
		Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, Progress: true, Log: true, ClientRequests: true, Resume: true, Egress: true})
}

// ValidateOperation implements sdk.OperationValidator.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	p := a.configs.Fresh(op)
	diags := p.Diagnostics()
	if p.Err() == nil && p.Value.task && op.Mode == sdk.ModeWindow {
		diags = append(diags, sdk.Errorf("task", "%s", errTaskWindow))
	}
	return diags
}

// ExpandOperation implements sdk.OperationExpander: it lists the
// upstream's tools and returns the ones the entry selects.
func (a *adapter) ExpandOperation(ctx context.Context, op *sdk.Operation) (tools []sdk.Tool, diags []sdk.Diagnostic) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, p.Diagnostics()
	}
	u := p.Value
	field := u.connField()
	if op.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, op.Timeout)
		defer cancel()
	}
	a.pool.watch.expanded(u.key, op.Name) // watch.go
	listed, err := a.listTools(ctx, u)
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf(field, "listing the tools of %s failed: %s", u.label, a.failure(ctx, u, err).Message)}
	}
	support, capable, err := a.taskSupport(ctx, u) // tasks.go
	if err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf(field, "listing the tools of %s failed: %s", u.label, a.failure(ctx, u, err).Message)}
	}
	var d sdk.Diagnostics
	byName := map[string]string{} // Crank name -> upstream name
	for _, t := range listed {
		if !u.selects(t.Name) {
			continue
		}
		task, err := taskOf(u, op, t.Name, support, capable)
		if err != nil {
			d.Errorf("task", "%v", err)
		}
		tool, err := a.tool(u, t, task)
		if err != nil {
			d.Errorf("", "tool %q of %s: %v", t.Name, u.label, err)
			continue
		}
		if u.tool != "" {
			tool.Name = "" // the entry itself
		} else if other, dup := byName[tool.Name]; dup {
			d.Errorf("rename", "upstream tools %q and %q are both served as %q: rename one or exclude it", other, t.Name, tool.Name)
			continue
		}
		byName[tool.Name] = t.Name
		tools = append(tools, tool)
	}
	switch {
	case u.tool != "" && len(tools) == 0:
		d.Errorf("tool", "%s has no tool %q", u.label, u.tool)
	case len(tools) == 0 && u.publishes() && a.offers(ctx, u):
		// The entry serves the upstream's resources or prompts alone
		// (publish.go).
	case len(tools) == 0 && len(listed) > 0:
		d.Errorf("include", "selects none of the %d tools of %s", len(listed), u.label)
	case len(tools) == 0:
		d.Errorf(field, "%s serves no tools", u.label)
	}
	for _, x := range d.List() {
		if x.Severity != sdk.SeverityWarning {
			return nil, d.List()
		}
	}
	return tools, d.List()
}

// listTools lists every page of the upstream's tools.
func (a *adapter) listTools(ctx context.Context, u *upstream) ([]*gomcp.Tool, error) {
	var all []*gomcp.Tool
	err := a.withSession(ctx, u, true, func(s *gomcp.ClientSession) error {
		all = all[:0]
		for t, err := range s.Tools(ctx, nil) {
			if err != nil {
				if lacks(s, err, capTools) { // an upstream without tools, such as a prompts server
					return nil
				}
				return err
			}
			all = append(all, t)
		}
		return nil
	})
	return all, err
}

// tool makes an upstream tool a Crank tool, called as a task or not.
func (a *adapter) tool(u *upstream, t *gomcp.Tool, task bool) (sdk.Tool, error) {
	in, err := json.Marshal(t.InputSchema)
	if err != nil {
		return sdk.Tool{}, fmt.Errorf("input schema: %v", err)
	}
	var out json.RawMessage
	if t.OutputSchema != nil {
		if out, err = json.Marshal(t.OutputSchema); err != nil {
			return sdk.Tool{}, fmt.Errorf("output schema: %v", err)
		}
	}
	cfg, err := u.toolConfig(t.Name, task)
	if err != nil {
		return sdk.Tool{}, err
	}
	tool := sdk.Tool{Name: u.crankName(t.Name), Title: t.Title, Description: t.Description,
		InputSchema: in, OutputSchema: out, Config: cfg}
	if len(t.Meta) > 0 {
		// The tool's _meta as the upstream gave it: MCP Apps' "ui" (the
		// nested resourceUri and visibility, the flat "ui/resourceUri")
		// tells a host which App renders its results.
		if tool.Meta, err = json.Marshal(t.Meta); err != nil {
			return sdk.Tool{}, fmt.Errorf("_meta: %v", err)
		}
	}
	if an := t.Annotations; an != nil {
		if tool.Title == "" {
			tool.Title = an.Title
		}
		tool.Annotations = sdk.Annotations{Destructive: an.DestructiveHint, OpenWorld: an.OpenWorldHint}
		if an.ReadOnlyHint {
			tool.Annotations.ReadOnly = sdk.Bool(true)
		}
		if an.IdempotentHint {
			tool.Annotations.Idempotent = sdk.Bool(true)
		}
	}
	return tool, nil
}

// Invoke implements sdk.Adapter: one tools/call on the upstream.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	u, err := a.target(req)
	if err != nil {
		return nil, err
	}
	if req.Operation.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Operation.Timeout)
		defer cancel()
	}
	var res *gomcp.CallToolResult
	var r relay
	if sdk.WantsProgress(ctx) {
		// The client asked for progress: the upstream's is relayed (a
		// flood is thinned by the bounded buffer, not reported).
		r.progress = func(p *gomcp.ProgressNotificationParams) error {
			return sdk.ReportProgress(ctx, sdk.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		}
		r.dropped = func(int64) error { return nil }
	}
	if r.logLevel = sdk.WantsLog(ctx); r.logLevel != "" {
		// The client set a logging level: the upstream's log messages for
		// the call are relayed (logs.go).
		r.log = func(p *gomcp.LoggingMessageParams) { _ = sdk.ReportLog(ctx, logMessage(p)) }
	}
	// The host lets the upstream's requests of the client through (ask.go).
	r.ask = newAsker(ctx)
	params := callParams(u.tool, req)
	if err := withInput(u, params, req.Input); err != nil { // ask.go
		return nil, err
	}
	var progress func(sdk.Progress)
	if r.progress != nil {
		progress = func(p sdk.Progress) { _ = sdk.ReportProgress(ctx, p) }
	}
	switch {
	case len(req.Resume) > 0:
		// A job's task, followed on from another replica (resume.go).
		res, err = a.resumeTask(ctx, u, req.Resume, progress)
	case u.task:
		// An MCP Task (tasks.go): its status messages are the progress;
		// log messages are not relayed.
		res, err = a.taskCall(ctx, u, params, progress)
	case r.progress != nil || r.log != nil || r.ask != nil:
		res, err = a.relayedCall(ctx, u, params, r)
	default:
		res, err = a.call(ctx, u, params)
	}
	if err != nil {
		return nil, a.failure(ctx, u, err)
	}
	if res.NeedsInput() && r.ask != nil && r.ask.deferred {
		return inputRequiredOf(u, res) // ask.go
	}
	return result(u, res)
}

// target is the upstream of a call, which names one upstream tool.
func (a *adapter) target(req *sdk.Request) (*upstream, error) {
	u, err := a.upstreamOf(&req.Operation)
	if err != nil {
		return nil, err
	}
	if u.tool == "" {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label,
			Message: "config.tool: no upstream tool named: an entry without tool is expanded by the gateway"}
	}
	return u, nil
}

// upstreamOf is the prepared config of a request's operation.
func (a *adapter) upstreamOf(op *sdk.Operation) (*upstream, error) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	return p.Value, nil
}

// callParams are the tools/call params of a request: the client's
// arguments as they came.
func callParams(name string, req *sdk.Request) *gomcp.CallToolParams {
	args := json.RawMessage(req.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return &gomcp.CallToolParams{Name: name, Arguments: args}
}

// call makes one tools/call on the upstream's session.
func (a *adapter) call(ctx context.Context, u *upstream, params *gomcp.CallToolParams) (*gomcp.CallToolResult, error) {
	return a.callOn(ctx, a.pool.get(u), u, params, "")
}

// callOn makes one tools/call on the session of c, counted in flight (for
// the routing of log messages), asking the upstream for log messages at
// logLevel and above first unless logLevel is "".
func (a *adapter) callOn(ctx context.Context, c *conn, u *upstream, params *gomcp.CallToolParams, logLevel string) (*gomcp.CallToolResult, error) {
	c.logs.inflight.Add(1)
	defer c.logs.inflight.Add(-1)
	var res *gomcp.CallToolResult
	err := a.withConn(ctx, c, false, func(s *gomcp.ClientSession) error {
		if logLevel != "" {
			c.setLevel(ctx, s, logLevel)
		}
		if a, _ := ctx.Value(askerKey{}).(*asker); a != nil && sessionlessUpstream(s) {
			// The sessionless protocol takes the client's capabilities
			// per request (ask.go).
			params.Meta[gomcp.MetaKeyClientCapabilities] = a.raw
		}
		var err error
		res, err = s.CallTool(ctx, params)
		return err
	})
	return res, err
}

// withSession runs f on the upstream's session. A lost session is dropped
// so that the next use opens a new one; f is run again on a new session
// when it is safe to repeat (idempotent) or its request never reached the
// upstream (the upstream did not know the session).
func (a *adapter) withSession(ctx context.Context, u *upstream, idempotent bool, f func(*gomcp.ClientSession) error) error {
	return a.withConn(ctx, a.pool.get(u), idempotent, f)
}

// withConn is withSession on the connection c.
func (a *adapter) withConn(ctx context.Context, c *conn, idempotent bool, f func(*gomcp.ClientSession) error) error {
	resent, reopened := false, false
	for {
		s, err := c.open(ctx)
		if err != nil {
			return err
		}
		err = f(s)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, errTooLarge) || c.tooLarge.Load() {
			c.drop(s) // its stream is broken mid-message
			return err
		}
		if notSent(err) {
			// The request never left (e.g. a pooled connection the
			// upstream had closed): the session stands, send it again.
			if resent {
				return err
			}
			resent = true
			continue
		}
		if !lost(err) {
			return err
		}
		c.drop(s)
		if reopened || !idempotent && !errors.Is(err, gomcp.ErrSessionMissing) {
			return err
		}
		reopened = true
	}
}

// result turns a tools/call result into the tool's result.
func result(u *upstream, res *gomcp.CallToolResult) (*sdk.Result, error) {
	text := contentText(res.Content)
	if res.IsError {
		ue := &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Upstream: u.label, Message: bound(text)}
		if ue.Message == "" {
			ue.Message = "the tool failed without a message"
		}
		if res.StructuredContent != nil {
			ue.Detail, _ = json.Marshal(res.StructuredContent)
		}
		ue.Content, _ = json.Marshal(res.Content) // served unchanged
		return nil, ue
	}
	out := &sdk.Result{Text: text}
	var err error
	if out.Content, err = json.Marshal(res.Content); err != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: u.label, Message: "the result's content cannot be encoded as JSON"}
	}
	if res.StructuredContent != nil {
		if out.Structured, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: u.label, Message: "the result's structuredContent cannot be encoded as JSON"}
		}
	}
	return out, nil
}

// contentText joins the text blocks of a result.
func contentText(content []gomcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*gomcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// failure classifies an error of talking to the upstream.
func (a *adapter) failure(ctx context.Context, u *upstream, err error) *sdk.UpstreamError {
	if own := (*sdk.UpstreamError)(nil); errors.As(err, &own) {
		return own // classified where it arose (resume.go)
	}
	ue := &sdk.UpstreamError{Kind: sdk.KindTransport, Upstream: u.label}
	var rpc *jsonrpc.Error
	var ce *connectError
	var tf *taskFailed
	switch {
	case a.pool.tooLarge(u) || errors.Is(err, errTooLarge):
		ue.Kind, ue.Rejected = sdk.KindBadResponse, true
		ue.Message = fmt.Sprintf("the upstream sent a message larger than max_message_bytes (%d bytes); the session was closed and the next call opens a new one", u.maxMessage)
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		ue.Kind, ue.Message, ue.Retryable = sdk.KindTimeout, "the operation's timeout passed", true
	case errors.Is(err, context.Canceled):
		ue.Kind, ue.Message = sdk.KindCancelled, "the call was cancelled"
	case errors.As(err, &ce):
		ue.Message, ue.Retryable = "cannot open an MCP session: "+a.describe(u, ce.err), true
		if why, ok := handshakeError(u, ce.err); ok { // handshake.go
			ue.Kind, ue.Retryable = sdk.KindBadResponse, false
			ue.Message = fmt.Sprintf("cannot open an MCP session: %s is not an MCP server this adapter can speak to: %s", u.label, a.describe(u, errors.New(why)))
		}
	case errors.As(err, &tf):
		ue.Kind, ue.Message = sdk.KindUpstreamStatus, bound(tf.Error())
	case notSent(err):
		ue.Message, ue.Retryable = "the request could not be sent: "+a.describe(u, err), true
	case malformed(err): // bounds.go
		ue.Kind, ue.Message = sdk.KindBadResponse, errMalformed
	case errors.As(err, &rpc):
		ue.Kind, ue.Status, ue.Message = sdk.KindUpstreamStatus, fmt.Sprint(rpc.Code), bound(rpc.Message)
		ue.Rejected = rpc.Code == jsonrpc.CodeInvalidParams || rpc.Code == jsonrpc.CodeMethodNotFound ||
			rpc.Code == jsonrpc.CodeInvalidRequest
		if len(rpc.Data) > 0 && json.Valid(rpc.Data) && len(rpc.Data) <= maxMessage {
			ue.Detail = rpc.Data
		}
		// The upstream's own answer: the gateway's client gets the same
		// JSON-RPC error. A refusal of the client's to one of the
		// upstream's input requests (ask.go) is no answer of the upstream.
		if ir := (*inputRefused)(nil); !errors.As(err, &ir) {
			ue.Protocol = &sdk.ProtocolError{Code: rpc.Code, Message: rpc.Message}
			if len(rpc.Data) > 0 && json.Valid(rpc.Data) {
				ue.Protocol.Data = rpc.Data
			}
		}
	case errors.Is(err, errTaskSessionGone): // resume.go
		ue.Message, ue.Rejected = bound(err.Error()), true
	case lost(err):
		ue.Message, ue.Retryable = "the upstream session was lost (the server restarted or closed the connection); the next call opens a new one", true
	default:
		ue.Message, ue.Retryable = a.describe(u, err), true
	}
	if re := (*httpadapter.RedirectError)(nil); errors.As(err, &re) {
		ue.Retryable = false // the upstream redirects again; the url must change
	}
	return ue
}

// describe explains a transport error without quoting the URL, whose path
// or query may carry a secret.
func (a *adapter) describe(u *upstream, err error) string {
	var re *httpadapter.RedirectError
	if errors.As(err, &re) {
		return re.Error() // the url.Error around it quotes the redirect's target whole
	}
	msg := err.Error()
	if u.url != "" {
		msg = strings.ReplaceAll(msg, u.url, "<url>")
	}
	return bound(msg)
}

func bound(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
