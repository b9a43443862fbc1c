package host_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host"
)

// cursorValue reads the upstream cursor inside a window's cursor, as the
// tests look at it (clients pass cursors back unchanged): its value's "c".
func cursorValue(t *testing.T, c string) string {
	t.Helper()
	if c == "" {
		return ""
	}
	v, _, ok := strings.Cut(strings.TrimPrefix(c, "crank2:"), ".")
	b, err := base64.RawURLEncoding.DecodeString(v)
	var st struct{ C string }
	if !ok || err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("cursor %q is not a window's cursor", c)
	}
	return st.C
}

// edit changes the last character of a cursor.
func edit(c string) string {
	last := c[len(c)-1]
	if last == 'A' {
		last = 'B'
	} else {
		last = 'A'
	}
	return c[:len(c)-1] + string(last)
}

// A window takes back only the cursors a window of the same tool and
// workspace returned: a cursor of the client's own making (an upstream
// cursor, the format of an earlier release), an edited one, another
// tool's or another workspace's is an invalid argument naming cursor, and
// never reaches the upstream.
func TestWindowRefusesForgedCursors(t *testing.T) {
	f := newWindowFixture(t)
	own := f.call(t, "poll_latest", `{}`)
	other := f.call(t, "poll", `{}`)
	if own.Cursor == "" || other.Cursor == "" {
		t.Fatalf("no cursors: %q %q", own.Cursor, other.Cursor)
	}
	// The tool's own cursor continues the window.
	if next := f.call(t, "poll_latest", `{"cursor":"`+own.Cursor+`"}`); next.res.IsError || next.EndReason != "done" {
		t.Fatalf("own cursor: %s", next.res.Text)
	}
	call := func(workspace, cursor string) *host.Result {
		args, _ := json.Marshal(map[string]string{"cursor": cursor})
		res, err := f.h.Call(context.Background(), host.CallRequest{Tool: f.h.Tool("poll_latest"), Arguments: args, WorkspaceID: workspace})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range []struct{ name, workspace, cursor string }{
		{"an upstream cursor", "", "999"},
		{"an inside-document cursor of an earlier release", "", "crank1:eyJjIjoiOTk5IiwicyI6MX0"},
		{"an edited cursor", "", edit(own.Cursor)},
		{"another tool's cursor", "", other.Cursor},
		{"another workspace's cursor", "ws2", own.Cursor},
	} {
		res := call(tc.workspace, tc.cursor)
		if !res.IsError || !strings.Contains(res.Text, `invalid arguments for tool "poll_latest": cursor: not a cursor this tool returned`) {
			t.Errorf("%s (%q): %s", tc.name, tc.cursor, res.Text)
		}
	}
	f.up.mu.Lock()
	defer f.up.mu.Unlock()
	if slices.Contains(f.up.pollArgs, "999") {
		t.Errorf("a forged cursor reached the upstream: %q", f.up.pollArgs)
	}
}

// A session poll takes back only the cursors this session's polls
// returned: a sequence number of the client's making, an edited cursor and
// another session's cursor are invalid arguments naming cursor, and
// acknowledge nothing.
func TestStreamSessionPollRefusesForgedCursors(t *testing.T) {
	t.Parallel()
	f := newFamilyFixture(t, familyOps, host.Quotas{})
	startPolled := func() (string, map[string]any) {
		id := famOK(t, f.h, "a1", "follow_start", `{}`)["session_id"].(string)
		first := pollUntil(t, f.h, "follow_poll", `{"session_id":"`+id+`","max_items":5}`, func(m map[string]any) bool {
			return len(m["items"].([]any)) == 5
		})
		return id, first
	}
	a, first := startPolled()
	b, _ := startPolled()
	for _, tc := range []struct{ name, session, cursor string }{
		{"a sequence number", a, "3"},
		{"an edited cursor", a, edit(first["cursor"].(string))},
		{"another session's cursor", b, first["cursor"].(string)},
	} {
		_, res := famCall(t, f.h, "a1", "follow_poll", `{"session_id":"`+tc.session+`","cursor":"`+tc.cursor+`","max_items":5}`)
		if !res.IsError || !strings.Contains(res.Text, `invalid arguments for tool "follow_poll": cursor: not a cursor`) {
			t.Errorf("%s (%q): %s", tc.name, tc.cursor, res.Text)
		}
	}
	// Nothing was acknowledged: the first poll's items are still there.
	again := famOK(t, f.h, "a1", "follow_poll", `{"session_id":"`+a+`","max_items":5}`)
	if fmtItems(again) != fmtItems(first) {
		t.Errorf("after the refusals: %v, want %v", again["items"], first["items"])
	}
}

func fmtItems(m map[string]any) string {
	b, _ := json.Marshal(m["items"])
	return string(b)
}
