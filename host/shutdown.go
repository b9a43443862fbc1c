package host

import (
	"context"
	"errors"
	"sync"
)

// errShutdown ends a runner because the gateway process stops.
var errShutdown = errors.New("the gateway is stopping")

// shutdownRefusal is the text of a start refused while the process stops.
const shutdownRefusal = "this gateway replica is stopping and starts nothing new; try again in a moment (another replica serves the call)"

// runners are the stream session readers and job runners of this process,
// whichever config's Host started them: they outlive a reload, so only the
// process's end stops them all.
var runners = &runnerSet{live: map[*runner]struct{}{}}

type runnerSet struct {
	mu       sync.Mutex
	stopping bool
	live     map[*runner]struct{}
	done     sync.WaitGroup
}

// runner is one entry of the set, from before its entity exists until its
// end is recorded.
type runner struct {
	set    *runnerSet
	cancel context.CancelCauseFunc
}

// enter registers a runner about to start; ok is false once the process
// is stopping.
func (rs *runnerSet) enter() (r *runner, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopping {
		return nil, false
	}
	r = &runner{set: rs}
	rs.live[r] = struct{}{}
	rs.done.Add(1)
	return r, true
}

// bind gives the runner the cancel of its context; if the process began
// stopping meanwhile, it is cancelled at once.
func (r *runner) bind(cancel context.CancelCauseFunc) {
	r.set.mu.Lock()
	defer r.set.mu.Unlock()
	r.cancel = cancel
	if r.set.stopping {
		cancel(errShutdown)
	}
}

// leave ends the entry: the runner has recorded its end (or never ran).
func (r *runner) leave() {
	r.set.mu.Lock()
	delete(r.set.live, r)
	r.set.mu.Unlock()
	r.set.done.Done()
}

// StopRunners ends every stream session reader and async job runner of the
// process and waits, until ctx ends, for each to record its end: a session
// becomes stopped with end_reason "shutdown", a job failed with error code
// "shutdown" (an upstream job it follows is cancelled through its
// cancel_operation). From then on this process refuses to start sessions
// and jobs. Call it when the process exits, before the HTTP servers wait
// for their requests: a reader's open upstream request would hold them.
func StopRunners(ctx context.Context) error {
	return runners.stop(ctx)
}

func (rs *runnerSet) stop(ctx context.Context) error {
	rs.mu.Lock()
	rs.stopping = true
	for r := range rs.live {
		if r.cancel != nil {
			r.cancel(errShutdown)
		}
	}
	rs.mu.Unlock()
	done := make(chan struct{})
	go func() { rs.done.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// joinRelease is a release that calls a, then b.
func joinRelease(a, b func()) func() { return func() { a(); b() } }
