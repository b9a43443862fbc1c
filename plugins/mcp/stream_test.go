package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

func streamTicks(t *testing.T, h *adaptertest.Harness, url, args string) ([]client.Event, string) {
	t.Helper()
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"url": url, "tool": "ticks"},
		Args: args, Mode: sdk.ModeWindow, Timeout: 20 * time.Second}, 0)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	msg := ""
	if ue != nil {
		msg = ue.Error()
	}
	return events, msg
}

// Each progress notification of the upstream call is an item of the
// window; the call's result ends it.
func TestStreamProgressItems(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	events, fail := streamTicks(t, h, up.srv.URL, `{"n": 3}`)
	var got []string
	for _, e := range events {
		got = append(got, e.String())
	}
	if fail != "" || strings.Join(got, " ") != `{"tick":1} {"tick":2} {"tick":3} end` {
		t.Fatalf("events %v, failure %q", got, fail)
	}
	// A call that fails after its progress ends the stream with the error.
	events, fail = streamTicks(t, h, up.srv.URL, `{"n": 2, "fail": true}`)
	if len(events) != 2 || !strings.Contains(fail, "2 ticks") {
		t.Fatalf("failing call: %v, failure %q", events, fail)
	}
}

// An upstream that floods progress costs bounded memory: what the adapter
// cannot pass on in time is dropped and reported as a gap.
func TestStreamProgressFlood(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	const n = 5000
	events, fail := streamTicks(t, h, up.srv.URL, fmt.Sprintf(`{"n": %d}`, n))
	if fail != "" {
		t.Fatal(fail)
	}
	items, dropped := 0, 0
	for _, e := range events {
		switch e.Kind {
		case client.EventItem:
			var v struct{ Tick int }
			if json.Unmarshal(e.Item.Data, &v) != nil || v.Tick < 1 || v.Tick > n {
				t.Fatalf("item %s", e.Item.Data)
			}
			items++
		case client.EventGap:
			var k int
			if _, err := fmt.Sscanf(e.Reason, "%d progress notifications were dropped", &k); err != nil {
				t.Fatalf("gap %q", e.Reason)
			}
			dropped += k
		}
	}
	// Every item is one notification; what was dropped is reported (on a
	// loaded machine the last ones may still be queued in the client
	// session when the stream stops waiting for them).
	if items == 0 || items+dropped > n || events[len(events)-1].Kind != client.EventEnd {
		t.Fatalf("%d items and %d dropped of %d; last %v", items, dropped, n, events[len(events)-1])
	}
	t.Logf("%d items passed on, %d dropped", items, dropped)
}

// A call's progress waits in a bounded buffer: beyond it notifications are
// counted and dropped, and unknown or late tokens are ignored.
func TestProgressRoutesBounded(t *testing.T) {
	var r progressRoutes
	tok, sink, done := r.open()
	for i := range progressBuffer + 10 {
		r.deliver(&gomcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)})
	}
	r.deliver(&gomcp.ProgressNotificationParams{ProgressToken: "crank-unknown"})
	r.deliver(&gomcp.ProgressNotificationParams{ProgressToken: 7.0})
	if len(sink.ch) != progressBuffer || sink.dropped.Load() != 10 {
		t.Fatalf("%d buffered, %d dropped", len(sink.ch), sink.dropped.Load())
	}
	done()
	r.deliver(&gomcp.ProgressNotificationParams{ProgressToken: tok})
	if len(r.calls) != 0 || sink.dropped.Load() != 10 {
		t.Fatalf("after the call: %d routes, %d dropped", len(r.calls), sink.dropped.Load())
	}
}

// A unary call whose client asked for progress relays the upstream's
// progress reports, in order, before the answer; without the request the
// upstream is not asked for progress.
func TestInvokeRelaysProgress(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, false)
	h := newHarness(t)
	info, err := h.Describe(ctxT(t))
	if err != nil || !info.Capabilities.Progress {
		t.Fatalf("describe: %+v %v", info, err)
	}
	req := &sdk.Request{Operation: sdk.Operation{Name: "ticks", Config: json.RawMessage(`{"url":"` + up.srv.URL + `","tool":"ticks"}`)},
		Arguments: json.RawMessage(`{"n": 3}`)}
	var got []sdk.Progress
	res, err := h.Client.InvokeWithProgress(ctxT(t), req, info.Capabilities, func(p sdk.Progress) { got = append(got, p) })
	if err != nil || res.Text != "3 ticks" || len(got) != 3 || got[2] != (sdk.Progress{Progress: 3, Total: 3, Message: `{"tick":3}`}) {
		t.Fatalf("result %+v %v, progress %+v", res, err, got)
	}
	res, err = h.Client.Invoke(ctxT(t), req)
	if err != nil || res.Text != "3 ticks" {
		t.Fatalf("without progress: %+v %v", res, err)
	}
}
