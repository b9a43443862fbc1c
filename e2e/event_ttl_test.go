package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// A client that resumes a stream after its events' event_ttl has passed
// gets a prompt 400 saying the events are gone — the documented answer —
// never a hang or a partial stream; before the TTL the same resume
// replays the stream.
func TestResumeAfterEventTTL(t *testing.T) {
	t.Parallel()
	up := streamUpstream(t)
	g := startGateway(t, gatewayOptions{Operations: windowOperations(up.URL), Handler: "event_ttl 2s"})
	c := &rawMCP{t: t, url: g.MCPURL}
	c.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, fmt.Sprintf(chatCall, "10", `"tok"`), nil)
	rd := newSSEReader(resp.Body)
	prime, ok := rd.next()
	if !ok || prime.ID == "" {
		t.Fatalf("priming event %+v", prime)
	}
	cancel() // the client goes away right after the priming event
	resp.Body.Close()

	// resume asks for the stream after the priming event, bounded in time
	// so that a hang fails the test rather than stalling it.
	resume := func() (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp := c.do(ctx, http.MethodGet, "", map[string]string{"Last-Event-ID": prime.ID, "Content-Type": ""})
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("resume: the answer did not end: %v (%s)", err, b)
		}
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	waitFor(t, "the dropped stream to be released", func() bool {
		code, body = resume()
		return code != http.StatusConflict
	})
	if code != http.StatusOK {
		t.Fatalf("resume within the event TTL: %d %s", code, body)
	}
	// Once the TTL has passed (the lease's granularity may add a little),
	// the same resume is refused promptly.
	deadline := time.Now().Add(60 * time.Second)
	for code == http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("the stream's events outlived event_ttl 2s by a minute")
		}
		time.Sleep(500 * time.Millisecond)
		code, body = resume()
	}
	if code != http.StatusBadRequest {
		t.Fatalf("resume after the event TTL: %d %s, want 400", code, body)
	}
	t.Logf("resume after the event TTL: %d %s", code, body)
}
