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
	if u.task {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: u.label, Message: "config.task: " + errTaskWindow}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := false
	res, err := a.relayedCall(ctx, u, callParams(u.tool, req), relay{
		progress: func(p *gomcp.ProgressNotificationParams) error {
			err := send.Item(sdk.Item{Data: progressItem(p)})
			if err != nil {
				gone = true
				cancel() // the host has gone: end the upstream call
			}
			return err
		},
		dropped: func(n int64) error {
			err := send.Gap(fmt.Sprintf("%d progress notifications were dropped: %s sent them faster than they were read", n, u.label))
			if err != nil {
				gone = true
				cancel()
			}
			return err
		}})
	switch {
	case gone:
		return nil
	case ctx.Err() != nil:
		return ctx.Err() // the host ended the window
	case err != nil:
		return a.failure(ctx, u, err)
	case res.IsError:
		_, err := result(u, res)
		return err
	}
	return nil
}

// relay is what a call passes on while it runs: the upstream's progress
// (progress, nil for none, with dropped told how many were dropped) and
// its log messages (log, nil for none, at logLevel and above).
type relay struct {
	progress func(*gomcp.ProgressNotificationParams) error
	dropped  func(int64) error
	log      func(*gomcp.LoggingMessageParams)
	logLevel string
	// ask: the call's client may be asked the upstream's requests (ask.go).
	ask *asker
}

// relayedCall makes a tools/call and hands what the upstream reports for
// it to r, in the calling goroutine, until the call answers. With
// r.progress, the call carries a progress token of the adapter's own and
// each notifications/progress for it goes to r.progress; before a
// notification, r.dropped learns how many were dropped since the last one
// (and once more at the end). An error of either stops the hand-over, not
// the call. With r.log, the call is tagged (logs.go) and the upstream's
// log messages for it go to r.log. The client session hands notifications
// over apart from responses, so some may still come after the answer:
// progress is awaited (settle) unless the last one reported the total,
// log messages until the session has handed over those read before the
// answer.
func (a *adapter) relayedCall(ctx context.Context, u *upstream, params *gomcp.CallToolParams, r relay) (*gomcp.CallToolResult, error) {
	var pch <-chan *gomcp.ProgressNotificationParams
	var sink *progressSink
	if r.progress != nil {
		tok, s, done := a.pool.progress.open()
		defer done()
		params.SetProgressToken(tok)
		sink, pch = s, s.ch
	}
	c := a.callConn(ctx, u, r.ask) // ask.go
	var logs *logSink
	var lch <-chan *gomcp.LoggingMessageParams
	if r.log != nil || r.ask != nil {
		tag := newCallTag()
		ctx = context.WithValue(ctx, callTagKey{}, tag)
		if params.Meta == nil {
			params.Meta = gomcp.Meta{}
		}
		if r.log != nil {
			s, done := c.logs.openAs(tag)
			defer done()
			params.Meta[metaLogLevel] = r.logLevel
			logs, lch = s, s.ch
		}
		if r.ask != nil {
			defer c.logs.openAsker(tag, r.ask)()
			ctx = context.WithValue(ctx, askerKey{}, r.ask)
		}
	}
	type outcome struct {
		res *gomcp.CallToolResult
		err error
	}
	out := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { out <- o }()
		defer sdk.Recover("mcp adapter: tools/call", &o.err)
		o.res, o.err = a.callOn(ctx, c, u, params, r.logLevel)
	}()
	var reported int64
	seen, complete, stopped := false, false, false
	gap := func() error {
		if sink == nil {
			return nil
		}
		if n := sink.dropped.Load(); n > reported && !stopped {
			if err := r.dropped(n - reported); err != nil {
				stopped = true
				return err
			}
			reported = n
		}
		return nil
	}
	hand := func(p *gomcp.ProgressNotificationParams) error {
		seen, complete = true, p.Total > 0 && p.Progress >= p.Total
		if stopped || gap() != nil {
			return nil
		}
		if err := r.progress(p); err != nil {
			stopped = true
		}
		return nil
	}
	for {
		select {
		case p := <-pch:
			_ = hand(p)
		case l := <-lch:
			r.log(l)
		case o := <-out:
			var target int64
			if logs != nil {
				target = logs.read.Load()
			}
			if pch != nil && !complete {
				_ = settle(ctx, pch, seen, hand)
			}
			if logs != nil {
				logs.await(ctx, target, r.log)
			}
			_ = gap()
			return o.res, o.err
		}
	}
}

// settleQuiet and settleMax bound how long a call waits, after the
// upstream's result, for progress notifications the client session has not
// handed over yet: until none came for settleQuiet (settleFirst while none
// came at all), at most settleMax. The upstream sent them before its
// result, so they are already read and queued: the wait is for a
// goroutine of this process, not for the network.
const (
	settleFirst = 100 * time.Millisecond
	settleQuiet = 200 * time.Millisecond
	settleMax   = 5 * time.Second
)

// settle forwards the notifications that arrive after the call's result,
// until they stop or one reports the total; seen says whether some came
// before the result.
func settle(ctx context.Context, ch <-chan *gomcp.ProgressNotificationParams, seen bool, forward func(*gomcp.ProgressNotificationParams) error) error {
	first := settleQuiet
	if !seen {
		first = settleFirst
	}
	quiet := time.NewTimer(first)
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
