package console

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// The Live screen's list of MCP sessions, through the console's API path,
// names sessions by their handle, never by their ID (the client's
// credential); its End button sends that handle, and an ID is refused.
func TestLiveScreenShowsNoMCPSessionIDs(t *testing.T) {
	_, st := storetest.Embedded(t)
	ctx := context.Background()
	id := rand.Text()
	if err := st.PutMCPSession(ctx, store.MCPSession{ID: id, WorkspaceID: "default", ClientName: "cli", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	g := &admin.Gateway{Store: st}
	h := &Handler{
		API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var e *admin.Error
			if err := g.ServeHTTP(w, r); errors.As(err, &e) {
				admin.WriteError(w, e)
			} else if err != nil {
				t.Errorf("not an *admin.Error: %v", err)
			}
		}),
		User: func(*http.Request) string { return "alice" },
	}
	do := func(method, path string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr, r.Host = "192.0.2.7:1", "gw.example"
		if method != http.MethodGet {
			r.Header.Set("Origin", "http://gw.example")
			r.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		if strings.Contains(string(body), id) {
			t.Fatalf("%s %s carries the session ID: %s", method, path, body)
		}
		return w.Code, string(body)
	}
	// What loadLiveNow in app.js asks for.
	code, body := do("GET", "/console/api/live/default/mcp-sessions?limit=500")
	var list struct {
		Entries []struct {
			ID string `json:"id"`
		} `json:"entries"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Entries) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}
	// What stopLive sends: the entry's id, the handle.
	if code, body := do("DELETE", "/console/api/live/default/mcp-sessions/"+url.PathEscape(id)); code != http.StatusNotFound {
		t.Fatalf("end by the session ID: %d %s, want 404", code, body)
	}
	if code, body := do("DELETE", "/console/api/live/default/mcp-sessions/"+url.PathEscape(list.Entries[0].ID)); code != http.StatusOK {
		t.Fatalf("end by the handle: %d %s", code, body)
	}
	if _, err := st.GetMCPSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the session is still there: %v", err)
	}
}
