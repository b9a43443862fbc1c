package sdk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff is the one retry policy of Crank and its adapters: the delay
// before attempt n (from 1) doubles from Initial up to Max, and its upper
// half is random (jitter), so that many clients that lost the same
// upstream do not come back in step.
type Backoff struct {
	Initial, Max time.Duration
}

// Delay is the delay before attempt n (from 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial << min(max(n-1, 0), 30)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Wait waits out Delay(n), or less when ctx ends first; it reports
// whether the whole delay passed.
func (b Backoff) Wait(ctx context.Context, n int) bool {
	t := time.NewTimer(b.Delay(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reconnect is the one reconnect loop of a stream an adapter reads over
// connections it opens again when they are lost (a WebSocket feed, a
// GraphQL subscription).
type Reconnect struct {
	Backoff
	// MaxAttempts is how many reconnects in a row may fail before the
	// stream fails; a connection that progressed (an event, an ack)
	// starts the count again. 0 never reconnects.
	MaxAttempts int
	// Field names MaxAttempts in the operation's config, for the error of
	// a stream that ran out of attempts ("reconnect.max_attempts").
	Field string
	// Lost, when set, is called when a connection that was established
	// is lost, before the next attempt, with why: the adapter reports the
	// gap (items sent meanwhile are missed). An error of its own (the
	// host no longer takes events) ends the stream.
	Lost func(ue *UpstreamError) error
}

// Run calls connect until the stream ends: connect returns whether its
// connection was established and whether it progressed, and nil when the
// stream ended for good (the upstream completed it, the host stopped
// it), an *UpstreamError when the connection was lost or could not be
// made, or another error (an adapter failure) that ends the stream
// as it is.
//
// A lost connection is made again, after the backoff, when its error is
// retryable, unless the very first connection failed before it was
// established (the config, the credentials or the upstream is wrong: it
// fails at once) or the attempts ran out (the error says so). Run returns
// nil when ctx ends.
func (r Reconnect) Run(ctx context.Context, connect func(context.Context) (established, progressed bool, err error)) error {
	failures := 0
	for attempt := 0; ; attempt++ {
		established, progressed, err := connect(ctx)
		if ctx.Err() != nil || err == nil {
			return nil
		}
		var ue *UpstreamError
		if !errors.As(err, &ue) {
			return err
		}
		if !ue.Retryable || attempt == 0 && !established {
			return ue
		}
		if progressed {
			// Only a connection that got somewhere resets the count: an
			// upstream that accepts and drops every one still runs out.
			failures = 0
		}
		failures++
		if failures > r.MaxAttempts {
			if r.MaxAttempts == 0 {
				ue.Message += fmt.Sprintf(" (reconnect is off: %s is 0)", r.Field)
			} else {
				ue.Message = fmt.Sprintf("gave up after %d reconnect attempts: %s", r.MaxAttempts, ue.Message)
			}
			return ue
		}
		if established && r.Lost != nil && r.Lost(ue) != nil {
			return nil
		}
		if !r.Wait(ctx, failures) {
			return nil
		}
	}
}
