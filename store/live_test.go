package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// An operator sees what is open in a workspace, whatever its agent: counts
// from count-only reads, pages from the key indexes, and the replica that
// owns each running entity.
func TestLiveStateOfAWorkspace(t *testing.T) {
	t.Parallel()
	_, st := storetest.EmbeddedWith(t, store.EmbeddedConfig{}, store.EtcdConfig{ReplicaName: "replica-a"})
	ctx := ctxT(t)
	for _, id := range []string{"m1", "m2", "m3"} {
		if err := st.PutMCPSession(ctx, store.MCPSession{ID: id, WorkspaceID: "ws-1", AgentID: "user:x", ClientName: "c", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: "other", WorkspaceID: "ws-2", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for _, sc := range []store.Scope{ws1a1, ws1a2, ws1a2} {
		ss := newSession(t, st, func(ns *store.NewStreamSession) { ns.Scope, ns.AgentScoped, ns.Owned = sc, true, true })
		sessions = append(sessions, ss.ID)
	}
	newSession(t, st, func(ns *store.NewStreamSession) { ns.Scope = ws2a1 })
	job := newJob(t, st, func(nj *store.NewJob) { nj.AgentScoped, nj.Owned = true, true })

	c, err := st.CountLive(ctx, "ws-1")
	if err != nil || c != (store.LiveCounts{MCPSessions: 3, StreamSessions: 3, Jobs: 1}) {
		t.Fatalf("counts: %+v %v", c, err)
	}
	// Pages go in digest order; a page's next position is a digest, never
	// a session ID.
	ms, next, err := st.ListMCPSessions(ctx, "ws-1", "", 2)
	if err != nil || len(ms) != 2 || next != store.MCPSessionDigest(ms[1].ID) {
		t.Fatalf("MCP page 1: %+v %q %v", ms, next, err)
	}
	listed := []string{ms[0].ID, ms[1].ID}
	ms, next, err = st.ListMCPSessions(ctx, "ws-1", next, 2)
	if err != nil || len(ms) != 1 || next != "" || ms[0].AgentID != "user:x" {
		t.Fatalf("MCP page 2: %+v %q %v", ms, next, err)
	}
	listed = append(listed, ms[0].ID)
	slices.Sort(listed)
	if !slices.Equal(listed, []string{"m1", "m2", "m3"}) {
		t.Fatalf("MCP sessions listed: %v", listed)
	}
	// An operator finds a session by its digest, in its workspace only;
	// its ID is no digest.
	if s, err := st.OperatorMCPSession(ctx, "ws-1", store.MCPSessionDigest("m2")); err != nil || s.ID != "m2" {
		t.Fatalf("by digest: %+v %v", s, err)
	}
	for _, c := range []struct{ ws, digest string }{
		{"ws-2", store.MCPSessionDigest("m2")}, {"ws-1", "m2"}, {"ws-1", store.MCPSessionDigest("other")}, {"ws-1", ""},
	} {
		if _, err := st.OperatorMCPSession(ctx, c.ws, c.digest); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("OperatorMCPSession(%q, %q): %v, want ErrNotFound", c.ws, c.digest, err)
		}
	}
	if err := st.DeleteMCPSession(ctx, "m2"); err != nil {
		t.Fatal(err)
	}
	if c, _ := st.CountLive(ctx, "ws-1"); c.MCPSessions != 2 {
		t.Fatalf("after a delete: %+v", c)
	}
	if _, err := st.OperatorMCPSession(ctx, "ws-1", store.MCPSessionDigest("m2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted session by digest: %v", err)
	}

	var seen []string
	after := ""
	for {
		page, n, err := st.ListOpenStreamSessions(ctx, "ws-1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			seen = append(seen, s.ID)
			if s.WorkspaceID != "ws-1" || s.Owner == "" {
				t.Fatalf("listed %+v", s)
			}
		}
		if n == "" {
			break
		}
		after = n
	}
	if len(seen) != 3 {
		t.Fatalf("open sessions: %v", seen)
	}
	jobs, _, err := st.ListOpenJobs(ctx, "ws-1", "", 10)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("open jobs: %+v %v", jobs, err)
	}
	names, err := st.ReplicaNames(ctx, []string{jobs[0].Owner, "own_bogus"})
	if err != nil || names[jobs[0].Owner] != "replica-a" || len(names) != 1 {
		t.Fatalf("replica names: %v %v", names, err)
	}

	// The operator reads and stops another agent's session.
	ss, err := st.OperatorStreamSession(ctx, "ws-1", sessions[1])
	if err != nil || ss.AgentID != ws1a2.AgentID {
		t.Fatalf("operator read: %+v %v", ss, err)
	}
	if _, err := st.OperatorStreamSession(ctx, "ws-2", sessions[1]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another workspace's session: %v", err)
	}
	if _, err := st.OperatorJob(ctx, "ws-1", job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FinishStreamSession(ctx, sessions[0], store.StreamSessionEnd{Status: store.StreamSessionCompleted}); err != nil {
		t.Fatal(err)
	}
	if c, _ := st.CountLive(ctx, "ws-1"); c.StreamSessions != 2 {
		t.Fatalf("after a finish: %+v", c)
	}
}
