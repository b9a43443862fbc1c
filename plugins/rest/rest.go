package rest

import (
	"context"
	"net/http"

	"github.com/crankmcp/crank/plugins/rest/openapi"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Name is the adapter's name as used in operation files.
const Name = "rest"

// version is the adapter's build version, reported by Describe.
const version = "0.1.0"

// Adapter is the REST adapter. It implements sdk.Adapter and
// sdk.OperationValidator and is safe for concurrent use.
type adapter struct {
	clients *httpadapter.Clients
	configs *sdk.Config[config, *prepared]
}

var (
	_ sdk.Adapter            = (*adapter)(nil)
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
	_ sdk.Streamer           = (*adapter)(nil)
)

// New returns the REST adapter. The value also implements
// sdk.OperationValidator. Each adapter has its own HTTP connection pool and
// config cache.
func New() sdk.Adapter {
	// Redirects are followed only within the same origin, so configured
	// credentials never reach another host; one client per egress rules.
	return &adapter{clients: httpadapter.NewClients(httpadapter.ClientOptions{CheckRedirect: sameOriginRedirects}), configs: newConfigs()}
}

// Describe implements sdk.Adapter.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"http", "https", "sse"}, Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}, Egress: true})
}

// ValidateOperation implements sdk.OperationValidator. It returns nil for a
// good config, otherwise diagnostics naming the field. Diagnostics never
// quote config values.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	return a.configs.Get(op).Diagnostics()
}

// ExpandOperation implements sdk.OperationExpander. A plain REST entry is
// its own tool (its input schema derived from the config); an import
// entry ({"openapi": {...}}) becomes one tool per operation of the
// document, each with its own REST config (package openapi).
func (a *adapter) ExpandOperation(ctx context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	// Fresh: the import marks the overrides it uses, in its own settings.
	p := a.configs.Fresh(op)
	if p.Value == nil || p.Value.openapi == nil {
		// A plain REST operation: the entry itself, with the arguments its
		// config uses as the input schema unless the entry writes one.
		// Its stream resumes after an event's id (Last-Event-ID).
		t := sdk.Tool{ResumesStream: true}
		if p.Value != nil && p.Value.op != nil {
			t.InputSchema = p.Value.op.inputSchema()
		}
		return []sdk.Tool{t}, nil
	}
	if p.Err() != nil {
		return nil, p.Diagnostics()
	}
	var d diags
	d.Add(p.Diagnostics()...)
	tools := openapi.Import(ctx, p.Value.openapi, op, a.importTarget(op), &d)
	if d.Failed() {
		return nil, d.List()
	}
	for i := range tools {
		tools[i].ResumesStream = true // an event stream resumes after an event's id (Last-Event-ID)
	}
	return tools, d.List()
}

// importTarget is the adapter as the OpenAPI importer writes tools for
// an entry: its documents read under the entry's egress rules.
func (a *adapter) importTarget(op *sdk.Operation) openapi.Target {
	return openapi.Target{
		Client:    a.clients.For(op.Egress),
		UserAgent: userAgent,
		Sends:     func(m string) bool { _, ok := methods[m]; return ok },
		ArgName:   validArgName,
		Check: func(op *sdk.Operation) []sdk.Diagnostic {
			if p := a.configs.Get(op); p.Err() != nil {
				return p.Diagnostics()
			}
			return nil
		},
	}
}

// Invoke implements sdk.Adapter: one HTTP request and its answer.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (res *sdk.Result, err error) {
	op, ue := a.operation(&req.Operation)
	if ue != nil {
		return nil, ue
	}
	args, ue := op.decodeArgs(req.Arguments)
	if ue != nil {
		return nil, ue
	}
	args.cursor = req.Cursor

	timeout := op.callTimeout(req.Operation.Timeout)
	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()

	hreq, ue := op.newRequest(callCtx, &args, acceptJSON, &req.Context)
	if ue != nil {
		return nil, ue
	}
	resp, err := a.clients.For(req.Operation.Egress).Do(hreq)
	if err != nil {
		return nil, op.failure(ctx, callCtx, timeout, hreq.URL.Host, err, false)
	}
	defer httpadapter.DrainAndClose(resp.Body)

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, op.statusError(resp)
	}
	if op.method == http.MethodHead {
		// No body, whatever Content-Length announces.
		return &sdk.Result{Structured: emptyObject, ContentType: resp.Header.Get("Content-Type")}, nil
	}
	if resp.ContentLength > op.maxBytes {
		return nil, op.tooLarge()
	}
	body, over, err := httpadapter.ReadBounded(resp.Body, op.maxBytes, resp.ContentLength)
	if over {
		return nil, op.tooLarge()
	}
	if err != nil {
		return nil, op.failure(ctx, callCtx, timeout, hreq.URL.Host, err, true)
	}
	res, ue = op.result(ctx, body, resp.Header.Get("Content-Type"), answerURI(resp))
	if ue != nil {
		return nil, ue
	}
	return res, nil
}

// answerURI names an answer: the URL it was read from, without userinfo,
// query string or fragment (they may carry credentials).
func answerURI(resp *http.Response) string {
	if resp.Request == nil || resp.Request.URL == nil {
		return ""
	}
	u := *resp.Request.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
