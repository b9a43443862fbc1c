package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Observer sees every Invoke and Stream call of a client before it is
// sent, and may adjust the request's context (the host sets the trace
// context of its span of the call there). The returned function, when
// not nil, is called once with the call's outcome: nil on success, an
// *sdk.UpstreamError, an *Error, or for a stream abandoned before its end
// the error of the context that ended it. rpc is "invoke" or "stream".
type Observer func(ctx context.Context, rpc string, req *sdk.Request) (done func(error))

// Observe makes o see the client's calls; set it before the first call.
func (c *Client) Observe(o Observer) { c.observer = o }

// observe starts the observation of a call; the result is never nil.
func (c *Client) observe(ctx context.Context, rpc string, req *sdk.Request) func(error) {
	if c.observer == nil {
		return func(error) {}
	}
	if done := c.observer(ctx, rpc, req); done != nil {
		return done
	}
	return func(error) {}
}

// streamDone reports a stream's outcome once: at its end (io.EOF is
// success), at its first error, or when its context ends first (a caller
// that stops reading cancels it).
type streamDone struct {
	once sync.Once
	done func(error)
	mu   sync.Mutex
	stop func() bool
}

func newStreamDone(ctx context.Context, done func(error)) *streamDone {
	d := &streamDone{done: done}
	d.mu.Lock() // the function may run before AfterFunc returns
	defer d.mu.Unlock()
	d.stop = context.AfterFunc(ctx, func() { d.report(context.Cause(ctx)) })
	return d
}

func (d *streamDone) report(err error) {
	if d == nil {
		return
	}
	d.once.Do(func() {
		d.mu.Lock()
		stop := d.stop
		d.mu.Unlock()
		stop()
		if errors.Is(err, io.EOF) {
			err = nil
		}
		d.done(err)
	})
}
