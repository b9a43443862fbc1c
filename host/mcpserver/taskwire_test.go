package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// A failed task's status message says why and, for an error with a code,
// which: a task whose replica died says owner_lost and that it may be
// started again.
func TestTaskStatusMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ err, want string }{
		{`{"code":"owner_lost","message":"the replica running it stopped renewing its owner lease","retryable":true}`,
			"The job failed (owner_lost, retryable): the replica running it stopped renewing its owner lease"},
		{`{"code":"upstream","message":"HTTP 500"}`, "The job failed (upstream): HTTP 500"},
		{`{"message":"no such export"}`, "The job failed: no such export"},
		{`not json`, "The job failed."},
	} {
		got := wireTaskOf(&host.Task{ID: "job_x", Status: store.JobFailed, Error: json.RawMessage(c.err)}).StatusMessage
		if got != c.want {
			t.Errorf("error %s: status message %q, want %q", c.err, got, c.want)
		}
	}
}
