package host

import (
	"context"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// invokeAdapter makes a unary adapter call. When the client asked for
// progress and the adapter reports it (Capabilities.Progress), the
// adapter's progress reports are relayed to req.Progress, redacted, as
// they come, before the answer.
func (h *Host) invokeAdapter(ctx context.Context, c *client.Client, op *boundOp, req CallRequest, ar *sdk.Request) (*sdk.Result, error) {
	desc := op.sup.Description()
	if req.Progress == nil || desc == nil || !desc.Capabilities.Progress {
		return c.Invoke(ctx, ar)
	}
	return c.InvokeWithProgress(ctx, ar, desc.Capabilities, func(p sdk.Progress) {
		req.Progress(ctx, ProgressChunk{Relayed: true, Progress: p.Progress, Total: p.Total,
			Message: req.upstream.redactString(h.redact.String(p.Message))})
	})
}
