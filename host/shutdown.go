package host

import (
	"context"
	"errors"
	"sync"
)

// errShutdown ends a runner because the gateway process stops.
var errShutdown = errors.New("the gateway is stopping")

// errEndpointRemoved ends a runner because a reload left no config serving
// the endpoint that started it.
var errEndpointRemoved = errors.New("a configuration reload removed the endpoint")

// endpointRemovedMessage is what the client reads of a session or job its
// endpoint's removal ended.
const endpointRemovedMessage = "a configuration reload removed the endpoint that started it; start it again on an endpoint that serves the operation"

// shutdownRefusal is the text of a start refused while the process stops.
const shutdownRefusal = "this gateway replica is stopping and starts nothing new; try again in a moment (another replica serves the call)"

// removedRefusal is the text of a start refused by a host whose endpoint
// a reload removed (a request that was under way during the reload).
const removedRefusal = "this endpoint was removed by a configuration reload and starts nothing new"

// runners are the stream session readers and job runners of this process,
// whichever config's Host started them: they outlive a reload that keeps
// their endpoint (see HoldEndpoint), so only the process's end, or a
// reload that removes their endpoint, stops them.
var runners = &runnerSet{live: map[*runner]struct{}{}, held: map[string]int{}}

type runnerSet struct {
	mu       sync.Mutex
	stopping bool
	live     map[*runner]struct{}
	// held counts, per endpoint, the loaded configs serving it.
	held map[string]int
	done sync.WaitGroup
}

// runner is one entry of the set, from before its entity exists until its
// end is recorded.
type runner struct {
	set      *runnerSet
	endpoint string // Options.Endpoint of the host that started it
	cancel   context.CancelCauseFunc
	ended    error         // why it was ended before bind
	left     chan struct{} // closed by leave
}

// enter registers a runner about to start for endpoint; it returns the
// refusal instead once the process is stopping, or when no config serves
// endpoint any more.
func (rs *runnerSet) enter(endpoint string) (r *runner, refusal string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopping {
		return nil, shutdownRefusal
	}
	if endpoint != "" && rs.held[endpoint] == 0 {
		return nil, removedRefusal
	}
	r = &runner{set: rs, endpoint: endpoint, left: make(chan struct{})}
	rs.live[r] = struct{}{}
	rs.done.Add(1)
	return r, ""
}

// bind gives the runner the cancel of its context; if the process began
// stopping meanwhile, or its endpoint was removed, it is cancelled at once.
func (r *runner) bind(cancel context.CancelCauseFunc) {
	r.set.mu.Lock()
	defer r.set.mu.Unlock()
	r.cancel = cancel
	switch {
	case r.set.stopping:
		cancel(errShutdown)
	case r.ended != nil:
		cancel(r.ended)
	}
}

// end cancels the runner with cause (before its bind: at bind); rs.mu is
// held.
func (r *runner) end(cause error) {
	if r.cancel != nil {
		r.cancel(cause)
	} else if r.ended == nil {
		r.ended = cause
	}
}

// leave ends the entry: the runner has recorded its end (or never ran).
func (r *runner) leave() {
	r.set.mu.Lock()
	delete(r.set.live, r)
	r.set.mu.Unlock()
	close(r.left)
	r.set.done.Done()
}

// HoldEndpoint records that a loaded config serves the endpoint named key
// (Options.Endpoint of its hosts): its runners go on across reloads as
// long as one config holds it. A config holds it before its hosts serve,
// and releases it (ReleaseEndpoint) when it is unloaded; a reload loads
// the new config before it unloads the old, so a reload that keeps the
// endpoint never lets go of it.
func HoldEndpoint(key string) { runners.hold(key) }

func (rs *runnerSet) hold(key string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.held[key]++
}

// ReleaseEndpoint drops one config's hold on the endpoint named key. When
// it was the last — a reload (or an unload) removed the endpoint — it ends
// the endpoint's stream session readers and job runners, and waits, until
// ctx ends, for each to record its end: a session becomes stopped with
// end_reason "endpoint_removed", a job canceled with error code
// "endpoint_removed" (an upstream job it follows is cancelled through its
// cancel_operation), each with a message saying why. While the process
// stops (StopRunners) it ends nothing more.
func ReleaseEndpoint(ctx context.Context, key string) error {
	return runners.release(ctx, key)
}

func (rs *runnerSet) release(ctx context.Context, key string) error {
	rs.mu.Lock()
	if rs.held[key]--; rs.held[key] > 0 {
		rs.mu.Unlock()
		return nil
	}
	delete(rs.held, key)
	var ending []*runner
	if !rs.stopping {
		for r := range rs.live {
			if r.endpoint == key {
				r.end(errEndpointRemoved)
				ending = append(ending, r)
			}
		}
	}
	rs.mu.Unlock()
	for _, r := range ending {
		select {
		case <-r.left:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
		r.end(errShutdown)
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
