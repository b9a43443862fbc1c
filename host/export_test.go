package host

import (
	"context"
)

// OwnRunners gives h a runner set of its own and returns its stop, so a
// test stops h's runners without stopping those of the tests beside it.
func OwnRunners(h *Host) func(context.Context) error {
	rs := &runnerSet{live: map[*runner]struct{}{}, held: map[string]int{}}
	h.runners = rs
	return rs.stop
}
