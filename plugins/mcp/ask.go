package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Client requests: the upstream's sampling/createMessage,
// elicitation/create and roots/list made during a call go to the call's
// client through the host (sdk.AskClient), and its answer back.
//
// The upstream session is shared by every call of every client, so it
// advertises every capability the gateway can relay (sampling with tools
// and context, elicitation in form and URL mode, roots), and each request
// is checked against the capabilities of the client of its call
// (sdk.ClientCapabilities): a client that lacks one, or a request that
// belongs to no call whose client the host lets the adapter ask, is
// answered with an error ("method not found", or "invalid params" for an
// elicitation mode or sampling feature the client lacks), as a client
// without the capability would answer. A request is the call's as its log
// messages are (logs.go): read from the call's own response stream (the
// call's tag, set in its _meta as it is read), or the only call in flight
// on the session when it is read elsewhere (stdio, the standalone
// stream); or, for an upstream of the sessionless protocol (2026-07-28),
// an input request of the call's input-required result, which the
// adapter fulfils itself (inputMiddleware). A client of 2026-07-28, which
// cannot be asked during a call (sdk.TakesInputRequired), gets the
// upstream's input-required result instead (the host seals its state),
// and its retry (sdk.Request.Input) goes to the upstream with the
// client's input responses and the upstream's state.

// upstreamCapabilities are the capabilities the adapter's shared session
// of an upstream advertises (the one of its listings, reads, windows and
// jobs): all the gateway relays.
func upstreamCapabilities() *gomcp.ClientCapabilities {
	c := &gomcp.ClientCapabilities{
		//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
		Sampling:    &gomcp.SamplingCapabilities{Tools: &gomcp.SamplingToolsCapabilities{}, Context: &gomcp.SamplingContextCapabilities{}},
		Elicitation: &gomcp.ElicitationCapabilities{Form: &gomcp.FormElicitationCapabilities{}, URL: &gomcp.URLElicitationCapabilities{}},
		RootsV2:     &gomcp.RootCapabilities{},
	}
	c.AddExtension(extensionUI, map[string]any{"mimeTypes": []string{mimeApp}})
	return c
}

// The MCP Apps extension (SEP-1865): its identifier in capabilities'
// extensions, and the MIME type of an App's HTML resource.
const (
	extensionUI = "io.modelcontextprotocol/ui"
	mimeApp     = "text/html;profile=mcp-app"
)

// relayedExtensions are the extensions of a client the adapter declares to
// an upstream for the client's calls: those whose messages the gateway
// relays unchanged (an App's tool _meta and ui:// resources), each with
// the settings it passes on (known values only, so that clients cannot
// make connections without bound: each set of declared capabilities is a
// connection, a child process over stdio).
var relayedExtensions = map[string]func(json.RawMessage) map[string]any{
	extensionUI: func(raw json.RawMessage) map[string]any {
		var s struct {
			MIMETypes []string `json:"mimeTypes"`
		}
		_ = json.Unmarshal(raw, &s)
		if slices.Contains(s.MIMETypes, mimeApp) {
			return map[string]any{"mimeTypes": []string{mimeApp}}
		}
		return map[string]any{}
	},
}

// declared are the capabilities a session of the upstream declares for
// the calls of k's client, as that client declared them: sampling,
// elicitation and roots when the host may ask it during a call (not a
// client of 2026-07-28, which cannot be asked then), and the extensions
// the gateway relays. So the upstream asks, and shapes its answers, as it
// would talking to that client directly.
func (k *asker) declared() *gomcp.ClientCapabilities {
	c := &gomcp.ClientCapabilities{}
	if !k.deferred {
		if s := k.caps.Sampling; s != nil {
			//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
			c.Sampling = &gomcp.SamplingCapabilities{}
			if s.Tools != nil {
				c.Sampling.Tools = &gomcp.SamplingToolsCapabilities{} //nolint:staticcheck // as above
			}
			if s.Context != nil {
				c.Sampling.Context = &gomcp.SamplingContextCapabilities{} //nolint:staticcheck // as above
			}
		}
		if e := k.caps.Elicitation; e != nil {
			c.Elicitation = &gomcp.ElicitationCapabilities{}
			if e.Form != nil || e.URL == nil { // no mode said is form
				c.Elicitation.Form = &gomcp.FormElicitationCapabilities{}
			}
			if e.URL != nil {
				c.Elicitation.URL = &gomcp.URLElicitationCapabilities{}
			}
		}
		if k.caps.Roots != nil {
			c.RootsV2 = &gomcp.RootCapabilities{} //nolint:staticcheck // roots is deprecated as of 2026-07-28, and still served before it
		}
	}
	for id, settings := range relayedExtensions {
		if raw, ok := k.caps.Extensions[id]; ok {
			c.AddExtension(id, settings(raw))
		}
	}
	return c
}

