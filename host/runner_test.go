package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/store"
)

// A poll through another session operation's poll tool is "not found"
// and acknowledges nothing: the session's own poll then returns the same
// items from the same position.
func TestPollOfAnotherOperationAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	id := famOK(t, f.h, "a1", "follow_start", `{}`)["session_id"].(string)
	first := pollUntil(t, f.h, "follow_poll", `{"session_id":"`+id+`","max_items":3}`, func(m map[string]any) bool {
		items, _ := m["items"].([]any)
		return len(items) == 3
	})
	cursor := first["cursor"].(string)
	m, res := famCall(t, f.h, "a1", "follow_short_poll", `{"session_id":"`+id+`","cursor":"`+cursor+`"}`)
	if !res.IsError || !strings.Contains(res.Text, "not found") {
		t.Fatalf("poll through another operation: %v %+v", m, res)
	}
	again := famOK(t, f.h, "a1", "follow_poll", `{"session_id":"`+id+`","max_items":3}`)
	if fmt.Sprint(again["items"]) != fmt.Sprint(first["items"]) {
		t.Fatalf("the other operation's poll acknowledged items: first %v, now %v", first["items"], again["items"])
	}
}

// panickingStore panics in the runners' store calls chosen by its
// switches, as a bug under a runner would.
type panickingStore struct {
	host.Store
	appends  atomic.Bool // AppendStreamSessionItems
	progress atomic.Bool // UpdateJob without a status (progress)
}

func (p *panickingStore) AppendStreamSessionItems(ctx context.Context, id string, a store.Append) (int, error) {
	if p.appends.Load() {
		panic("append exploded")
	}
	return p.Store.AppendStreamSessionItems(ctx, id, a)
}

func (p *panickingStore) UpdateJob(ctx context.Context, id string, u store.JobUpdate) (*store.AsyncJobHandle, error) {
	if p.progress.Load() && u.Status == "" {
		panic("progress exploded")
	}
	return p.Store.UpdateJob(ctx, id, u)
}

// A panic in a session's or a job's background runner fails that session
// or job with internal_error (and logs it) instead of ending the process.
func TestRunnerPanicFailsTheEntity(t *testing.T) {
	t.Parallel()
	ps := &panickingStore{}
	f := newFamilyFixture(t, familyOps, host.Quotas{}, func(s host.Store) host.Store { ps.Store = s; return ps })
	ps.appends.Store(true)
	ps.progress.Store(true)

	id := famOK(t, f.h, "a1", "follow_start", `{}`)["session_id"].(string)
	m := pollUntil(t, f.h, "follow_poll", `{"session_id":"`+id+`"}`, func(m map[string]any) bool { return m["status"] != "active" })
	e, _ := m["error"].(map[string]any)
	if m["status"] != "failed" || e["code"] != "internal_error" || m["end_reason"] != "internal_error" ||
		strings.Contains(fmt.Sprint(e["message"]), "exploded") {
		t.Fatalf("session after its writer panicked: %v", m)
	}

	task, res, err := f.h.StartTask(context.Background(), host.CallRequest{Tool: f.h.Tool("snapshot_start"),
		Arguments: json.RawMessage(`{}`), WorkspaceID: "ws", AgentID: "a1"})
	if err != nil || res != nil {
		t.Fatalf("StartTask: %v %+v", err, res)
	}
	done, out, err := f.h.WaitTask(context.Background(), host.Scope{WorkspaceID: "ws", AgentID: "a1"}, task.ID)
	if err != nil || done.Status != store.JobFailed || !strings.Contains(out.Text, "internal error") {
		t.Fatalf("job after its runner panicked: %v, %+v, %+v", err, done, out)
	}
	if n := f.logs.FilterMessageSnippet("runner, recovered").Len(); n < 2 {
		t.Errorf("%d panics logged, want one per runner", n)
	}
	// The process, and the host, go on.
	ps.appends.Store(false)
	ps.progress.Store(false)
	famOK(t, f.h, "a1", "report_start", `{"delay_ms":1}`)
}
