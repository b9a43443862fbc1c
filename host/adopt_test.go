package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// familyOps with an upstream-native job whose credentials are exchanged
// from the caller's token.
var adoptOps = strings.Replace(familyOps, "  - name: ticket_status\n", `  - name: export_exchanged
    description: An export on the caller's behalf.
    adapter: rest
    mode: async_job
    upstream_auth: {grant: token_exchange, token_endpoint: "https://login.example.com/token", client_id: crank, audience: "https://api.example.com"}
    job: {status_operation: ticket_status, status_arguments: {ticket: $.ticket}, done_path: $.done}
    config: {method: POST, url: "UPSTREAM/exports", headers: {Authorization: "Bearer {crank.upstream_token}"}}
  - name: ticket_status
`, 1)

// The adoption hook resumes a job that follows an upstream ticket from
// the ticket its dead owner recorded — polling on without starting the
// upstream's job again — and refuses, saying why, what it cannot follow.
func TestAdopter(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, adoptOps, host.Quotas{})
	adopters := &host.Adopters{}
	withdraw := adopters.Offer(func() *host.Host { return f.h })
	defer withdraw()
	adopt := adopters.Adopt
	ctx := context.Background()
	scope := store.Scope{WorkspaceID: "ws", AgentID: "a1"}
	orphan := func(op string, follow string) store.Orphan {
		// A job this replica owns, as the sweep leaves an orphan it offers.
		j, err := f.st.CreateJob(ctx, store.NewJob{Scope: scope, OperationID: op, MaxRuntime: time.Minute, Owned: true})
		if err != nil {
			t.Fatal(err)
		}
		if follow != "" {
			if j, err = f.st.UpdateJob(ctx, j.ID, store.JobUpdate{Follow: json.RawMessage(follow)}); err != nil {
				t.Fatal(err)
			}
		}
		return store.Orphan{DeadOwner: "own_dead", Job: j}
	}

	for _, tc := range []struct {
		name string
		o    store.Orphan
		want string
	}{
		{"session", store.Orphan{StreamSession: &store.StreamSession{}}, "a stream session's reader runs on the replica that started it"},
		{"one call", orphan("report", ""), `adapter "rest" does not resume calls (it lists no "resume" capability`},
		{"window", orphan("snapshot", ""), "it collected a window on the replica that died"},
		{"no ticket yet", orphan("export", ""), "had not recorded the upstream's job yet"},
		{"token exchange", orphan("export_exchanged", `{"ticket":"T-7"}`), "exchanged from the caller's own access token (upstream_auth token_exchange)"},
		{"not served", orphan("elsewhere", `{"ticket":"T-7"}`), `no endpoint of this replica serves its operation "elsewhere"`},
	} {
		if err := adopt(ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}

	o := orphan("export", `{"ticket":"T-7"}`)
	if err := adopt(ctx, o); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	id := o.Job.ID
	waitFor(t, func() bool {
		m, _ := famCall(t, f.h, "a1", "export_status", `{"job_id":"`+id+`"}`)
		return m["status"] == "succeeded"
	})
	r := famOK(t, f.h, "a1", "export_result", `{"job_id":"`+id+`"}`)
	if !strings.Contains(r["text"].(string), "T-7.csv") || f.up.exportPolls.Load() != 3 || f.up.exportStarts.Load() != 0 {
		t.Errorf("adopted job: %v after %d polls and %d starts", r, f.up.exportPolls.Load(), f.up.exportStarts.Load())
	}
}
