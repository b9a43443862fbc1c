package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Stream implements sdk.Streamer: a window over an upstream tool that
// reports progress. The call is made with a progress token of the
// adapter's own; each notifications/progress the upstream sends for it is
// one item, and the call's result ends the stream (an isError result or a
// failure ends it with that error). The host bounds the window and
// cancels the stream at its limits, which cancels the upstream call.
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	u, err := a.target(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tok, sink, done := a.pool.progress.open()
	defer done()
	params := callParams(u.tool, req)
	params.SetProgressToken(tok)
	type outcome struct {
		res *gomcp.CallToolResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		res, err := a.call(ctx, u, params)
		out <- outcome{res, err}
	}()
	var reported int64
	complete := false // the last notification reported the total
	gap := func() error {
		if n := sink.dropped.Load(); n > reported {
			if err := send.Gap(fmt.Sprintf("%d progress notifications were dropped: %s sent them faster than they were read", n-reported, u.label)); err != nil {
				return err
			}
			reported = n
		}
		return nil
	}
	forward := func(p *gomcp.ProgressNotificationParams) error {
		if err := gap(); err != nil {
			return err
		}
		complete = p.Total > 0 && p.Progress >= p.Total
		return send.Item(sdk.Item{Data: progressItem(p)})
	}
	for {
		select {
		case p := <-sink.ch:
			if forward(p) != nil {
				return nil // the host has gone
			}
		case o := <-out:
			// The upstream sent its progress before its result, but the
			// client session hands notifications over apart from
			// responses: pass on the ones still coming.
			if !complete && settle(ctx, sink.ch, forward) != nil || gap() != nil {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err() // the host ended the window
			}
			if o.err != nil {
				return a.failure(ctx, u, o.err)
			}
			if o.res.IsError {
				_, err := result(u, o.res)
				return err
			}
			return nil
		}
	}
}

// settleQuiet and settleMax bound how long a stream waits, after the
// upstream's result, for progress notifications the client session has not
// handed over yet: until none came for settleQuiet, at most settleMax.
const (
	settleQuiet = 200 * time.Millisecond
	settleMax   = 2 * time.Second
)

// settle forwards the notifications that arrive after the call's result,
// until they stop or one reports the total.
func settle(ctx context.Context, ch <-chan *gomcp.ProgressNotificationParams, forward func(*gomcp.ProgressNotificationParams) error) error {
	quiet := time.NewTimer(settleQuiet)
	defer quiet.Stop()
	limit := time.NewTimer(settleMax)
	defer limit.Stop()
	for {
		select {
		case p := <-ch:
			if err := forward(p); err != nil {
				return err
			}
			if p.Total > 0 && p.Progress >= p.Total {
				return nil
			}
			quiet.Reset(settleQuiet)
		case <-quiet.C:
			return nil
		case <-limit.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progressItem is the item of a progress notification: its message when
// that is JSON (so that paths select in it), else the message as a
// string; a notification without a message is {"progress": n, "total": t}.
func progressItem(p *gomcp.ProgressNotificationParams) json.RawMessage {
	if p.Message == "" {
		m := map[string]any{"progress": p.Progress}
		if p.Total != 0 {
			m["total"] = p.Total
		}
		b, _ := json.Marshal(m)
		return b
	}
	if json.Valid([]byte(p.Message)) {
		return json.RawMessage(p.Message)
	}
	b, _ := json.Marshal(p.Message)
	return b
}
