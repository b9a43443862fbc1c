package mcpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
)

// The event-log ledger: a stream past its session's or its client's
// bound is refused whole (dropped when partly stored), a stream counts at
// most what the store keeps of it, other sessions and clients keep what
// they stored, and what expired no longer counts.
func TestEventLedger(t *testing.T) {
	const kib = 1 << 10
	now := time.Now()
	l := newEventLedger(EventQuota{PerSession: 20 * kib, PerClient: 25 * kib}, store.EventLimits{MaxBytes: 8 * kib, TTL: time.Minute})
	l.now = func() time.Time { return now }
	admit := func(session, stream, client string, n int) (bool, bool, string) {
		return l.admit(session, stream, client, n*kib)
	}
	// A stream counts its data up to the store's bound, plus its overhead.
	for range 3 {
		if ok, _, _ := admit("s1", "a", "c1", 4); !ok {
			t.Fatal("a stream within the bounds was refused")
		}
	}
	if got := l.sessions["s1"]; got != 9*kib {
		t.Fatalf("a stream of 12 KiB under an 8 KiB bound counts %d bytes, want 9 KiB", got)
	}
	if ok, _, _ := admit("s1", "b", "c1", 8); !ok { // 18 KiB
		t.Fatal("a second stream within the session's bound was refused")
	}
	// The third stream would take s1 past 20 KiB: refused, nothing to drop.
	ok, drop, why := admit("s1", "c", "c1", 3)
	if ok || drop || !strings.Contains(why, "max_event_bytes_per_session (20480 bytes)") {
		t.Fatalf("a stream past the session's bound: %v, %v, %q", ok, drop, why)
	}
	if ok, _, why := admit("s1", "c", "c1", 0); ok || why != "" {
		t.Fatalf("a refused stream's next event: %v, %q (refused once, logged once)", ok, why)
	}
	// Another session of the client: within its own bound, until the
	// client's; then a stream it had stored is dropped whole.
	if ok, _, _ := admit("s2", "a", "c1", 5); !ok { // client 24 KiB
		t.Fatal("another session's first stream was refused")
	}
	ok, drop, why = admit("s2", "a", "c1", 6)
	if ok || !drop || !strings.Contains(why, "max_event_bytes_per_client (25600 bytes)") {
		t.Fatalf("a stored stream growing past the client's bound: %v, %v, %q", ok, drop, why)
	}
	if l.clients["c1"] != 18*kib || l.sessions["s2"] != 0 {
		t.Fatalf("after the drop: client %d, session %d bytes", l.clients["c1"], l.sessions["s2"])
	}
	// Another client, and a session of no known client, count apart.
	if ok, _, _ := admit("s3", "a", "c2", 8); !ok {
		t.Fatal("another client's stream was refused")
	}
	if ok, _, _ := admit("s4", "a", "", 8); !ok {
		t.Fatal("a stream of no known client was refused")
	}
	// Past the TTL (and the lease's slack) nothing counts, refusals end.
	now = now.Add(store.KeyLifetime(time.Minute))
	if ok, _, _ := admit("s1", "c", "c1", 8); !ok || l.streams.Len() != 1 || l.clients["c1"] != 9*kib {
		t.Fatalf("after expiry: %v, %d streams, client %d bytes", ok, l.streams.Len(), l.clients["c1"])
	}
}
