package host_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
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
