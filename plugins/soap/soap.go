package soap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Name is the adapter's name as used in operation files.
const Name = "soap"

const version = "0.1.0"

type adapter struct {
	clients *httpadapter.Clients
	configs *sdk.Config[config, *loaded]
}

var (
	_ sdk.Adapter            = (*adapter)(nil)
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
)

// New returns the SOAP adapter.
func New() sdk.Adapter {
	// Redirects within the endpoint's origin only: a SOAP request is a
	// POST that may carry credentials. One client per egress rules.
	return &adapter{clients: httpadapter.NewClients(httpadapter.ClientOptions{}), configs: newConfigs()}
}

// Describe implements sdk.Adapter.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"soap1.1", "soap1.2"}, Modes: []sdk.Mode{sdk.ModeUnary}, Egress: true})
}

// load returns op's config with its WSDL loaded, loading it again when
// one of its files changed (see loaded.stale).
func (a *adapter) load(op *sdk.Operation, fresh bool) *sdk.Prepared[*loaded] {
	p := a.configs.Get(op)
	if l := p.Value; l != nil && l.stale(fresh) {
		p = a.configs.Fresh(op)
	}
	return p
}

// ValidateOperation implements sdk.OperationValidator: the config and its
// WSDL are loaded and checked.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	return a.load(op, true).Diagnostics()
}

// ExpandOperation implements sdk.OperationExpander: one tool per operation
// of the chosen port, or the entry itself when the config names one
// operation.
func (a *adapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	p := a.load(op, true)
	l := p.Value
	var diags []sdk.Diagnostic
	if l != nil {
		for _, e := range l.skipped {
			diags = append(diags, sdk.Diagnostic{Severity: sdk.SeverityWarning, Field: "wsdl", Message: "skipped " + e.Error()})
		}
	}
	if p.Err() != nil {
		return nil, append(diags, p.Diagnostics()...)
	}
	var base map[string]json.RawMessage
	if err := json.Unmarshal(op.Config, &base); err != nil {
		return nil, []sdk.Diagnostic{sdk.Errorf("", "config is not an object")}
	}
	delete(base, "operations")
	delete(base, "tool_prefix")
	var tools []sdk.Tool
	for _, o := range l.ops {
		in, err := json.Marshal(typeSchema(o.In.Type))
		if err != nil {
			return nil, append(diags, sdk.Errorf("wsdl", "operation %s: input schema: %v", o.Name, err))
		}
		// A WSDL says nothing of what an operation does: its name does,
		// by the SDK's naming rule (GetOrder reads; an entry's
		// annotations override it).
		t := sdk.Tool{Name: toolName(l.cfg.ToolPrefix + o.Name), Title: sdk.Humanize(o.Name), Description: o.Doc, InputSchema: in,
			Annotations: sdk.NameAnnotations(o.Name)}
		if t.Description == "" {
			t.Description = fmt.Sprintf("SOAP %s operation %s (port %s).", o.Version, o.Name, l.port)
		}
		if l.cfg.Operation != "" {
			t.Name = "" // the entry itself; the operator's words win
		} else {
			base["operation"], _ = json.Marshal(o.Name)
			t.Config, _ = json.Marshal(base)
		}
		tools = append(tools, t)
	}
	return tools, diags
}

func toolName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b[i] = '_'
		}
	}
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}

// Invoke implements sdk.Adapter: one SOAP call.
func (a *adapter) Invoke(ctx context.Context, req *sdk.Request) (res *sdk.Result, err error) {
	p := a.load(&req.Operation, false)
	if p.Err() != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	l := p.Value
	if l.cfg.Operation == "" {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: "invalid soap config: operation: is required to call (the entry expands to one tool per operation)"}
	}
	op := l.byName[l.cfg.Operation]
	up := "SOAP " + op.Name + " " + redactURL(op.Endpoint)
	env, err := buildEnvelope(op, req.Arguments, l.cfg.Security.token(l.signer), time.Now())
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: up, Message: ae.Error()}
		}
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: up, Message: "cannot build the envelope"}
	}
	timeout := time.Duration(l.cfg.Timeout)
	if req.Operation.Timeout > 0 {
		timeout = req.Operation.Timeout
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, op.Endpoint, strings.NewReader(string(env)))
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: up, Message: "invalid endpoint URL"}
	}
	if op.Version == "1.2" {
		ct := "application/soap+xml; charset=utf-8"
		if op.Action != "" {
			ct += `; action="` + op.Action + `"`
		}
		hreq.Header.Set("Content-Type", ct)
		hreq.Header.Set("Accept", "application/soap+xml, text/xml")
	} else {
		hreq.Header.Set("Content-Type", "text/xml; charset=utf-8")
		hreq.Header.Set("SOAPAction", `"`+op.Action+`"`)
		hreq.Header.Set("Accept", "text/xml")
	}
	hreq.Header.Set("User-Agent", "crank-soap/"+version)
	for k, v := range l.cfg.Headers {
		if strings.EqualFold(k, "Host") {
			hreq.Host = v
			continue
		}
		hreq.Header.Set(k, v)
	}
	resp, err := a.clients.For(req.Operation.Egress).Do(hreq)
	if err != nil {
		return nil, transportError(ctx, callCtx, up, timeout, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, l.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, transportError(ctx, callCtx, up, timeout, err)
	}
	if int64(len(body)) > l.cfg.MaxResponseBytes {
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: up,
			Message: fmt.Sprintf("the answer is larger than max_response_bytes (%d)", l.cfg.MaxResponseBytes)}
	}
	return result(ctx, op, up, resp.StatusCode, resp.Header.Get("Content-Type"), body)
}

func transportError(ctx, callCtx context.Context, up string, timeout time.Duration, err error) *sdk.UpstreamError {
	switch {
	case ctx.Err() == context.Canceled:
		return &sdk.UpstreamError{Kind: sdk.KindCancelled, Upstream: up, Message: "the call was cancelled"}
	case ctx.Err() == context.DeadlineExceeded:
		return &sdk.UpstreamError{Kind: sdk.KindTimeout, Upstream: up, Message: "the host's deadline expired"}
	case callCtx.Err() == context.DeadlineExceeded:
		return &sdk.UpstreamError{Kind: sdk.KindTimeout, Upstream: up, Message: fmt.Sprintf("the upstream did not answer within %s", timeout)}
	}
	msg := "the upstream could not be reached"
	var oe *net.OpError
	retry := false
	if errors.As(err, &oe) && oe.Op == "dial" {
		msg += ": connection refused or unreachable"
		retry = true
	} else {
		msg += ": the connection failed"
	}
	return &sdk.UpstreamError{Kind: sdk.KindTransport, Upstream: up, Message: msg, Retryable: retry}
}

// redactURL names a URL's scheme and host for messages: userinfo, path
// and query may carry credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(endpoint)"
	}
	return u.Scheme + "://" + u.Host
}
