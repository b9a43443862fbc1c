package mcpserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// serveInitialize sends an initialize to ep in the background and returns
// the channel its answer comes on.
func serveInitialize(ep *Endpoint) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, mcptest.NewInitialize("/mcp"))
		done <- w
	}()
	return done
}

// answer waits for the answer on done, failing the test after 30s.
func answer(t *testing.T, done <-chan *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	select {
	case w := <-done:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

// A request that arrives before the endpoint has a host waits for the
// first Attach and is then served.
func TestRequestWaitsForHost(t *testing.T) {
	t.Parallel()
	_, st := storetest.Embedded(t)
	up := mcptest.NewUsers(t)
	hst := newTestHost(t, fmt.Sprintf(mcptest.UsersOps, up.URL), nil, nil)
	ep, err := New(testOptions("default"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ep.Close() })
	done := serveInitialize(ep)
	select {
	case w := <-done:
		t.Fatalf("answered before a host was attached: %d %s", w.Code, w.Body)
	case <-time.After(200 * time.Millisecond):
	}
	ep.Attach(hst, st)
	w := answer(t, done)
	if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize after Attach: %d %s", w.Code, w.Body)
	}
}

// A request still waiting for a host when the endpoint closes (its config
// did not start) gets 503 with Retry-After.
func TestRequestWaitingWhenClosed(t *testing.T) {
	t.Parallel()
	ep, err := New(testOptions("default"))
	if err != nil {
		t.Fatal(err)
	}
	done := serveInitialize(ep)
	time.Sleep(50 * time.Millisecond)
	_ = ep.Close()
	w := answer(t, done)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" ||
		!strings.Contains(w.Body.String(), `"retryable":true`) {
		t.Fatalf("answer %d %v %s, want 503 with Retry-After and a retryable JSON-RPC error", w.Code, w.Header(), w.Body)
	}
}
