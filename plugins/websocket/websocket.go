package websocket

import (
	"context"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Name is the adapter's name as used in operations files.
const Name = "websocket"

// version is the adapter's build version, reported by Describe.
const version = "0.1.0"

// adapter is the WebSocket adapter, safe for concurrent use.
type adapter struct {
	configs *sdk.Config[configFields, *config]
}

var (
	_ sdk.Adapter            = (*adapter)(nil)
	_ sdk.OperationValidator = (*adapter)(nil)
	_ sdk.OperationExpander  = (*adapter)(nil)
	_ sdk.Streamer           = (*adapter)(nil)
)

// New returns the WebSocket adapter. The value also implements
// sdk.OperationValidator, sdk.OperationExpander and sdk.Streamer.
func New() sdk.Adapter {
	return &adapter{configs: newConfigs()}
}

// Describe implements sdk.Adapter. The adapter is a stream source only:
// windows, sessions and async jobs read its Stream.
func (a *adapter) Describe(context.Context) (*sdk.Description, error) {
	return a.configs.Describe(sdk.Description{Name: Name, Version: version, Protocols: []string{"ws", "wss"}, Modes: []sdk.Mode{sdk.ModeWindow}, Egress: true})
}

// ValidateOperation implements sdk.OperationValidator: nil for a good
// config, otherwise diagnostics naming the field. Diagnostics never quote
// config values.
func (a *adapter) ValidateOperation(_ context.Context, op *sdk.Operation) []sdk.Diagnostic {
	return a.configs.Get(op).Diagnostics()
}

// ExpandOperation implements sdk.OperationExpander: the entry is one
// tool whose input schema is derived from the {{variables}} of the url
// and the messages. An input_schema written in the operations file wins.
func (a *adapter) ExpandOperation(_ context.Context, op *sdk.Operation) ([]sdk.Tool, []sdk.Diagnostic) {
	p := a.configs.Get(op)
	if p.Err() != nil {
		return nil, p.Diagnostics()
	}
	return []sdk.Tool{{InputSchema: p.Value.inputSchema, ResumesStream: p.Value.resumes}}, nil
}

// Invoke implements sdk.Adapter. A WebSocket feed has no request-response
// call: its operations are streams (mode window, session or async_job, read
// through Stream); the host only invokes a request_response operation.
func (a *adapter) Invoke(_ context.Context, req *sdk.Request) (*sdk.Result, error) {
	p := a.configs.Get(&req.Operation)
	if p.Err() != nil {
		return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	return nil, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: p.Value.upstream,
		Message: "a WebSocket operation is a stream: give it mode window, session or async_job with transport_behavior server_stream (not request_response)"}
}

// Stream implements sdk.Streamer: it connects, subscribes and sends every
// message that passes the filter as an item until the host cancels (a
// window limit, a session stop), the upstream closes normally or the
// connection is lost for good. A lost connection is reopened and
// resubscribed per the reconnect policy, with a gap event each time.
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) (err error) {
	p := a.configs.Get(&req.Operation)
	if p.Err() != nil {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	cfg := p.Value
	args, err := decodeArgs(req.Arguments)
	if err != nil {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: cfg.upstream, Message: err.Error()}
	}
	timeout := req.Operation.Timeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	s := &stream{cfg: cfg, vars: vars{args: args, cursor: req.Cursor}, send: send, timeout: timeout}
	err = s.run(ctx)
	if ctx.Err() != nil {
		return nil // the host ended the stream
	}
	return err
}
