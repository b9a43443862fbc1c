package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/crankmcp/crank/store/storetest"
)

// A client drops a window's SSE stream on replica A after two chunks and
// resumes it on replica B with Last-Event-ID, as a client behind a load
// balancer without affinity would: B answers every remaining event once,
// from the event log in etcd, and the response last (resuming again
// while A has not stored the rest yet).
func TestResumeOnAnotherReplica(t *testing.T) {
	t.Parallel()
	etcd := storetest.NewServer(t)
	up := streamUpstream(t)
	opts := func(name string) gatewayOptions {
		return gatewayOptions{Operations: windowOperations(up.URL), Crank: fmt.Sprintf(`etcd {
			%s
			replica_name %s
		}`, etcd.Caddyfile(), name)}
	}
	a, b := startGateway(t, opts("a")), startGateway(t, opts("b"))
	onA := &rawMCP{t: t, url: a.MCPURL}
	onA.initialize("2025-11-25")

	ctx, cancel := context.WithCancel(context.Background())
	resp := onA.do(ctx, http.MethodPost, fmt.Sprintf(chatCall, "10", `"tok"`), nil)
	rd := newSSEReader(resp.Body)
	var seen []sseEvent
	for len(seen) < 3 { // the priming event and two chunks
		ev, ok := rd.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		if !ev.Comment {
			seen = append(seen, ev)
		}
	}
	cancel()
	resp.Body.Close()

	onB := &rawMCP{t: t, url: b.MCPURL, version: onA.version, session: onA.session}
	// B answers what the event log holds; a stream it ends before the
	// response (A has not stored the rest yet) is resumed again from its
	// last event, as the priming event's retry field tells a client to.
	var out []sseEvent
	last := seen[len(seen)-1].ID
	waitFor(t, "the resumed stream on B", func() bool {
		resp := onB.do(context.Background(), http.MethodGet, "", map[string]string{"Last-Event-ID": last, "Content-Type": ""})
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusConflict {
			return false // A has not noticed the drop yet
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("resume on B: %s %s", resp.Status, body)
		}
		rd := newSSEReader(resp.Body)
		for {
			ev, ok := rd.next()
			if !ok {
				return false
			}
			if ev.Comment || ev.Data == "" {
				continue
			}
			out, last = append(out, ev), ev.ID
			if strings.Contains(ev.Data, `"id":10`) {
				return true
			}
		}
	})
	all := append(seen[1:], out...)
	ids := map[string]bool{}
	for i, ev := range all {
		if ev.ID == "" || ids[ev.ID] {
			t.Fatalf("event %d has id %q (duplicate or missing): %+v", i, ev.ID, all)
		}
		ids[ev.ID] = true
		if i < len(chatChunks) && !strings.Contains(ev.Data, `"notifications/progress"`) {
			t.Fatalf("event %d: %s, want progress", i, ev.Data)
		}
	}
	if len(all) != len(chatChunks)+1 || !strings.Contains(all[len(all)-1].Data, `"text":"Echo: hi\nline two — done"`) {
		t.Fatalf("events across A and B: %+v", all)
	}
}
