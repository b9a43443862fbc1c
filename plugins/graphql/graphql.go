package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Name is the adapter's name as used in operations files.
const Name = "graphql"

// version is the adapter's build version, reported by Describe.
const version = "0.1.0"

// adapter is the GraphQL adapter. It is safe for concurrent use.
type adapter struct {
	clients *httpadapter.Clients
	configs *sdk.Config[configFields, *prepared]
}

// Interface guards.
var (
	_ sdk.Adapter            = (*adapter)(nil)
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
	_ sdk.Streamer           = (*adapter)(nil)
)

// New returns the GraphQL adapter. The value also implements
// sdk.OperationValidator, sdk.OperationExpander and sdk.Streamer (the
// subscriptions). Each adapter has its
// own HTTP connection pool and config cache.
func New() sdk.Adapter {
	// Redirects are followed within the endpoint's origin only (a 307/308
	// resends the body, credentials included); one client per egress
	// rules.
	return &adapter{clients: httpadapter.NewClients(httpadapter.ClientOptions{}), configs: newConfigs()}
}

// Describe implements sdk.Adapter.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"graphql"}, Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, Egress: true})
}

// ValidateOperation implements sdk.OperationValidator: the checks that need
// neither the schema nor the document. Diagnostics never quote config
// values.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	p := a.configs.Get(op)
	diags := p.Diagnostics()
	if p.Err() == nil && !p.Value.cfg.isEntry() {
		diags = append(diags, sdk.Errorf("tool", "is derived by the adapter from an entry: write document, query or generate instead"))
	}
	return diags
}

// ExpandOperation implements sdk.OperationExpander: it loads the schema
// (SDL file or introspection), validates the document against it and
// returns one tool per operation (and per generated Query field), each
// with its derived schemas, annotations and a self-contained config.
func (a *adapter) ExpandOperation(ctx context.Context, op *sdk.Operation) (tools []sdk.Tool, diags []sdk.Diagnostic) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, p.Diagnostics()
	}
	if !p.Value.cfg.isEntry() {
		return nil, []sdk.Diagnostic{sdk.Errorf("tool", "is derived by the adapter from an entry: write document, query or generate instead")}
	}
	derived, diags := a.derive(ctx, p.Value.cfg, op)
	if derived == nil {
		return nil, diags
	}
	base, err := connectionFields(op.Config)
	if err != nil {
		return nil, append(diags, sdk.Errorf("", "%v", err))
	}
	for _, t := range derived {
		cfg, err := toolConfig(base, t.spec)
		if err != nil {
			return nil, append(diags, sdk.Errorf("", "%v", err))
		}
		title := sdk.Humanize(t.spec.Operation) // get_book: "Get book"
		if t.generated {
			title = sdk.Humanize(t.name) // list_authors: "List authors"
		}
		tool := sdk.Tool{
			Name:         t.name,
			Title:        title,
			Description:  t.description,
			InputSchema:  t.input,
			OutputSchema: t.output,
			Annotations:  annotations(t.mutation),
			Config:       cfg,
		}
		if t.stream {
			// A subscription is a stream source: a window tool of a
			// unary entry (the entry's mode otherwise), its items the
			// data of the events.
			tool.OutputSchema, tool.ItemSchema = nil, t.output
			if op.Mode != sdk.ModeWindow {
				tool.Mode = sdk.ModeWindow
			}
		}
		tools = append(tools, tool)
	}
	return tools, diags
}

// annotations mark queries read-only and mutations as writes that may be
// destructive, so that clients can ask the user first.
func annotations(mutation bool) sdk.Annotations {
	if mutation {
		return sdk.Annotations{ReadOnly: sdk.Bool(false), Destructive: sdk.Bool(true), Idempotent: sdk.Bool(false)}
	}
	return sdk.Annotations{ReadOnly: sdk.Bool(true), Destructive: sdk.Bool(false), Idempotent: sdk.Bool(true)}
}

// connectionFieldNames are the entry fields a tool config keeps.
var connectionFieldNames = []string{"endpoint", "headers", "timeout", "max_response_bytes", "include_extensions", "subscriptions"}

func connectionFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, errors.New("the config is not a JSON object")
	}
	out := map[string]json.RawMessage{}
	for _, k := range connectionFieldNames {
		if v, ok := fields[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func toolConfig(base map[string]json.RawMessage, spec toolSpec) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(spec); err != nil {
		return nil, err
	}
	m := make(map[string]json.RawMessage, len(base)+1)
	for k, v := range base {
		m[k] = v
	}
	m["tool"] = bytes.TrimSpace(b.Bytes())
	b.Reset()
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b.Bytes()), nil
}

// Invoke implements sdk.Adapter: one GraphQL request and its answer.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (res *sdk.Result, err error) {
	p := a.configs.Get(&req.Operation)
	if p.Err() != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	c := p.Value.cfg
	t := c.tool
	if t == nil {
		var ue *sdk.UpstreamError
		if t, ue = a.entryTool(ctx, p.Value, req); ue != nil {
			return nil, ue
		}
	}
	if t.subscription {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstreamLabel(t),
			Message: "a subscription is a stream: give it mode window, session or async_job with transport_behavior server_stream (not request_response)"}
	}
	vars, verr := t.variables(req.Arguments)
	if verr != nil {
		return nil, c.invalidArg(t, verr)
	}
	body := make([]byte, 0, len(t.prefix)+len(vars)+16)
	body = append(body, t.prefix...)
	body = append(body, `,"variables":`...)
	body = append(body, vars...)
	body = append(body, '}')

	gr, status, ue := a.post(ctx, c, t, body, c.maxBytes, c.callTimeout(req.Operation.Timeout), &req.Context)
	if ue != nil {
		return nil, ue
	}
	res, ue = c.result(t, gr, status)
	if ue != nil {
		return nil, ue
	}
	return res, nil
}

// entryTool serves an entry config invoked as is (a host that does not
// expand entries): the entry is expanded on first use and the tool named
// like the operation is called.
func (a *adapter) entryTool(ctx context.Context, p *prepared, req *sdk.Request) (*tool, *sdk.UpstreamError) {
	c := p.cfg
	tools := p.expanded.Load()
	if tools == nil {
		derived, found := a.derive(ctx, c, &req.Operation)
		if derived == nil {
			var d diags
			d.Add(found...)
			return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstream, Message: d.Summary("the entry cannot be expanded into tools")}
		}
		for _, dt := range derived {
			raw, err := json.Marshal(dt.spec)
			if err == nil {
				dt.compiled, err = compileTool(raw)
			}
			if err != nil {
				return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstream, Message: "internal error compiling a derived tool: " + err.Error()}
			}
		}
		p.expanded.Store(&derived)
		tools = &derived
	}
	if len(*tools) == 1 {
		return (*tools)[0].compiled, nil
	}
	var names []string
	for _, dt := range *tools {
		if dt.name == req.Operation.Name {
			return dt.compiled, nil
		}
		names = append(names, dt.name)
	}
	return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstream,
		Message: fmt.Sprintf("the entry stands for several tools (%s) and none is named %q", strings.Join(names, ", "), req.Operation.Name)}
}
