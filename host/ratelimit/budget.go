package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// CodeRateLimited is the JSON-RPC error code of a call a limit refused:
// 429, as HTTP's Too Many Requests. It lies outside JSON-RPC's reserved
// range (-32768 to -32000): MCP 2026-07-28 reserves -32020 to -32099 for
// the codes its specification defines, so the -32029 some gateways used
// before is not an implementation's to send (ToolHive moved from it to
// 429 for that reason). The error's data carries the limit's name, its
// scope and retryAfterSeconds.
const CodeRateLimited = 429

// ErrLimited is what every refusal of a limit matches (errors.Is).
var ErrLimited = errors.New("rate limit reached")

// Refusal is a call (or request) a limit refused.
type Refusal struct {
	// Limit is the limit's name, Scope what it limits (ScopeTool, ...).
	Limit, Scope string
	// Allows says what the limit allows (Limit.Describe).
	Allows string
	// RetryAfter is how long until the caller's bucket holds a call again.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("rate limit %s reached: at most %s; retry in %ds", r.Limit, r.Allows, r.RetryAfterSeconds())
}

// Is makes errors.Is(err, ErrLimited) true.
func (r *Refusal) Is(target error) bool { return target == ErrLimited }

// Retryable: the same call passes once the caller waited RetryAfter.
func (r *Refusal) Retryable() bool { return true }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least
// 1: the Retry-After header's and the error data's value.
func (r *Refusal) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(r.RetryAfter.Seconds())))
}

// Data is the JSON-RPC error's data of the refusal.
func (r *Refusal) Data() map[string]any {
	return map[string]any{"limit": r.Limit, "scope": r.Scope, "retryAfterSeconds": r.RetryAfterSeconds(), "retryable": true}
}

// maxKeys bounds the buckets a budget keeps; past it the least recently
// used key's is forgotten (it starts full again when its caller returns).
const maxKeys = 16384

// epoch is what bucket times count from (monotonic).
var epoch = time.Now()

// bucket is one key's tokens as of at (nanoseconds since epoch).
type bucket struct {
	tokens float64
	at     int64
}

// Budget is the state of one limit: the buckets of its keys, refilled at
// the limit's rate (a fleet-wide limit's share of it) up to its burst.
// Safe for concurrent use.
type Budget struct {
	limit  Limit
	id     string
	scope  string
	allows string
	rate   float64 // calls a nanosecond, fleet-wide
	burst  float64

	// members is how many replicas share a fleet-wide limit (1 for any
	// other); refs how many holders the registry counted (Budgets).
	members atomic.Int64
	refs    int

	mu     sync.Mutex
	single bucket
	keyed  *lru.Cache[string, *bucket]

	admitted, refused atomic.Int64
	// clock is the time in nanoseconds since epoch (SetClock).
	clock func() int64
}

func monotonic() int64 { return int64(time.Since(epoch)) }

// SetClock makes now the budget's clock, for tests; set it before the
// budget is used.
func (b *Budget) SetClock(now func() time.Time) {
	b.clock = func() int64 { return int64(now().Sub(epoch)) }
}

// NewBudget returns the budget of l, of its own: not shared, not fleet
// wide (l.Fleet is ignored). l must pass Check.
func NewBudget(l Limit) *Budget {
	r, burst := l.rate()
	b := &Budget{limit: l, id: l.ID(), scope: l.Scope(), allows: l.Describe(), rate: r.PerSecond() / 1e9, burst: burst, clock: monotonic}
	if l.Per != "" {
		b.keyed = lru.New[string, *bucket](maxKeys, nil)
	}
	b.single = bucket{tokens: burst}
	b.members.Store(1)
	return b
}

// NewRequestBudget is NewBudget for a limit of HTTP requests rather than
// calls (ScopeRequests), such as the endpoint's requests without a
// session.
func NewRequestBudget(l Limit) *Budget {
	b := NewBudget(l)
	b.scope = ScopeRequests
	b.allows = strings.Replace(b.allows, " calls ", " requests ", 1)
	return b
}

// Limit is the budget's limit.
func (b *Budget) Limit() Limit { return b.limit }

// share is the rate and burst this replica enforces: a fleet-wide
// limit's 1/members of them (a burst of at least one call).
func (b *Budget) share() (rate, burst float64) {
	n := float64(max(1, b.members.Load()))
	return b.rate / n, max(1, b.burst/n)
}

// take spends one call of key's bucket at now; when it holds less than
// one, it spends nothing and returns how long until it holds one.
func (b *Budget) take(key string, now int64) (wait time.Duration, ok bool) {
	rate, burst := b.share()
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.bucketLocked(key, burst, now)
	t.tokens = min(t.tokens+float64(now-t.at)*rate, burst)
	t.at = now
	if t.tokens >= 1 {
		t.tokens--
		return 0, true
	}
	return max(time.Duration((1-t.tokens)/rate), time.Nanosecond), false
}

