package mcpserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

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

// The SDK's lines about each connection (three per sessionless request)
// are at debug, under the endpoint's logger name plus ".sdk"; its other
// lines keep their level, and session IDs become their digest.
func TestSDKLogLines(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	l := slogFromZap(zap.New(core).Named("http.handlers.crank"))
	l.Info("server connecting")
	l.Info("server session connected", "session_id", "S3CR3T-SESSION")
	l.Info("resource subscribed", "uri", "demo://x", "session_id", "S3CR3T-SESSION")
	all := logs.All()
	if len(all) != 1 || all[0].Message != "resource subscribed" || all[0].LoggerName != "http.handlers.crank.sdk" {
		t.Fatalf("logged %+v", all)
	}
	if s := fmt.Sprint(all[0].ContextMap()); strings.Contains(s, "S3CR3T-SESSION") {
		t.Errorf("a session ID logged: %s", s)
	}
	debug, dlogs := observer.New(zap.DebugLevel)
	slogFromZap(zap.New(debug)).Info("server session disconnected")
	if d := dlogs.All(); len(d) != 1 || d[0].Level != zap.DebugLevel || d[0].LoggerName != "sdk" {
		t.Errorf("at debug: %+v", d)
	}
}
