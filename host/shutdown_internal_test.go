package host

import (
	"context"
	"errors"
	"testing"
)

// A reload that keeps an endpoint (the new config holds it before the old
// one lets go) leaves its runners alone; the last release ends them with
// errEndpointRemoved, also one not yet bound, and refuses new ones.
func TestEndpointReleaseEndsItsRunners(t *testing.T) {
	t.Parallel()
	rs := &runnerSet{live: map[*runner]struct{}{}, held: map[string]int{}}
	rs.hold("a")
	rs.hold("b")
	run := func(endpoint string) (context.Context, *runner) {
		t.Helper()
		r, refusal := rs.enter(endpoint)
		if refusal != "" {
			t.Fatalf("enter %s: %s", endpoint, refusal)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		r.bind(cancel)
		go func() { <-ctx.Done(); r.leave() }()
		return ctx, r
	}
	a, _ := run("a")
	b, _ := run("b")
	unbound, refusal := rs.enter("a")
	if refusal != "" {
		t.Fatal(refusal)
	}

	rs.hold("a") // the reloaded config
	if err := rs.release(context.Background(), "a"); err != nil || a.Err() != nil {
		t.Fatalf("a reload that keeps the endpoint: %v, runner %v", err, context.Cause(a))
	}
	released := make(chan error, 1)
	go func() { released <- rs.release(context.Background(), "a") }()
	<-a.Done()
	if !errors.Is(context.Cause(a), errEndpointRemoved) {
		t.Errorf("runner of the removed endpoint: %v", context.Cause(a))
	}
	// The runner that had not bound yet is ended at its bind; the release
	// waits for it.
	ctx, cancel := context.WithCancelCause(context.Background())
	unbound.bind(cancel)
	if !errors.Is(context.Cause(ctx), errEndpointRemoved) {
		t.Errorf("unbound runner of the removed endpoint: %v", context.Cause(ctx))
	}
	unbound.leave()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if b.Err() != nil {
		t.Errorf("another endpoint's runner: %v", context.Cause(b))
	}
	if _, refusal := rs.enter("a"); refusal != removedRefusal {
		t.Errorf("start on the removed endpoint: %q", refusal)
	}
	if _, refusal := rs.enter(""); refusal != "" {
		t.Errorf("start of a host that names no endpoint: %q", refusal)
	}
}
