package host

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// LogMessage is a log message an upstream sent for a call: an MCP
// logging level, the logger's name (possibly empty) and the data as a
// JSON value, redacted.
type LogMessage struct {
	Level  string
	Logger string
	Data   json.RawMessage
}

// invokeAdapter makes a unary adapter call. When the client asked for
// progress and the adapter reports it (Capabilities.Progress), the
// adapter's progress reports are relayed to req.Progress, redacted, as
// they come, before the answer; likewise the upstream's log messages to
// req.Log when the client set a logging level and the adapter relays them
// (Capabilities.Log), and the call's resume states to req.onResume when
// the adapter resumes calls (Capabilities.Resume).
func (h *Host) invokeAdapter(ctx context.Context, c *client.Client, op *boundOp, req CallRequest, ar *sdk.Request) (*sdk.Result, error) {
	desc := op.sup.Description()
	ask := (req.Ask != nil || req.InputRequired) && len(req.ClientCapabilities) > 0 && desc != nil && desc.Capabilities.ClientRequests
	resume := req.onResume != nil && desc != nil && desc.Capabilities.Resume
	if desc == nil || !desc.Capabilities.Progress || req.Progress == nil && (req.Log == nil || !desc.Capabilities.Log) && !ask && !resume {
		return c.Invoke(ctx, ar)
	}
	var r client.Relay
	if resume {
		r.Resume = func(state json.RawMessage) { req.onResume(h.redactLogData(req, state)) }
	}
	if req.Progress != nil {
		r.Progress = func(p sdk.Progress) {
			req.Progress(ctx, ProgressChunk{Relayed: true, Progress: p.Progress, Total: p.Total,
				Message: req.upstream.redactString(h.redact.String(p.Message))})
		}
	}
	if req.Log != nil {
		r.LogLevel = req.LogLevel
		r.Log = func(m sdk.LogMessage) {
			req.Log(ctx, LogMessage{Level: m.Level, Logger: req.upstream.redactString(h.redact.String(m.Logger)),
				Data: h.redactLogData(req, m.Data)})
		}
	}
	if ask && req.Ask == nil {
		r.ClientCapabilities, r.InputRequired = req.ClientCapabilities, true
	} else if ask {
		r.ClientCapabilities = req.ClientCapabilities
		r.Ask = func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
			res, err := req.Ask(ctx, method, h.redactLogData(req, params))
			var ce *ClientError
			if errors.As(err, &ce) {
				return nil, &sdk.ClientError{Code: ce.Code, Message: ce.Message, Data: ce.Data}
			}
			return res, err
		}
	}
	return c.InvokeRelayed(ctx, ar, desc.Capabilities, r)
}

// redactLogData redacts a log message's data: the secrets the host knows
// and the call's upstream credential, in every form they may take in
// JSON. Data that is not JSON is taken as a string.
func (h *Host) redactLogData(req CallRequest, data json.RawMessage) json.RawMessage {
	if !json.Valid(data) {
		b, _ := json.Marshal(string(data))
		data = b
	}
	data = h.redact.JSON(data)
	if req.upstream != nil {
		data = req.upstream.redactor.JSON(data)
	}
	return data
}
