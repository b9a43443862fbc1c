package mcpserver

import (
	"net/http"
	"sync"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// Unknown session IDs. A request with an Mcp-Session-Id this replica does
// not hold costs a linearizable etcd read (sessions.go), so a flood of
// made-up IDs would be a flood of reads. Three things stop that before the
// read:
//
//   - an ID this server cannot have handed out (newSessionID makes 26
//     base32 characters) is 404 at once;
//   - a bounded negative cache: an ID the store did not have is 404
//     without a read for negativeTTL;
//   - a budget of misses per client address (a token bucket of missBurst,
//     refilled at missRate a second): past it, 429 with Retry-After, and
//     no read. Hits (a session that moved here) cost no budget.

// Unknown session limits.
const (
	negativeCacheSize = 4096
	negativeTTL       = 10 * time.Second
	missBurst         = 20
	missRate          = 5 // misses a second
	// missClients bounds the addresses whose budgets are kept. When that
	// many are spending theirs, a new address is refused until a second
	// has passed and the idle ones are forgotten.
	missClients = 8192
)

// sessionIDLen is the length of the session IDs this server hands out:
// crypto/rand's Text, 26 characters of the RFC 4648 base32 alphabet.
const sessionIDLen = 26

// wellFormedSessionID reports whether id could be one this server handed
// out.
func wellFormedSessionID(id string) bool {
	if len(id) != sessionIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// unknownSessions is the negative cache and the miss budgets.
type unknownSessions struct {
	mu sync.Mutex
	// absent maps a session ID to when its entry expires, at most
	// negativeCacheSize (the least recently used go first).
	absent *lru.Cache[string, time.Time]
	// budgets are the miss budgets by client address key.
	budgets   map[string]*tokenBucket
	lastSweep time.Time
	now       func() time.Time
}

// tokenBucket is a miss budget: refilled at a rate a second up to a
// burst, spent only on a miss (unlike a rate limit's, which a request
// spends as it passes: host/ratelimit).
type tokenBucket struct {
	tokens float64
	at     time.Time
}

// refill adds what the time since the last refill earned, up to burst.
func (b *tokenBucket) refill(now time.Time, rate, burst float64) {
	b.tokens = min(b.tokens+now.Sub(b.at).Seconds()*rate, burst)
	b.at = now
}

// verdict is what checkUnknown decided about a session ID it does not
// hold.
type verdict int

const (
	lookUp   verdict = iota // read the store
	notFound                // 404 without a read
	tooMany                 // 429 without a read
)

func (u *unknownSessions) clock() time.Time {
	if u.now != nil {
		return u.now()
	}
	return time.Now()
}

// check decides whether the store is read for session id, asked by client.
func (u *unknownSessions) check(id, client string) verdict {
	if !wellFormedSessionID(id) {
		return notFound
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	if u.absent != nil {
		if until, ok := u.absent.Get(id); ok {
			if now.Before(until) {
				return notFound
			}
			u.absent.Delete(id)
		}
	}
	b := u.budgetLocked(client, now)
	if b == nil || b.tokens < 1 {
		return tooMany
	}
	return lookUp
}

// miss records that the store had no session id for client: the client's
// budget pays for the read, and, when cache is set (the session does not
// exist, rather than being another caller's), the ID is 404 for a while.
func (u *unknownSessions) miss(id, client string, cache bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock()
	if b := u.budgetLocked(client, now); b != nil {
		b.tokens = max(b.tokens-1, 0)
	}
	if !cache || !wellFormedSessionID(id) {
		return
	}
	if u.absent == nil {
		u.absent = lru.New[string, time.Time](negativeCacheSize, nil)
	}
	u.absent.Put(id, now.Add(negativeTTL))
}

// budgetLocked returns client's budget, refilled to now; nil when no
// budget can be kept for a new client.
func (u *unknownSessions) budgetLocked(client string, now time.Time) *tokenBucket {
	b := u.budgets[client]
	if b == nil {
		if len(u.budgets) >= missClients && !u.sweepLocked(now) {
			return nil
		}
		if u.budgets == nil {
			u.budgets = map[string]*tokenBucket{}
		}
		b = &tokenBucket{tokens: missBurst, at: now}
		u.budgets[client] = b
		return b
	}
	b.refill(now, missRate, missBurst)
	return b
}

// sweepLocked forgets the budgets that are full again (those clients have
// not missed for a while), at most once a second, and reports whether room
// was made.
func (u *unknownSessions) sweepLocked(now time.Time) bool {
	if now.Sub(u.lastSweep) < time.Second {
		return false
	}
	u.lastSweep = now
	for k, b := range u.budgets {
		if b.tokens+now.Sub(b.at).Seconds()*missRate >= missBurst {
			delete(u.budgets, k)
		}
	}
	return len(u.budgets) < missClients
}

// refuseUnknown answers a request for a session this replica does not hold
// that checkUnknown refused.
func refuseUnknown(w http.ResponseWriter, v verdict) {
	if v == notFound {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Retry-After", "1")
	writeJSONRPCError(w, http.StatusTooManyRequests, -32000,
		"too many requests for unknown MCP sessions from this client address; retry in a second", map[string]any{"retryable": true})
}
