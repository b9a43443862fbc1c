package store

import (
	"strings"
	"testing"
)

// The status machines exactly as documented on StreamSessionStatus and
// JobStatus: every pair is checked, so a change to either table is a
// deliberate one.
func TestStreamSessionStatusMachine(t *testing.T) {
	all := []StreamSessionStatus{StreamSessionActive, StreamSessionStopping, StreamSessionStopped, StreamSessionCompleted, StreamSessionFailed}
	allowed := map[[2]StreamSessionStatus]bool{
		{StreamSessionActive, StreamSessionStopping}:    true,
		{StreamSessionActive, StreamSessionStopped}:     true,
		{StreamSessionActive, StreamSessionCompleted}:   true,
		{StreamSessionActive, StreamSessionFailed}:      true,
		{StreamSessionStopping, StreamSessionStopped}:   true,
		{StreamSessionStopping, StreamSessionCompleted}: true,
		{StreamSessionStopping, StreamSessionFailed}:    true,
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.CanBecome(to), allowed[[2]StreamSessionStatus{from, to}]; got != want {
				t.Errorf("%s → %s: allowed %v, want %v", from, to, got, want)
			}
		}
		if from.Terminal() != (len(streamSessionTransitions[from]) == 0) {
			t.Errorf("%s: Terminal() = %v but has %d transitions", from, from.Terminal(), len(streamSessionTransitions[from]))
		}
	}
}

func TestJobStatusMachine(t *testing.T) {
	all := []JobStatus{JobQueued, JobRunning, JobCanceling, JobSucceeded, JobFailed, JobCanceled}
	allowed := map[[2]JobStatus]bool{
		{JobQueued, JobRunning}:      true,
		{JobQueued, JobCanceled}:     true,
		{JobQueued, JobFailed}:       true,
		{JobRunning, JobCanceling}:   true,
		{JobRunning, JobSucceeded}:   true,
		{JobRunning, JobFailed}:      true,
		{JobRunning, JobCanceled}:    true,
		{JobCanceling, JobSucceeded}: true,
		{JobCanceling, JobFailed}:    true,
		{JobCanceling, JobCanceled}:  true,
	}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.CanBecome(to), allowed[[2]JobStatus{from, to}]; got != want {
				t.Errorf("%s → %s: allowed %v, want %v", from, to, got, want)
			}
		}
		if from.Terminal() != (len(jobTransitions[from]) == 0) {
			t.Errorf("%s: Terminal() = %v but has %d transitions", from, from.Terminal(), len(jobTransitions[from]))
		}
	}
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newID(StreamSessionIDPrefix)
		if !wellFormedID(id, StreamSessionIDPrefix) || wellFormedID(id, JobIDPrefix) {
			t.Fatalf("%q: well-formed check wrong", id)
		}
		// crypto/rand.Text: 26 base32 characters, 130 bits.
		if n := len(strings.TrimPrefix(id, StreamSessionIDPrefix)); n < 26 {
			t.Fatalf("%q: %d random characters, want >= 26 (128 bits)", id, n)
		}
		if seen[id] {
			t.Fatalf("duplicate ID %q", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{
		"", "ss_", "ss_short", "job_AAAAAAAAAAAAAAAAAAAAAAAAAA", "ss_aaaaaaaaaaaaaaaaaaaaaaaaaa",
		"ss_AAAAAAAAAAAAAAAAAAAAAAAAA/", "ss_AAAAAAAAAAAAAAAAAAAAAAAAA1", "ss_" + strings.Repeat("A", 65),
		"ss_../../mcp-sessions/x",
	} {
		if wellFormedID(bad, StreamSessionIDPrefix) {
			t.Errorf("%q accepted as a session ID", bad)
		}
	}
}

func TestStreamSessionExpiry(t *testing.T) {
	r := &streamSessionRecord{IdleMS: 10_000, LifetimeMS: 25_000, owned: owned[StreamSessionStatus]{RetentionMS: 60_000, Status: StreamSessionActive}}
	r.CreatedAt = r.CreatedAt.AddDate(2026, 0, 0)
	c := r.CreatedAt
	if got := r.expiry(); !got.Equal(c.Add(10e9)) {
		t.Errorf("fresh: %v", got.Sub(c))
	}
	r.LastPollAt = c.Add(8e9)
	if got := r.expiry(); !got.Equal(c.Add(18e9)) {
		t.Errorf("after a poll at 8s: %v", got.Sub(c))
	}
	r.LastPollAt = c.Add(20e9)
	if got := r.expiry(); !got.Equal(c.Add(25e9 + lifetimeCloseGrace)) {
		t.Errorf("capped by lifetime and its close grace: %v", got.Sub(c))
	}
	r.Status, r.ClosedAt = StreamSessionStopped, c.Add(21e9)
	if got := r.expiry(); !got.Equal(c.Add(81e9)) {
		t.Errorf("closed: %v", got.Sub(c))
	}
	if got := r.hardDeadline(); !got.Equal(c.Add(85e9+lifetimeCloseGrace)) || got.Before(r.expiry()) {
		t.Errorf("hard deadline %v before expiry %v", got.Sub(c), r.expiry().Sub(c))
	}
}