// refund gives back the call take spent for key (a later limit refused
// the call).
func (b *Budget) refund(key string) {
	_, burst := b.share()
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.bucketLocked(key, burst, 0)
	t.tokens = min(t.tokens+1, burst)
}

// bucketLocked is key's bucket, a new full one (as of now) for a key it
// has none of.
func (b *Budget) bucketLocked(key string, burst float64, now int64) *bucket {
	if b.keyed == nil {
		return &b.single
	}
	t, found := b.keyed.Get(key)
	if !found {
		t = &bucket{tokens: burst, at: now}
		b.keyed.Put(key, t)
	}
	return t
}

// Admit spends one call of the caller's bucket, or refuses it.
func (b *Budget) Admit(c *Caller) *Refusal {
	return Set{b}.Admit(c)
}

// Set is the budgets of the limits that apply to one tool.
type Set []*Budget

// Admit spends one call of the caller's bucket of every budget, or
// refuses the call, spending nothing, naming the first budget that has
// no call left.
func (s Set) Admit(c *Caller) *Refusal {
	if len(s) == 0 {
		return nil
	}
	now := s[0].clock()
	for i, b := range s {
		wait, ok := b.take(b.limit.key(c), now)
		if ok {
			continue
		}
		for _, p := range s[:i] {
			p.refund(p.limit.key(c))
		}
		b.refused.Add(1)
		return &Refusal{Limit: b.limit.Name, Scope: b.scope, Allows: b.allows, RetryAfter: wait}
	}
	for _, b := range s {
		b.admitted.Add(1)
	}
	return nil
}

// State is what a replica knows of one budget, for the console's live
// view and the admin API.
type State struct {
	Limit
	ID    string `json:"id"`
	Scope string `json:"scope"`
	// Allows says what the limit allows; Members is how many replicas
	// enforce it (a fleet-wide limit's; 1 otherwise) and Share this
	// replica's part of its rate.
	Allows  string  `json:"allows"`
	Members int64   `json:"members"`
	Share   float64 `json:"share"`
	// Keys is how many buckets it keeps on this replica; Admitted and
	// Refused count the calls it admitted and refused here since it was
	// first declared.
	Keys     int   `json:"keys"`
	Admitted int64 `json:"admitted"`
	Refused  int64 `json:"refused"`
}

// State is the budget's state on this replica.
func (b *Budget) State() State {
	n := max(1, b.members.Load())
	st := State{Limit: b.limit, ID: b.id, Scope: b.scope, Allows: b.allows, Members: n, Share: 1 / float64(n),
		Admitted: b.admitted.Load(), Refused: b.refused.Load()}
	if b.keyed != nil {
		st.Keys = b.keyed.Len()
	}
	return st
}

// Budgets are the budgets of a process, by limit (Limit.ID): handlers and
// catalogs that declare the same limit share its budget, and it outlives
// a reload that keeps it. Safe for concurrent use.
type Budgets struct {
	mu   sync.Mutex
	byID map[string]*Budget
	// fleet coordinates the fleet-wide budgets (fleet.go); nil until
	// Coordinate.
	fleet *coordinator
}

// NewBudgets returns an empty registry.
func NewBudgets() *Budgets { return &Budgets{byID: map[string]*Budget{}} }

// Acquire returns the budget of l (which must pass Check), shared with
// every holder of the same limit; Release it when done.
func (bs *Budgets) Acquire(l Limit) *Budget {
	id := l.ID()
	bs.mu.Lock()
	b := bs.byID[id]
	if b == nil {
		b = NewBudget(l)
		bs.byID[id] = b
	}
	b.refs++
	c := bs.fleet
	bs.mu.Unlock()
	if l.Fleet && c != nil {
		c.added(b)
	}
	return b
}

// Release gives back one hold of b; the last one forgets it (a fleet-wide
// limit leaves the fleet).
func (bs *Budgets) Release(b *Budget) {
	if b == nil {
		return
	}
	bs.mu.Lock()
	b.refs--
	gone := b.refs <= 0 && bs.byID[b.id] == b
	if gone {
		delete(bs.byID, b.id)
	}
	c := bs.fleet
	bs.mu.Unlock()
	if gone && b.limit.Fleet && c != nil {
		c.nudge()
	}
}

// States lists the budgets held, by name.
func (bs *Budgets) States() []State {
	bs.mu.Lock()
	out := make([]State, 0, len(bs.byID))
	for _, b := range bs.byID {
		out = append(out, b.State())
	}
	bs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// fleetBudgets returns the fleet-wide budgets held, by ID.
func (bs *Budgets) fleetBudgets() map[string]*Budget {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	out := map[string]*Budget{}
	for id, b := range bs.byID {
		if b.limit.Fleet {
			out[id] = b
		}
	}
	return out
}
