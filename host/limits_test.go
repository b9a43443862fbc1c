package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
)

// The replica caps bound the sessions and jobs running at once on this
// replica, whoever starts them: a start beyond a cap is an isError result
// naming it, and the slot comes back when the session or job ends.
func TestReplicaLimits(t *testing.T) {
	t.Parallel()
	limits := host.NewReplicaLimits(2, 1)
	f := newFamilyFixture(t, familyOps, host.Quotas{Replica: limits})
	first := famOK(t, f.h, "a1", "follow_start", `{}`)
	famOK(t, f.h, "a2", "follow_start", `{}`)
	_, res := famCall(t, f.h, "a3", "follow_start", `{}`)
	if !res.IsError || !strings.Contains(res.Text, "quota max_sessions_per_replica exceeded") || !strings.Contains(res.Text, "limit 2") {
		t.Fatalf("a third session on a replica capped at 2: %+v", res)
	}
	if s, j := limits.Running(); s != 2 || j != 0 {
		t.Errorf("Running = %d sessions, %d jobs", s, j)
	}
	famOK(t, f.h, "a1", "follow_stop", `{"session_id":"`+first["session_id"].(string)+`"}`)
	waitFor(t, func() bool {
		_, res := famCall(t, f.h, "a3", "follow_start", `{}`)
		return !res.IsError
	})

	job := famOK(t, f.h, "a1", "report_start", `{"delay_ms":60000}`)
	_, res = famCall(t, f.h, "a2", "report_start", `{"delay_ms":1}`)
	if !res.IsError || !strings.Contains(res.Text, "quota max_jobs_per_replica exceeded") {
		t.Fatalf("a second job on a replica capped at 1: %+v", res)
	}
	task, res, err := f.h.StartTask(context.Background(), host.CallRequest{Tool: f.h.Tool("report_start"),
		Arguments: json.RawMessage(`{"delay_ms":1}`), WorkspaceID: "ws", AgentID: "a2"})
	if err != nil || task != nil || res == nil || !res.IsError || !strings.Contains(res.Text, "max_jobs_per_replica") {
		t.Fatalf("a task over the cap: %v, %+v, %+v", err, task, res)
	}
	famOK(t, f.h, "a1", "report_cancel", `{"job_id":"`+job["job_id"].(string)+`"}`)
	waitFor(t, func() bool {
		_, res := famCall(t, f.h, "a2", "report_start", `{"delay_ms":1}`)
		return !res.IsError
	})

	// Raising a cap lets more in at once; 0 lifts it.
	limits.Set(0, 0)
	for range 3 {
		famOK(t, f.h, "a4", "report_start", `{"delay_ms":60000}`)
	}
}
