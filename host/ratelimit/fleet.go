package ratelimit

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Fleet is the store's side of fleet-wide limits (*store.Etcd is one):
// which replicas enforce each limit. No call touches it: a replica joins
// a limit once (a key on its owner lease, which goes when the replica
// stops or dies), and a watch tells every replica how many have.
type Fleet interface {
	// JoinLimit makes this replica a member of the limit id (again, after
	// its owner lease was lost); cheap when it is one.
	JoinLimit(ctx context.Context, id string) error
	// LeaveLimit ends its membership, if any.
	LeaveLimit(ctx context.Context, id string) error
	// WatchLimitMembers calls members with the owner IDs of the live
	// members of every limit, at once and after every change, until ctx
	// ends (it re-watches after errors).
	WatchLimitMembers(ctx context.Context, members func(map[string][]string)) error
	// OwnerID is this replica's owner ID ("" when it has none).
	OwnerID() string
}

// Sync bounds: how often a replica checks its memberships (and after
// its owner lease was lost, joins again), and how long one store request
// of that may take.
const (
	syncInterval = time.Second
	syncTimeout  = 5 * time.Second
)

// coordinator keeps the fleet-wide budgets' memberships and shares in
// step with a Fleet.
type coordinator struct {
	bs     *Budgets
	f      Fleet
	log    *zap.Logger
	cancel context.CancelFunc
	wake   chan struct{}

	mu      sync.Mutex
	members map[string][]string // by limit ID; nil until the first read
	joined  map[string]bool
}

// Coordinate makes the fleet-wide budgets hold across the replicas that
// share f: it joins each to the fleet and keeps their shares in step with
// the live members, until the fleet's watch ends (the store closed) or
// another Fleet replaces f. Calling it again with the same f does nothing.
func (bs *Budgets) Coordinate(f Fleet, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	bs.mu.Lock()
	old := bs.fleet
	if old != nil && old.f == f {
		bs.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &coordinator{bs: bs, f: f, log: log, cancel: cancel, wake: make(chan struct{}, 1), joined: map[string]bool{}}
	bs.fleet = c
	bs.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	go func() {
		if err := f.WatchLimitMembers(ctx, c.setMembers); err != nil && ctx.Err() == nil {
			log.Warn("fleet-wide rate limits: the watch of their members ended; each replica keeps its last share", zap.Error(err))
		}
	}()
	go c.run(ctx)
}

// StopCoordinating ends the coordination (a fleet-wide budget then keeps
// its last share).
func (bs *Budgets) StopCoordinating() {
	bs.mu.Lock()
	c := bs.fleet
	bs.fleet = nil
	bs.mu.Unlock()
	if c != nil {
		c.cancel()
	}
}

func (c *coordinator) nudge() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// added applies the members known to a newly held budget and has it
// joined at once.
func (c *coordinator) added(b *Budget) {
	c.mu.Lock()
	if c.members != nil {
		b.members.Store(c.count(b.id))
	}
	c.mu.Unlock()
	c.nudge()
}

// count is how many replicas enforce the limit id: its members, and this
// replica when they do not list it yet (it enforces it from the start).
func (c *coordinator) count(id string) int64 {
	self := c.f.OwnerID()
	n := int64(len(c.members[id]))
	for _, m := range c.members[id] {
		if m == self && self != "" {
			return n
		}
	}
	return n + 1
}

func (c *coordinator) setMembers(m map[string][]string) {
	c.mu.Lock()
	c.members = m
	for id, b := range c.bs.fleetBudgets() {
		b.members.Store(c.count(id))
	}
	c.mu.Unlock()
}

// run joins the budgets held and leaves the ones released, at once when
// nudged and every syncInterval (which also joins again after the owner
// lease was lost), until ctx ends.
func (c *coordinator) run(ctx context.Context) {
	tick := time.NewTicker(syncInterval)
	defer tick.Stop()
	for {
		c.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.wake:
		}
	}
}

func (c *coordinator) sync(ctx context.Context) {
	held := c.bs.fleetBudgets()
	for id := range held {
		rctx, cancel := context.WithTimeout(ctx, syncTimeout)
		err := c.f.JoinLimit(rctx, id)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.log.Debug("fleet-wide rate limit not joined; this replica keeps its last share and tries again", zap.String("limit", held[id].limit.Name), zap.Error(err))
			}
			continue
		}
		c.joined[id] = true
	}
	for id := range c.joined {
		if held[id] != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, syncTimeout)
		if err := c.f.LeaveLimit(rctx, id); err == nil {
			delete(c.joined, id)
		}
		cancel()
	}
	// The owner ID may have changed with the join (a first or new owner
	// registration): recount this replica.
	c.mu.Lock()
	if c.members != nil {
		for id, b := range held {
			b.members.Store(c.count(id))
		}
	}
	c.mu.Unlock()
}
