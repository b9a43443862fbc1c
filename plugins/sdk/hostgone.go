package sdk

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/stats"
)

// ErrHostGone is the cause (context.Cause) of the context of a resumable
// call (WantsResume) that ended because the host's connection did — the
// gateway process died — rather than because the host cancelled the call.
// The adapter then leaves the upstream work it reported (ReportResume)
// running: another replica resumes it. HostGone tests for it.
var ErrHostGone = errors.New("the host's connection ended during the call")

// HostGone reports whether the call whose context ctx is ended because
// its host went away (ErrHostGone), as only a resumable call's can.
func HostGone(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrHostGone)
}

// hostGoneWait bounds how long a resumable call's context waits, once
// the call's gRPC stream has ended, to learn whether its connection ended
// with it (a host that died: gRPC ends every stream of a connection just
// before it reports the connection's end) or the host cancelled the call
// alone. A cancel of such a call reaches the adapter this much later.
const hostGoneWait = 250 * time.Millisecond

// connWatch is the gRPC stats handler of the adapter's server: it marks
// each connection's context (from which its calls' derive) with a
// connState ended once the connection has.
type connWatch struct{}

type connStateKey struct{}

type connState struct {
	once  sync.Once
	ended chan struct{}
}

func (connWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connStateKey{}, &connState{ended: make(chan struct{})})
}

func (connWatch) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); ok {
		if c, _ := ctx.Value(connStateKey{}).(*connState); c != nil {
			c.once.Do(func() { close(c.ended) })
		}
	}
}

func (connWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connWatch) HandleRPC(context.Context, stats.RPCStats)                       {}

// outliveHost is the context of a resumable call on the gRPC stream
// context parent: ended as parent is (its deadline kept), but with cause
// ErrHostGone when the connection ended with the stream.
func outliveHost(parent context.Context) (context.Context, func()) {
	c, _ := parent.Value(connStateKey{}).(*connState)
	if c == nil {
		return parent, func() {} // a server without connWatch
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stopDeadline := context.CancelFunc(func() {})
	if d, ok := parent.Deadline(); ok {
		ctx, stopDeadline = context.WithDeadline(ctx, d)
	}
	stop := context.AfterFunc(parent, func() {
		wait := time.NewTimer(hostGoneWait)
		defer wait.Stop()
		select {
		case <-c.ended:
			cancel(ErrHostGone)
		case <-wait.C:
			cancel(context.Cause(parent))
		}
	})
	return ctx, func() {
		stop()
		stopDeadline()
		cancel(nil)
	}
}
