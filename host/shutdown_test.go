package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host"
)

// Stopping the process's runners ends a session's endless upstream read
// and a running job at once, records the session stopped (end_reason
// "shutdown") and the job failed (code "shutdown"), and refuses new
// starts with a retryable explanation.
func TestStopRunners(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	stop := host.OwnRunners(f.h)

	sid := famOK(t, f.h, "a1", "follow_start", `{}`)["session_id"].(string)
	jid := famOK(t, f.h, "a1", "report_start", `{"delay_ms":600000}`)["job_id"].(string)
	<-f.up.reportStarted

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Fatalf("runners did not end: %v", err)
	}
	select {
	case <-f.up.reportCancelled:
	case <-time.After(20 * time.Second):
		t.Error("the job's upstream request was not cancelled")
	}
	s := famOK(t, f.h, "a1", "follow_poll", `{"session_id":"`+sid+`"}`)
	if s["status"] != "stopped" || s["end_reason"] != "shutdown" {
		t.Errorf("session after the stop: %v", s)
	}
	j := famOK(t, f.h, "a1", "report_status", `{"job_id":"`+jid+`"}`)
	if e, _ := j["error"].(map[string]any); j["status"] != "failed" || e["code"] != "shutdown" {
		t.Errorf("job after the stop: %v", j)
	}
	for _, tool := range []string{"follow_start", "report_start"} {
		args := `{}`
		if tool == "report_start" {
			args = `{"delay_ms":1}`
		}
		_, res := famCall(t, f.h, "a1", tool, args)
		if !res.IsError || !strings.Contains(res.Text, "stopping") {
			t.Errorf("%s after the stop: %+v", tool, res)
		}
	}
}