// asker is a call whose client the host lets the adapter ask: the call's
// context (which sdk.AskClient needs) and its client's capabilities.
type asker struct {
	ctx  context.Context
	caps clientCaps
	raw  json.RawMessage
	// deferred: the client (2026-07-28) takes an input-required result
	// rather than requests during the call (sdk.TakesInputRequired).
	deferred bool
}

// clientCaps are the capabilities of a call's client that decide what
// may be asked of it.
type clientCaps struct {
	Sampling *struct {
		Tools   json.RawMessage `json:"tools"`
		Context json.RawMessage `json:"context"`
	} `json:"sampling"`
	Elicitation *struct {
		Form json.RawMessage `json:"form"`
		URL  json.RawMessage `json:"url"`
	} `json:"elicitation"`
	Roots      json.RawMessage            `json:"roots"`
	Extensions map[string]json.RawMessage `json:"extensions"`
}

type askerKey struct{}

// newAsker is the asker of the call whose context ctx is, nil when the
// host does not relay its client requests.
func newAsker(ctx context.Context) *asker {
	raw := sdk.ClientCapabilities(ctx)
	if raw == nil {
		return nil
	}
	a := &asker{ctx: ctx, raw: raw, deferred: sdk.TakesInputRequired(ctx)}
	if err := json.Unmarshal(raw, &a.caps); err != nil {
		return nil
	}
	return a
}

// The MCP methods of client requests.
const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
)

// isAsk reports whether method is a client request the adapter relays.
func isAsk(method string) bool {
	return method == methodCreateMessage || method == methodElicit || method == methodListRoots
}

// refusal is why a's client cannot be asked method with params p, nil when
// it can.
func (a *asker) refusal(method string, p gomcp.Params) *jsonrpc.Error {
	lacks := func(what string) *jsonrpc.Error {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the client of this call (through the gateway) does not support %s", what)}
	}
	feature := func(what string) *jsonrpc.Error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the client of this call (through the gateway) does not support %s", what)}
	}
	switch method {
	case methodCreateMessage:
		s := a.caps.Sampling
		if s == nil {
			return lacks("sampling")
		}
		if q, ok := p.(*gomcp.CreateMessageWithToolsParams); ok {
			if len(q.Tools) > 0 && s.Tools == nil {
				return feature("tools in sampling (sampling.tools)")
			}
			if q.IncludeContext != "" && q.IncludeContext != "none" && s.Context == nil {
				return feature("includeContext in sampling (sampling.context)")
			}
		}
	case methodElicit:
		e := a.caps.Elicitation
		if e == nil {
			return lacks("elicitation")
		}
		mode := "form"
		if q, ok := p.(*gomcp.ElicitParams); ok && (q.Mode == "url" || q.Mode == "" && q.URL != "") {
			mode = "url"
		}
		if mode == "url" && e.URL == nil || mode == "form" && e.Form == nil && e.URL != nil {
			return feature(mode + " mode elicitation")
		}
	case methodListRoots:
		if a.caps.Roots == nil {
			return lacks("roots")
		}
	}
	return nil
}

// ask passes the upstream's request method with params p (its _meta m)
// to the client of a's call and decodes the answer into out: a is the
// call of an input-required result's requests, nil for a request of the
// upstream, whose call its tag names. ctx is the request's context (the
// go-sdk session's values are those of the call that opened it: never a
// way to the call of a request).
func (c *conn) ask(ctx context.Context, a *asker, method string, p gomcp.Params, m gomcp.Meta, out any) error {
	if tag, ok := m[metaCallTag].(string); ok {
		delete(m, metaCallTag)
		if a == nil {
			a = c.logs.asker(tag)
		}
	}
	if a == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the gateway relays %s only during a tool call whose client it can ask", method)}
	}
	if a.deferred {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the client of this call (protocol 2026-07-28) cannot be sent %s during a call: answer with an input-required result", method)}
	}
	if err := a.refusal(method, p); err != nil {
		return err
	}
	params, err := json.Marshal(p)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: params: %v", method, err)}
	}
	actx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the upstream gave up on it
	defer stop()
	res, err := sdk.AskClient(actx, method, params)
	var ce *sdk.ClientError
	switch {
	case errors.As(err, &ce):
		return &jsonrpc.Error{Code: ce.Code, Message: ce.Message, Data: ce.Data}
	case err != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the gateway could not ask the client: %v", err)}
	}
	if err := json.Unmarshal(res, out); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the client's answer to %s cannot be read: %v", method, err)}
	}
	return nil
}

