package mcpserver

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// A flood of requests with made-up session IDs costs few store reads: an
// ID this server cannot have made is 404 without one, an ID the store did
// not have is remembered, and an address that keeps missing gets 429 with
// Retry-After instead of more reads. A session that really moved to the
// replica is still served, to another address.
func TestUnknownSessionFlood(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	a, first, _ := limitedReplica(t, st, SessionLimits{})
	b, reads, epB := limitedReplica(t, st, SessionLimits{})
	frozen := time.Now() // no budget refills during the test, however slow it runs
	epB.unknown.now = func() time.Time { return frozen }

	moved := clientAt(t, a, "192.0.2.1")
	moved.Initialize("2025-06-18")
	mcptest.WaitUntil(t, "the moved session's record", func() bool { return first.calls.Load() == 2 })

	post := func(session, addr string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, b, strings.NewReader(toolsList))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, session)
		req.Header.Set("X-Test-Client", addr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	for _, id := range []string{"x", "no-such-session", strings.ToLower(rand.Text()), rand.Text() + "A", "../../" + rand.Text()[6:]} {
		if resp := post(id, "203.0.113.1"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("malformed session %q: %s", id, resp.Status)
		}
	}
	if n := reads.calls.Load(); n != 0 {
		t.Fatalf("malformed session IDs made %d store reads", n)
	}

	same := rand.Text()
	for range 50 {
		if resp := post(same, "203.0.113.2"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("unknown session: %s", resp.Status)
		}
	}
	if n := reads.calls.Load(); n != 1 {
		t.Fatalf("one unknown session asked 50 times made %d store reads, want 1", n)
	}

	for i := range missBurst {
		if resp := post(rand.Text(), "203.0.113.3"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("fresh unknown session %d: %s", i, resp.Status)
		}
	}
	before := reads.calls.Load()
	for range 50 {
		resp := post(rand.Text(), "203.0.113.3")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("flooding address past its budget: %s %v", resp.Status, resp.Header)
		}
	}
	if n := reads.calls.Load(); n != before || n != 1+missBurst {
		t.Fatalf("the flood made %d store reads, want %d", n, 1+missBurst)
	}

	// A session that moved to B is served there, for its own address.
	onB := clientAt(t, b, "192.0.2.1")
	onB.Session, onB.Version = moved.Session, moved.Version
	onB.SkipIDs(1000)
	var res mcptest.CallResult
	onB.OK("tools/call", map[string]any{"name": "get_user", "arguments": map[string]any{"id": 7}}, &res)
	if res.IsError {
		t.Fatalf("moved session on B: %+v", res)
	}
}

func TestUnknownSessionsBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	u := &unknownSessions{now: func() time.Time { return now }}
	first := rand.Text()
	u.miss(first, "c", true)
	if u.check(first, "c") != notFound {
		t.Fatal("a missed ID is not remembered")
	}
	var last string
	for range negativeCacheSize {
		last = rand.Text()
		u.miss(last, fmt.Sprint(now.UnixNano()), true)
	}
	if u.absent.Len() != negativeCacheSize || u.check(first, "d") != lookUp {
		t.Fatalf("the cache holds %d IDs and still the oldest", u.absent.Len())
	}
	now = now.Add(negativeTTL)
	if u.check(last, "d") != lookUp {
		t.Fatal("an expired entry is still absent")
	}
	// Another caller's session is charged but not remembered as absent.
	other := rand.Text()
	u.miss(other, "e", false)
	if u.check(other, "e") != lookUp {
		t.Fatal("another caller's session is remembered as absent")
	}
	// Budgets: missBurst misses, then refilled at missRate a second.
	for range missBurst - 1 {
		u.miss(rand.Text(), "e", true)
	}
	if u.check(rand.Text(), "e") != tooMany {
		t.Fatal("an address past its budget may look up")
	}
	now = now.Add(time.Second / missRate)
	if u.check(rand.Text(), "e") != lookUp {
		t.Fatal("the budget does not refill")
	}
	// At most missClients addresses are tracked: a new one past that is
	// refused until idle ones can be forgotten.
	u.budgets = map[string]*tokenBucket{}
	for i := range missClients {
		u.budgets[fmt.Sprint(i)] = &tokenBucket{tokens: 0, at: now}
	}
	u.lastSweep = now
	if u.check(rand.Text(), "new") != tooMany {
		t.Fatal("a new address past missClients may look up")
	}
	now = now.Add(time.Duration(missBurst/missRate+1) * time.Second)
	if u.check(rand.Text(), "new") != lookUp || len(u.budgets) != 1 {
		t.Fatalf("idle budgets not forgotten: %d", len(u.budgets))
	}
}
