package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
)

// TestReadsSurviveStoppedMember stops (SIGSTOP) one member of a real
// three-member etcd cluster and reads through the store once per member:
// the balancer sends one of the reads to the stopped member, which accepts
// it and answers nothing. Each read must still answer, from another
// member, within its operation deadline, instead of failing retryably when
// the deadline passes.
func TestReadsSurviveStoppedMember(t *testing.T) {
	t.Parallel()
	c := startEtcdCluster(t, 3)
	ctx := context.Background()
	st, err := store.NewEtcd(ctx, store.EtcdConfig{Endpoints: c.endpoints(), Prefix: "/crank-e2e-stop/", OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "survivor", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// Warm every member's connection, so that the balancer rotates over all
	// three when one stops.
	for range 2 * len(c.members) {
		if _, err := st.GetMCPSession(ctx, "survivor"); err != nil {
			t.Fatal(err)
		}
	}

	m := c.members[0]
	c.pause(m)
	t.Cleanup(func() { c.resume(m) })
	for i := range len(c.members) {
		// The operation's deadline is the store's op_timeout; a read that
		// answers at all answered within it.
		s, err := st.GetMCPSession(ctx, "survivor")
		if err != nil {
			t.Fatalf("read %d with member %s stopped: %v", i+1, m.name, err)
		}
		if s.ID != "survivor" {
			t.Fatalf("read %d: got session %q", i+1, s.ID)
		}
	}
}