// askHandlers are the client options of a session of c that relay the
// upstream's sampling and elicitation requests.
func (c *conn) askHandlers(o *gomcp.ClientOptions) {
	o.Capabilities = c.caps
	if o.Capabilities == nil {
		o.Capabilities = upstreamCapabilities()
	}
	o.MultiRoundTrip = &gomcp.MultiRoundTripOptions{Disabled: true} // inputMiddleware
	// go-sdk declares sampling and elicitation for the handlers it is
	// given: a session that does not declare one has no handler, and
	// go-sdk answers such a request "method not found" itself.
	//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
	if o.Capabilities.Sampling != nil {
		o.CreateMessageWithToolsHandler = c.sampling
	}
	if o.Capabilities.Elicitation != nil {
		o.ElicitationHandler = c.elicitation
	}
}

// sampling relays the upstream's sampling/createMessage.
func (c *conn) sampling(ctx context.Context, req *gomcp.CreateMessageWithToolsRequest) (*gomcp.CreateMessageWithToolsResult, error) {
	var res gomcp.CreateMessageWithToolsResult
	if err := c.ask(ctx, nil, methodCreateMessage, req.Params, req.Params.Meta, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// elicitation relays the upstream's elicitation/create.
func (c *conn) elicitation(ctx context.Context, req *gomcp.ElicitRequest) (*gomcp.ElicitResult, error) {
	var res gomcp.ElicitResult
	if err := c.ask(ctx, nil, methodElicit, req.Params, req.Params.Meta, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// rootsMiddleware relays the upstream's roots/list, which the go-sdk
// client would answer from its own roots.
func (c *conn) rootsMiddleware(next gomcp.MethodHandler) gomcp.MethodHandler {
	return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
		if method != methodListRoots {
			return next(ctx, method, req)
		}
		p, _ := req.GetParams().(*gomcp.ListRootsParams)
		if p == nil {
			p = &gomcp.ListRootsParams{}
		}
		var res gomcp.ListRootsResult
		if err := c.ask(ctx, nil, method, p, p.Meta, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

// sessionlessUpstream reports whether s speaks the sessionless protocol
// (2026-07-28 or later).
func sessionlessUpstream(s *gomcp.ClientSession) bool {
	ir := s.InitializeResult()
	return ir != nil && ir.ProtocolVersion >= "2026-07-28"
}

// maxInputRounds bounds the input-required results of one request the
// adapter fulfils before it gives up (go-sdk's own client allows 10).
const maxInputRounds = 10

// inputMiddleware fulfils an upstream's input-required results (SEP-2322,
// 2026-07-28) of tools/call, prompts/get and resources/read: each input
// request goes to the client of the call (ask, the call's context), and
// the request is sent again with the responses and the upstream's request
// state, as it gave it. It stands in for go-sdk's own (disabled: it
// answers roots/list from the client's own roots).
func (c *conn) inputMiddleware(next gomcp.MethodHandler) gomcp.MethodHandler {
	return func(ctx context.Context, method string, req gomcp.Request) (gomcp.Result, error) {
		if method != "tools/call" && method != "prompts/get" && method != "resources/read" {
			return next(ctx, method, req)
		}
		for round := 1; ; round++ {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			asked, state, ok := inputRequired(res)
			if !ok {
				return res, nil
			}
			if round > maxInputRounds {
				return nil, fmt.Errorf("the upstream asked for input %d times in one %s", maxInputRounds, method)
			}
			if len(asked) == 0 {
				return nil, fmt.Errorf("the upstream answered %s with an input-required result without input requests (it is busy)", method)
			}
			a, _ := ctx.Value(askerKey{}).(*asker) // the call's, as it sends its request
			if a != nil && a.deferred {
				return res, nil // for the client to answer (inputRequired)
			}
			responses := gomcp.InputResponseMap{}
			for id, ir := range asked {
				resp, err := c.fulfil(ctx, a, ir)
				if err != nil {
					return nil, &inputRefused{id: id, err: err}
				}
				responses[id] = resp
			}
			if req, err = retryRequest(req, responses, state); err != nil {
				return nil, err
			}
		}
	}
}

// inputRefused is an input request of the upstream's that the call's
// client could not answer (it lacks the capability, or refused): the
// call fails as a tool error, never with the JSON-RPC error of that
// refusal as though the upstream had answered it (failure, mcp.go).
type inputRefused struct {
	id  string
	err error
}

func (e *inputRefused) Error() string {
	return fmt.Sprintf("input request %q of the upstream: %v", e.id, e.err)
}
func (e *inputRefused) Unwrap() error { return e.err }

// inputRequired is the input requests and request state of an
// input-required result; ok is false for any other result.
func inputRequired(res gomcp.Result) (gomcp.InputRequestMap, string, bool) {
	switch r := res.(type) {
	case *gomcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *gomcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *gomcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	}
	return nil, "", false
}

// fulfil asks the call's client one input request.
func (c *conn) fulfil(ctx context.Context, a *asker, ir gomcp.InputRequest) (gomcp.InputResponse, error) {
	switch p := ir.(type) {
	case *gomcp.ElicitParams:
		if (p.Mode == "url" || p.URL != "") && p.ElicitationID == "" {
			// A URL-mode elicitation of 2026-07-28 has no elicitationId,
			// which a client of 2025-11-25 requires of one.
			q := *p
			q.ElicitationID = newCallTag()
			p = &q
		}
		var res gomcp.ElicitResult
		return &res, c.ask(ctx, a, methodElicit, p, p.Meta, &res)
	case *gomcp.CreateMessageWithToolsParams:
		var res gomcp.CreateMessageWithToolsResult
		return &res, c.ask(ctx, a, methodCreateMessage, p, p.Meta, &res)
	case *gomcp.CreateMessageParams:
		var res gomcp.CreateMessageResult
		return &res, c.ask(ctx, a, methodCreateMessage, p, p.Meta, &res)
	case *gomcp.ListRootsParams:
		var res gomcp.ListRootsResult
		return &res, c.ask(ctx, a, methodListRoots, p, p.Meta, &res)
	}
	return nil, fmt.Errorf("unsupported input request %T", ir)
}

// retryRequest is req again with the input responses and request state.
func retryRequest(req gomcp.Request, responses gomcp.InputResponseMap, state string) (gomcp.Request, error) {
	r, ok := req.(*gomcp.ClientRequest[gomcp.Params]) // as the session's methods make them
	if !ok {
		return nil, fmt.Errorf("cannot send %T again with input responses", req)
	}
	var params gomcp.Params
	switch p := r.Params.(type) {
	case *gomcp.CallToolParams:
		q := *p
		q.InputResponses, q.RequestState = responses, state
		params = &q
	case *gomcp.GetPromptParams:
		q := *p
		q.InputResponses, q.RequestState = responses, state
		params = &q
	case *gomcp.ReadResourceParams:
		q := *p
		q.InputResponses, q.RequestState = responses, state
		params = &q
	default:
		return nil, fmt.Errorf("cannot send %T again with input responses", r.Params)
	}
	return &gomcp.ClientRequest[gomcp.Params]{Session: r.Session, Params: params}, nil
}

// inputRequired is the input-required result of a call for a client that
// takes it (asker.deferred): the upstream's input requests and request
// state as it gave them (the host seals the state).
func inputRequiredOf(u *upstream, res *gomcp.CallToolResult) (*sdk.Result, error) {
	ir, err := deferredInput(u, res.InputRequests, res.RequestState)
	if err != nil {
		return nil, err
	}
	return &sdk.Result{InputRequired: ir}, nil
}

// deferredInput is the upstream's input requests and request state as it
// gave them, for the client to answer.
func deferredInput(u *upstream, reqs gomcp.InputRequestMap, state string) (*sdk.InputRequired, error) {
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: u.label, Message: "the input requests of the input-required result cannot be encoded as JSON"}
	}
	return &sdk.InputRequired{Requests: b, State: state}, nil
}

// readInput is the asker of a resources/read or prompts/get whose host
// takes the upstream's input-required results for the client (nil when
// it does not: such a result then fails the request, as inputMiddleware
// can ask no one), with a retry's input responses and request state set
// on the request's params. A read is never asked during the request: the
// host asks a client of 2025-11-25 itself and sends the read again
// (host/published.go), a client of 2026-07-28 gets the result.
func readInput(ctx context.Context, u *upstream, in *sdk.InputResponses, responses *gomcp.InputResponseMap, state *string) (*asker, error) {
	if in != nil {
		var m gomcp.InputResponseMap
		if err := json.Unmarshal(in.Responses, &m); err != nil {
			return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label, Message: fmt.Sprintf("inputResponses: %v", err)}
		}
		*responses, *state = m, in.State
	}
	if k := newAsker(ctx); k != nil && k.deferred {
		return k, nil
	}
	return nil, nil
}

// context is ctx for a read's request with params on s: the asker's, for
// inputMiddleware, and for an upstream of the sessionless protocol the
// client's capabilities in params' _meta.
func (k *asker) context(ctx context.Context, s *gomcp.ClientSession, params gomcp.Params) context.Context {
	if k == nil {
		return ctx
	}
	if sessionlessUpstream(s) {
		m := params.GetMeta()
		if m == nil {
			m = map[string]any{}
		}
		m[gomcp.MetaKeyClientCapabilities] = k.raw
		params.SetMeta(m)
	}
	return context.WithValue(ctx, askerKey{}, k)
}

// inputRequired is the input-required answer of a read whose result
// needs input (needs, with the upstream's requests and state) for k's
// client to answer; nil when it needs none or k is nil.
func (k *asker) inputRequired(u *upstream, needs bool, reqs gomcp.InputRequestMap, state string) (*sdk.InputRequired, error) {
	if k == nil || !needs {
		return nil, nil
	}
	return deferredInput(u, reqs, state)
}

// withInput sets the client's input responses of a call sent again on
// its tools/call params.
func withInput(u *upstream, params *gomcp.CallToolParams, in *sdk.InputResponses) error {
	if in == nil {
		return nil
	}
	var m gomcp.InputResponseMap
	if err := json.Unmarshal(in.Responses, &m); err != nil {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label, Message: fmt.Sprintf("inputResponses: %v", err)}
	}
	params.InputResponses, params.RequestState = m, in.State
	return nil
}

// sessionProtocol is the protocol version of the sessions of clients of
// the older generation (with MCP sessions, asked during a call).
const sessionProtocol = "2025-11-25"

// callConn is the connection of a call of the client k: the upstream's
// shared one, or one whose session declares k's client's capabilities
// (asker.declared), shared by the calls of clients that declare the same.
// An upstream of the sessionless generation (2026-07-28) over Streamable
// HTTP, or any for a client of 2026-07-28, gets each call's client
// capabilities in its _meta and keeps the shared connection. A stdio
// upstream whose session speaks the sessionless generation gets, for the
// calls of clients the host asks during the call, a second child of the
// same command whose session asks for 2025-11-25: so a stdio server,
// which serves both generations, sees each client's call in that
// client's generation, as it would talking to it directly (go-sdk
// servers refuse requests of their own during a call on 2026-07-28). The
// price: such requests, read off any call's stream, reach a call only
// while it is the only one in flight (logs.go), where the input-required
// results of a 2026-07-28 session are each their call's. A stateless
// HTTP upstream cannot ask during a call in either generation.
func (a *adapter) callConn(ctx context.Context, u *upstream, k *asker) *conn {
	c := a.pool.get(u)
	if k == nil {
		return c
	}
	s, err := c.open(ctx)
	if err != nil {
		return c // the call fails or goes on as it would
	}
	pinned := ""
	if sessionlessUpstream(s) {
		if k.deferred || u.command == "" {
			return c
		}
		pinned = sessionProtocol
	}
	caps := k.declared()
	key, err := json.Marshal(caps)
	if err != nil {
		return c
	}
	own, _ := a.pool.conns.GetOrPut(u.key+"\x00"+pinned+"\x00"+string(key), func() *conn {
		return &conn{up: u, routes: &a.pool.progress, watch: &a.pool.watch, pinned: pinned, caps: caps}
	})
	return own
}

// inputParams is the message b with "params": {} given to each input
// request of an input-required result that has none (a roots/list input
// request may come without, as the TypeScript SDK v2 sends it): go-sdk's
// client fails to decode the whole result otherwise. Any other message is
// b itself.
func inputParams(b []byte) []byte {
	if !bytes.Contains(b, []byte(`"inputRequests"`)) {
		return b
	}
	var msg, result map[string]json.RawMessage
	var reqs map[string]map[string]json.RawMessage
	if json.Unmarshal(b, &msg) != nil || json.Unmarshal(msg["result"], &result) != nil || json.Unmarshal(result["inputRequests"], &reqs) != nil {
		return b
	}
	fixed := false
	for _, r := range reqs {
		if r != nil && (len(r["params"]) == 0 || string(r["params"]) == "null") {
			r["params"], fixed = json.RawMessage("{}"), true
		}
	}
	if !fixed {
		return b
	}
	var err error
	if result["inputRequests"], err = json.Marshal(reqs); err != nil {
		return b
	}
	if msg["result"], err = json.Marshal(result); err != nil {
		return b
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return b
	}
	return out
}
