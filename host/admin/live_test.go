package admin_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

// An MCP session's ID is its client's credential: the live list names
// sessions by a handle that is not one, on every page and in the next
// position, and the operator's stop takes that handle, never the ID.
func TestLiveListsNoMCPSessionIDs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ids := map[string]bool{}
	for range 3 {
		id := rand.Text() // as the MCP endpoint makes them
		ids[id] = true
		if err := f.st.PutMCPSession(ctx, store.MCPSession{ID: id, WorkspaceID: "ws", ClientName: "cli", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	noID := func(what string, body []byte) {
		t.Helper()
		for id := range ids {
			if strings.Contains(string(body), id) {
				t.Fatalf("%s carries the session ID %s: %s", what, id, body)
			}
		}
	}
	var handles []string
	after := ""
	for page := 0; ; page++ {
		r := f.want(http.StatusOK, "GET", "/crank/live/ws/mcp-sessions?limit=2&after="+url.QueryEscape(after), "")
		noID("a page of the list", r.body)
		m := r.obj(t)
		for _, e := range m["entries"].([]any) {
			handles = append(handles, e.(map[string]any)["id"].(string))
		}
		if after, _ = m["next"].(string); after == "" || page > 3 {
			break
		}
	}
	if len(handles) != 3 {
		t.Fatalf("handles: %v", handles)
	}
	for id := range ids {
		r := f.want(http.StatusNotFound, "DELETE", "/crank/live/ws/mcp-sessions/"+url.PathEscape(id), "")
		noID("the refusal of an ID as a handle", r.body)
	}
	f.want(http.StatusNotFound, "DELETE", "/crank/live/other/mcp-sessions/"+handles[0], "")
	for _, h := range handles {
		r := f.want(http.StatusOK, "DELETE", "/crank/live/ws/mcp-sessions/"+h, "")
		noID("a stop's answer", r.body)
	}
	for id := range ids {
		if _, err := f.st.GetMCPSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("session %s is still there after its stop: %v", id, err)
		}
	}
	for _, e := range f.audit.FilterField(zap.String("event", "live.stop")).FilterField(zap.String("outcome", "ok")).All() {
		noID("a stop's audit record", []byte(fmt.Sprint(e.ContextMap())))
	}
}
