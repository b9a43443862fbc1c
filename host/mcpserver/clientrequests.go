package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// The MCP methods an upstream may ask the client of a call (CallRequest.Ask).
const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
)

// relayClientRequests makes a tools/call pass its upstream's requests of
// the client (sampling, elicitation, roots) on to the client, on the
// client's MCP session with the call's context (so on the call's own
// stream), when there is a session to ask on: a stateful session of
// 2025-11-25 or before. A sessionless request (2026-07-28, or any request
// to a stateless endpoint) gets none relayed: a 2026-07-28 request takes
// an input-required result instead (inputRequired), and the adapter
// answers its upstream that any other client cannot be asked. A client
// that declared none of the capabilities is offered too, with none: the
// adapter then refuses each request, and sends the call in the client's
// generation (plugins/mcp callConn).
func (ep *Endpoint) relayClientRequests(req *mcp.CallToolRequest, cr *host.CallRequest) {
	r := clientOf(req.Session, req.Extra, req.Params.GetMeta(), req.Params.RequestState, req.Params.InputResponses)
	cr.Ask, cr.ClientCapabilities, cr.InputRequired, cr.Input = r.ask, r.caps, r.inputRequired, r.input
	if ss := req.Session; r.ask != nil && ss != nil {
		cr.ElicitationComplete = func(ctx context.Context, id string) {
			if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
				ep.logger.Debug("elicitation complete notification not sent", zap.Error(err))
			}
		}
	}
}

// relayPublicationInput does for a resources/read or prompts/get what
// relayClientRequests does for a call: the host asks a client on an MCP
// session the upstream's input requests itself, and a 2026-07-28 client
// gets them as an input-required result (publicationInputResult).
func relayPublicationInput(ss *mcp.ServerSession, extra *mcp.RequestExtra, meta map[string]any, state string, responses mcp.InputResponseMap, pr *host.PublicationRequest) {
	r := clientOf(ss, extra, meta, state, responses)
	pr.Ask, pr.ClientCapabilities, pr.InputRequired, pr.Input = r.ask, r.caps, r.inputRequired, r.input
}

// clientRelay is how the client of a request is asked (host.CallRequest's
// Ask, ClientCapabilities, InputRequired and Input).
type clientRelay struct {
	ask           func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	caps          json.RawMessage
	inputRequired bool
	input         *host.InputAnswer
}

// clientOf is how the client of a request on ss (with extra, and its
// params' _meta, requestState and inputResponses) is asked: on its
// session, or for a sessionless request by an input-required result.
func clientOf(ss *mcp.ServerSession, extra *mcp.RequestExtra, meta map[string]any, state string, responses mcp.InputResponseMap) clientRelay {
	if sessionless(extra) {
		return inputRequired(meta, state, responses)
	}
	if ss == nil || ss.ID() == "" {
		return clientRelay{}
	}
	ip := ss.InitializeParams()
	if ip == nil {
		return clientRelay{}
	}
	caps := ip.Capabilities
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	b, err := declaredCapabilities(caps)
	if err != nil {
		return clientRelay{}
	}
	return clientRelay{caps: b, ask: func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		res, err := askClient(ctx, ss, method, params)
		if err != nil {
			return nil, clientError(method, err)
		}
		return json.Marshal(res)
	}}
}

// inputRequired makes a sessionless request (2026-07-28) take an
// input-required result for what its upstream would ask the client, with
// the client's capabilities of the request's _meta, and passes a retry's
// input responses and request state on (host/input.go checks the state).
func inputRequired(meta map[string]any, state string, responses mcp.InputResponseMap) clientRelay {
	caps, ok := meta[mcp.MetaKeyClientCapabilities]
	if !ok {
		caps = map[string]any{}
	}
	b, err := json.Marshal(caps)
	if err != nil {
		return clientRelay{}
	}
	r := clientRelay{caps: b, inputRequired: true}
	if state == "" && len(responses) == 0 {
		return r
	}
	raw, err := json.Marshal(responses)
	if err != nil {
		raw = nil
	}
	r.input = &host.InputAnswer{Responses: raw, State: state}
	return r
}

