package mcpserver

import (
	"fmt"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/lru"
	"github.com/crankmcp/crank/store"
)

// EventQuota bounds the bytes of SSE event logs an endpoint stores on this
// replica per MCP session and per client address (the address
// max_mcp_sessions_per_client counts by); zero means no bound. Each stream
// is bounded on its own too (store.EventLimits); these bound how many a
// session or a client keeps at once, within the event TTL.
//
// They are a write budget: a stream that would take its session or its
// client past a bound is not stored (its events still reach the client,
// only a resume from them fails, as for a trimmed stream), and a stream
// already partly stored is dropped whole, so that no resume replays a
// part. Nothing of another session or client is ever dropped to make
// room, and no stream is evicted: deleting would only churn etcd, whose
// history keeps a deleted value until compaction.
type EventQuota struct {
	PerSession int64
	PerClient  int64
}

// Event-log quota defaults (the crank handler's).
const (
	DefaultEventBytesPerSession = 8 << 20
	DefaultEventBytesPerClient  = 64 << 20
)

// What the ledger counts for a stream besides its events' data: its
// record and keys; and how many streams it remembers at most (beyond it,
// the least recently written are forgotten early).
const (
	eventStreamOverhead = 1 << 10
	maxLedgerStreams    = 100_000
)

// eventLedger counts what the event logs this replica stored take, per
// session and per client address, for as long as etcd may keep them (the
// event TTL after a stream's last append, and the lease's slack). It is
// guarded by its eventStore's mutex.
type eventLedger struct {
	quota     EventQuota
	maxStream int64         // what one stream keeps at most (EventLimits.MaxBytes)
	keep      time.Duration // how long a stream counts after its last append
	now       func() time.Time

	// streams are the streams counted, least recently appended last:
	// beyond maxLedgerStreams the oldest are forgotten early.
	streams  *lru.Cache[ledgerKey, *ledgerStream]
	sessions map[string]int64
	clients  map[string]int64
}

type ledgerKey struct{ session, stream string }

type ledgerStream struct {
	key     ledgerKey
	client  string
	written int64 // bytes of data appended
	bytes   int64 // what it counts: its data (at most maxStream) and overhead
	refused string
	last    time.Time
}

func newEventLedger(q EventQuota, lim store.EventLimits) *eventLedger {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = store.DefaultEventMaxBytes
	}
	if lim.TTL <= 0 {
		lim.TTL = store.DefaultEventTTL
	}
	l := &eventLedger{quota: q, maxStream: lim.MaxBytes, keep: store.KeyLifetime(lim.TTL), now: time.Now,
		sessions: map[string]int64{}, clients: map[string]int64{}}
	l.streams = lru.New[ledgerKey, *ledgerStream](maxLedgerStreams, func(_ ledgerKey, s *ledgerStream) { l.uncount(s) })
	return l
}

// admit counts an event of n bytes on a stream of session, from client
// ("" when unknown: only the session's bound applies). It reports whether
// to store it and, when not, whether the stream's stored events must be
// dropped (it had some), and the refusal (for the log) when this event is
// the stream's first refused.
func (l *eventLedger) admit(session, stream, client string, n int) (ok, drop bool, refusal string) {
	now := l.now()
	l.expire(now)
	k := ledgerKey{session, stream}
	s, _ := l.streams.GetOrPut(k, func() *ledgerStream { return &ledgerStream{key: k, client: client} })
	s.last = now
	if s.refused != "" {
		return false, false, ""
	}
	count := min(s.written+int64(n), l.maxStream) + eventStreamOverhead
	delta := count - s.bytes
	switch {
	case l.quota.PerSession > 0 && l.sessions[session]+delta > l.quota.PerSession:
		s.refused = fmt.Sprintf("the session's event logs would exceed max_event_bytes_per_session (%d bytes)", l.quota.PerSession)
	case l.quota.PerClient > 0 && s.client != "" && l.clients[s.client]+delta > l.quota.PerClient:
		s.refused = fmt.Sprintf("the event logs of the client address would exceed max_event_bytes_per_client (%d bytes)", l.quota.PerClient)
	}
	if s.refused != "" {
		drop = s.bytes > 0
		l.uncount(s)
		return false, drop, s.refused
	}
	s.written += int64(n)
	s.bytes = count
	l.sessions[session] += delta
	if s.client != "" {
		l.clients[s.client] += delta
	}
	return true, false, ""
}

// expire forgets the streams etcd no longer keeps.
func (l *eventLedger) expire(now time.Time) {
	l.streams.DropOldest(func(_ ledgerKey, s *ledgerStream) bool {
		if now.Sub(s.last) < l.keep {
			return false
		}
		l.uncount(s)
		return true
	})
}

// uncount takes what s counts off its session and client.
func (l *eventLedger) uncount(s *ledgerStream) {
	sub := func(m map[string]int64, k string) {
		if m[k] -= s.bytes; m[k] <= 0 {
			delete(m, k)
		}
	}
	sub(l.sessions, s.key.session)
	if s.client != "" {
		sub(l.clients, s.client)
	}
	s.bytes = 0
}
