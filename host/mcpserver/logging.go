package mcpserver

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// metaLogLevel is the _meta key of a request's logging level in protocol
// versions that have no logging/setLevel (2026-07-28).
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// relayLogs makes a tools/call relay the log messages its upstream sends
// for it (an MCP upstream's notifications/message) to the client, when the
// client asked for log messages: a level in the request's _meta, else
// the level its session set with logging/setLevel. The SDK's session
// checks the level again as it sends (ServerSession.Log), on the request's
// stream.
func (ep *Endpoint) relayLogs(req *mcp.CallToolRequest, cr *host.CallRequest) {
	if req.Session == nil {
		return
	}
	level, _ := req.Params.GetMeta()[metaLogLevel].(string)
	if level == "" && req.Session.ID() != "" {
		if ls := ep.replicas.get(req.Session.ID()); ls != nil {
			ls.mu.Lock()
			level = ls.logLevel
			ls.mu.Unlock()
		}
	}
	if !slices.Contains(logLevels, mcp.LoggingLevel(level)) {
		return
	}
	cr.LogLevel = level
	cr.Log = func(ctx context.Context, m host.LogMessage) {
		//nolint:staticcheck // logging is deprecated as of 2026-07-28, and still served before it
		err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(m.Level), Logger: m.Logger, Data: json.RawMessage(m.Data)})
		if err != nil {
			ep.logger.Debug("log message not sent", zap.String("tool", cr.Tool.Name()), zap.Error(err))
		}
	}
}