// requestStateError is err, or the invalid-params error of a retry whose
// requestState the host did not issue (a tampered or foreign state).
func requestStateError(err error) error {
	if errors.Is(err, host.ErrInvalidRequestState) {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return err
}

// inputRequiredResult is the tools/call result of a host result that
// needs the client's input first.
func inputRequiredResult(res *host.Result) (*mcp.CallToolResult, error) {
	m, err := inputRequests(res.InputRequests)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: m, RequestState: res.RequestState}, nil
}

// inputRequests are the input requests of a host answer that needs the
// client's input first (the inputRequests object as JSON).
func inputRequests(raw json.RawMessage) (mcp.InputRequestMap, error) {
	var m mcp.InputRequestMap
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the upstream's input requests cannot be passed on: %v", err)}
	}
	return m, nil
}

// clientCapabilities are a client's capabilities as it declared them:
// with roots only when it declared roots (go-sdk's ClientCapabilities
// always marshals its Roots field, its issue #607).
type clientCapabilities struct {
	mcp.ClientCapabilities
	//nolint:staticcheck // roots are deprecated as of 2026-07-28, and still served before them
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// declaredCapabilities is caps as the client declared them (roots only
// when it declared roots).
func declaredCapabilities(caps *mcp.ClientCapabilities) (json.RawMessage, error) {
	return json.Marshal(clientCapabilities{ClientCapabilities: *caps, Roots: caps.RootsV2})
}

// withDeclaredCapabilities is initialize params as JSON (b) with their
// capabilities as the client declared them, so that another replica
// knows whether it declared roots (restoreRoots).
func withDeclaredCapabilities(b json.RawMessage, caps *mcp.ClientCapabilities) json.RawMessage {
	var m map[string]json.RawMessage
	if caps == nil || json.Unmarshal(b, &m) != nil {
		return b
	}
	c, err := declaredCapabilities(caps)
	if err != nil {
		return b
	}
	m["capabilities"] = c
	if out, err := json.Marshal(m); err == nil {
		return out
	}
	return b
}

// restoreRoots sets the roots capability of params restored from raw,
// their JSON, as declared there (go-sdk's own decoding leaves it unset).
func restoreRoots(raw json.RawMessage, p *mcp.InitializeParams) {
	var v struct {
		Capabilities struct {
			Roots *mcp.RootCapabilities `json:"roots"` //nolint:staticcheck // deprecated as of 2026-07-28, served before
		} `json:"capabilities"`
	}
	if p.Capabilities != nil && json.Unmarshal(raw, &v) == nil && v.Capabilities.Roots != nil {
		p.Capabilities.RootsV2 = v.Capabilities.Roots
	}
}

// askClient sends one request to the client of ss.
func askClient(ctx context.Context, ss *mcp.ServerSession, method string, params json.RawMessage) (any, error) {
	switch method {
	case methodCreateMessage:
		var p mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalidParams(method, err)
		}
		//nolint:staticcheck // sampling is deprecated as of 2026-07-28, and still served before it
		return ss.CreateMessageWithTools(ctx, &p)
	case methodElicit:
		var p mcp.ElicitParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalidParams(method, err)
		}
		return ss.Elicit(ctx, &p)
	case methodListRoots:
		var p mcp.ListRootsParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalidParams(method, err)
		}
		//nolint:staticcheck // roots are deprecated as of 2026-07-28, and still served before them
		return ss.ListRoots(ctx, &p)
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the gateway relays no %q requests to its clients", method)}
}

func invalidParams(method string, err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: params: %v", method, err)}
}

// clientError is the host's form of the error of a client request: the
// client's own JSON-RPC error as it answered it, any other failure (the
// session closed, the call's context ended, the SDK refused to send) as
// an internal error saying so.
func clientError(method string, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return &host.ClientError{Code: rpc.Code, Message: rpc.Message, Data: rpc.Data}
	}
	return &host.ClientError{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s could not be sent to the client: %v", method, err)}
}
