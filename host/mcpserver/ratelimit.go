package mcpserver

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// Sessionless requests per client. A session's requests are bounded by the
// sessions a client may hold (max_mcp_sessions_per_client, limits.go); a
// request served without a session — every request of the sessionless
// protocol (2026-07-28, generation.go) and every request of a stateless
// endpoint — holds nothing, so each client gets a budget of them instead:
// a token bucket refilled at MaxSessionlessRequestsPerClient a second, up
// to twice that (two seconds' worth, for a burst of parallel calls). Past
// it a request gets 429 with Retry-After and a JSON-RPC error naming the
// limit, before the SDK reads it.
//
// A client is its verified identity — the user of its bearer token, or
// the user an authentication handler in front of the endpoint verified —
// else its address (clientOf: Caddy's client IP, an IPv6 address as its
// /64). The agent header is not used: it names whom a call is for, not who
// sends it.

// DefaultMaxSessionlessRequestsPerClient is far above what one busy client
// sends (an agent's calls come a model turn at a time), and above what the
// agents of one host send together when they share an address without a
// token, as beside a sidecar: a flood is bounded, a fleet of agents is not.
const DefaultMaxSessionlessRequestsPerClient = 1000

// optMaxSessionlessRequests is the limit's Caddyfile option, for errors.
const optMaxSessionlessRequests = "max_sessionless_requests_per_client"

// sessionlessClients bounds the budgets kept; past it the least recently
// seen client's is forgotten (it starts full again when it returns).
const sessionlessClients = 16384

// tokenBucket is a budget refilled at a rate a second up to a burst.
type tokenBucket struct {
	tokens float64
	at     time.Time
}

// refill adds what the time since the last refill earned, up to burst.
func (b *tokenBucket) refill(now time.Time, rate, burst float64) {
	b.tokens = min(b.tokens+now.Sub(b.at).Seconds()*rate, burst)
	b.at = now
}

// requestBudgets are the sessionless request budgets of an endpoint's
// clients.
type requestBudgets struct {
	rate  float64 // a second; 0: no limit
	mu    sync.Mutex
	byKey *lru.Cache[string, *tokenBucket]
	now   func() time.Time
}

func newRequestBudgets(rate int) *requestBudgets {
	return &requestBudgets{rate: float64(rate), byKey: lru.New[string, *tokenBucket](sessionlessClients, nil), now: time.Now}
}

// take spends one request of client's budget, and reports whether there
// was one.
func (b *requestBudgets) take(client string) bool {
	if b == nil || b.rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	burst := 2 * b.rate
	tb, _ := b.byKey.GetOrPut(client, func() *tokenBucket { return &tokenBucket{tokens: burst, at: now} })
	tb.refill(now, b.rate, burst)
	if tb.tokens < 1 {
		return false
	}
	tb.tokens--
	return true
}

// sessionlessClient is the key of a sessionless request's client.
func (ep *Endpoint) sessionlessClient(r *http.Request) string {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil && ti.UserID != "" {
		return agentUserPrefix + ti.UserID
	}
	if id := r.Header.Get(authUserHeader); id != "" {
		return agentUserPrefix + id
	}
	return "addr:" + ep.clientOf(r)
}

// throttled answers a request served without a session whose client spent
// its budget, and reports whether it did.
func (ep *Endpoint) throttled(w http.ResponseWriter, r *http.Request, p *peeked) bool {
	if r.Method != http.MethodPost || ep.transport.stateful && ep.generation(r, p) != genSessionless {
		return false
	}
	if ep.sessionless.take(ep.sessionlessClient(r)) {
		return false
	}
	w.Header().Set("Retry-After", "1")
	writeJSONRPCError(w, http.StatusTooManyRequests, -32000, fmt.Sprintf(
		"too many requests without a session from this client: at most %g a second (%s); retry in a second",
		ep.sessionless.rate, optMaxSessionlessRequests), map[string]any{"retryable": true})
	return true
}
