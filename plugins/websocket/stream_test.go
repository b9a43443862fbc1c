package websocket_test

import (
	"fmt"
	"strings"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// alertConfig subscribes to a channel, waits for the ack and keeps the
// alerts (not the heartbeats).
func alertConfig(url string) map[string]any {
	return map[string]any{
		"url":          url + "/feed",
		"subprotocols": []string{"feed.v1"},
		"subscribe":    map[string]any{"op": "subscribe", "channel": "{{channel}}", "from": "{{cursor}}"},
		"unsubscribe":  map[string]any{"op": "unsubscribe", "channel": "{{channel}}"},
		"ack":          map[string]any{"path": "$.type", "equals": "subscribed"},
		"filter":       "@.type == 'alert'",
		"id_path":      "$.seq",
		"reconnect":    map[string]any{"initial_delay_ms": 1, "max_delay_ms": 2},
	}
}

func alert(seq int) map[string]any { return map[string]any{"type": "alert", "seq": seq} }

func TestSubscribeAckUnsubscribe(t *testing.T) {
	t.Parallel()
	subscribed := make(chan string, 1)
	stopped := make(chan string, 2)
	f := newFeed(t, func(p *peer) {
		subscribed <- p.next()
		p.send(map[string]any{"type": "subscribed", "channel": "alerts"})
		p.send(map[string]any{"type": "heartbeat"}) // filtered out
		for i := 1; ; i++ {
			if !p.send(alert(i)) {
				break
			}
			if i == 3 {
				// The window is full: the client unsubscribes and closes.
				stopped <- p.next()
				stopped <- fmt.Sprint(p.waitClosed())
				return
			}
		}
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: alertConfig(f.url), Args: map[string]any{"channel": "alerts"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if want := `{"seq":1,"type":"alert"}#1 | {"seq":2,"type":"alert"}#2 | {"seq":3,"type":"alert"}#3`; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if got := <-subscribed; got != `{"channel":"alerts","from":null,"op":"subscribe"}` {
		t.Errorf("subscribe message: %s", got)
	}
	if got := <-stopped; got != `{"channel":"alerts","op":"unsubscribe"}` {
		t.Errorf("unsubscribe message: %s", got)
	}
	if got := <-stopped; got != fmt.Sprint(ws.StatusNormalClosure) {
		t.Errorf("close status: %s, want a normal closure", got)
	}
}

func TestNeverAcks(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.next()
		p.send(alert(1)) // an item before the ack is still an item
		p.hold()
	}, nil)
	cfg := alertConfig(f.url)
	cfg["ack"] = map[string]any{"path": "$.type", "equals": "subscribed", "timeout_ms": 100}
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"channel": "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if want := `{"seq":1,"type":"alert"}#1 | error timeout: the upstream did not acknowledge the subscription within ack.timeout_ms (100 ms)`; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if n := f.conns.Load(); n != 1 {
		t.Errorf("%d connections: a first connection that is not acknowledged is not retried", n)
	}
}

func TestDropReconnectResubscribeGap(t *testing.T) {
	t.Parallel()
	subs := make(chan string, 2)
	f := newFeed(t, func(p *peer) {
		subs <- p.next()
		p.send(map[string]any{"type": "subscribed"})
		if p.n == 1 {
			p.send(alert(1))
			p.send(alert(2))
			// Drop the connection without a close frame, mid-stream.
			p.c.CloseNow()
			return
		}
		p.send(alert(3))
		p.send(alert(4))
		p.hold()
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: alertConfig(f.url), Args: map[string]any{"channel": "c"}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(events, ue)
	if len(got) != 5 || !strings.HasPrefix(got[2], "gap: the upstream connection was lost (the connection broke") {
		t.Fatalf("events: %q", got)
	}
	if got[0] != `{"seq":1,"type":"alert"}#1` || got[1] != `{"seq":2,"type":"alert"}#2` ||
		got[3] != `{"seq":3,"type":"alert"}#3` || got[4] != `{"seq":4,"type":"alert"}#4` {
		t.Fatalf("events: %q", got)
	}
	<-subs
	// The resubscription asks to resume after the last item seen.
	if s := <-subs; s != `{"channel":"c","from":"2","op":"subscribe"}` {
		t.Errorf("resubscribe: %s", s)
	}
}

func TestReconnectGivesUp(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.next()
		if p.n == 1 {
			p.send(map[string]any{"type": "subscribed"})
			p.send(alert(1))
			p.c.Close(ws.StatusGoingAway, "restarting")
			return
		}
		// Later connections are refused at once.
		p.c.Close(ws.StatusTryAgainLater, "busy")
	}, nil)
	cfg := alertConfig(f.url)
	cfg["reconnect"] = map[string]any{"max_attempts": 2, "initial_delay_ms": 1, "max_delay_ms": 1}
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"channel": "c"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	want := `{"seq":1,"type":"alert"}#1 | gap: the upstream connection was lost (the upstream closed the connection with status 1001 (StatusGoingAway): restarting); ` +
		`reconnecting and subscribing again: messages sent meanwhile may have been missed | ` +
		`error transport: gave up after 2 reconnect attempts: the upstream closed the connection with status 1013 (StatusTryAgainLater): busy`
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	if n := f.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (one lost, two failed attempts)", n)
	}
}

func TestNormalCloseEndsStream(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.send("hello")
		p.send(map[string]any{"n": 1})
		p.c.Close(ws.StatusNormalClosure, "")
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"url": f.url}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); got != `"hello" | {"n":1} | end` {
		t.Fatalf("events: %s", got)
	}
}

func TestHeartbeatLoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		heartbeat map[string]any
		reason    string
	}{
		{"ping", map[string]any{"ping_interval_ms": 20, "pong_timeout_ms": 50}, "heartbeat lost: no pong within heartbeat.pong_timeout_ms (50 ms) of a ping"},
		{"message", map[string]any{"ping_interval_ms": 20, "pong_timeout_ms": 50, "message": map[string]any{"op": "ping"}},
			"heartbeat lost: no message within heartbeat.pong_timeout_ms (50 ms) of a heartbeat message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The first connection sends one item and then goes silent:
			// it reads nothing, so it answers neither pings nor heartbeat
			// messages. The second one behaves.
			f := newFeed(t, func(p *peer) {
				if p.n == 1 {
					p.send(map[string]any{"n": 1})
					p.hold()
					return
				}
				for m := p.next(); m != ""; m = p.next() {
					if m == `{"op":"ping"}` {
						p.send(map[string]any{"pong": true})
					}
					if p.n == 2 {
						p.send(map[string]any{"n": 2})
						p.n = -1
					}
				}
			}, func(n int) bool { return n == 1 })
			cfg := map[string]any{"url": f.url, "heartbeat": tc.heartbeat, "filter": "@.n",
				"reconnect": map[string]any{"initial_delay_ms": 1, "max_delay_ms": 1}}
			if tc.name == "ping" {
				// The well-behaved connection must say something for
				// the test to see it: a subscribe it answers.
				cfg["subscribe"] = "hi"
			}
			events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg}, 3)
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(events, ue)
			if len(got) != 3 || got[0] != `{"n":1}` || got[2] != `{"n":2}` ||
				!strings.Contains(got[1], "gap: the upstream connection was lost ("+tc.reason+")") {
				t.Fatalf("events: %q", got)
			}
		})
	}
}

func TestFlood(t *testing.T) {
	t.Parallel()
	closed := make(chan string, 1)
	f := newFeed(t, func(p *peer) {
		for i := 0; p.send(map[string]any{"i": i}); i++ {
		}
		closed <- fmt.Sprint(p.waitClosed())
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"url": f.url}}, 2000)
	if err != nil || ue != nil {
		t.Fatal(ue, err)
	}
	if len(events) != 2000 || string(events[1999].Item.Data) != `{"i":1999}` {
		t.Fatalf("%d events, last %v", len(events), events[len(events)-1])
	}
	// The adapter stops reading and closes even while the server floods.
	if got := <-closed; got != fmt.Sprint(ws.StatusNormalClosure) {
		t.Errorf("close status %s", got)
	}
}

func TestOversizeMessageSkipped(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.send(map[string]any{"n": 1})
		p.send(map[string]any{"big": strings.Repeat("x", 100<<10)})
		p.send(map[string]any{"n": 2})
		p.c.Close(ws.StatusNormalClosure, "")
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"url": f.url, "max_message_bytes": 1024}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if want := `{"n":1} | gap: a message larger than max_message_bytes (1024) was skipped | {"n":2} | end`; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

func TestBinaryMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mode, want string }{
		{"", "error bad_response: the upstream sent a binary message: set binary to base64, text or skip to accept binary messages"},
		{"base64", `"AAH/" | {"t":1} | end`},
		{"text", `gap: a binary message that is not UTF-8 text was skipped (binary: text) | {"t":1} | end`},
		{"skip", `end`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			f := newFeed(t, func(p *peer) {
				p.c.Write(p.ctx, ws.MessageBinary, []byte{0, 1, 255})
				p.c.Write(p.ctx, ws.MessageBinary, []byte(`{"t":1}`))
				p.c.Close(ws.StatusNormalClosure, "")
			}, nil)
			cfg := map[string]any{"url": f.url}
			if tc.mode != "" {
				cfg["binary"] = tc.mode
			}
			events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg}, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.mode == "base64" {
				want = `"AAH/" | "eyJ0IjoxfQ==" | end`
			}
			if got := strings.Join(summarize(events, ue), " | "); got != want {
				t.Fatalf("events:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestHandshakeRefused(t *testing.T) {
	t.Parallel()
	srv := newFeed(t, func(p *peer) {}, nil)
	// A plain HTTP path on the same server: no upgrade, a 403.
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{
		"url":     strings.Replace(srv.url, "ws://", "ws://user:pw@", 1) + "/feed?token=s3cret",
		"headers": map[string]any{"Origin": "http://evil.example"},
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if !strings.HasPrefix(got, "error upstream_status: the WebSocket handshake was answered with HTTP 403 Forbidden instead of 101") {
		t.Fatalf("events: %s", got)
	}
	if up := ue.Upstream; up != srv.url { // scheme and host: no userinfo, path or query
		t.Errorf("upstream name %q", up)
	}
	if !ue.Rejected || ue.Status != "403" {
		t.Errorf("a refused handshake: %+v", ue)
	}
}

func TestConnectRefused(t *testing.T) {
	t.Parallel()
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{"url": "ws://127.0.0.1:1/x?key=s3cret"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if !strings.HasPrefix(got, "error transport: cannot connect") || strings.Contains(got, "s3cret") {
		t.Fatalf("events: %s", got)
	}
}

func TestDroppedSubscriptionsRunOutOfAttempts(t *testing.T) {
	t.Parallel()
	// Every connection is accepted and closed right after the subscribe
	// message, with no ack configured: the connections count as made but
	// never get anywhere, so the attempts run out.
	f := newFeed(t, func(p *peer) {
		p.next()
		p.c.Close(ws.StatusInternalError, "no")
	}, nil)
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: map[string]any{
		"url": f.url, "subscribe": "sub", "reconnect": map[string]any{"max_attempts": 3, "initial_delay_ms": 1, "max_delay_ms": 1},
	}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(events, ue)
	if len(got) != 4 || !strings.HasPrefix(got[3], "error transport: gave up after 3 reconnect attempts: the upstream closed the connection with status 1011") {
		t.Fatalf("events: %q", got)
	}
	if n := f.conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

func TestNeverAcksNorCloses(t *testing.T) {
	t.Parallel()
	// The server reads nothing: no ack, no answer to the close frame. The
	// ack timeout still ends the stream, the close bounded by
	// close_timeout_ms.
	f := newFeed(t, func(p *peer) { p.hold() }, func(int) bool { return true })
	cfg := alertConfig(f.url)
	cfg["ack"] = map[string]any{"path": "$.type", "timeout_ms": 50}
	cfg["close_timeout_ms"] = 50
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"channel": "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(summarize(events, ue), " | "); got != "error timeout: the upstream did not acknowledge the subscription within ack.timeout_ms (50 ms)" {
		t.Fatalf("events: %s", got)
	}
}

// Every connection of an entry held to egress rules is checked where it
// is dialled, its reconnects too: rules that name the feed's address
// let the stream through a dropped connection and its reconnect; under
// * the loopback feed is never connected to, and the stream ends with
// the refusal rather than retrying it.
func TestEgressOnEveryConnect(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.next()
		p.send(map[string]any{"type": "subscribed"})
		p.send(alert(p.n))
		if p.n == 1 {
			p.c.CloseNow() // the stream reconnects
			return
		}
		p.hold()
	}, nil)
	call := adaptertest.Call{Config: alertConfig(f.url), Args: map[string]any{"channel": "c"}, Egress: []string{f.url}}
	events, ue, err := newHarness(t).Stream(ctxT(t), call, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := summarize(events, ue); len(got) != 3 || !strings.HasPrefix(got[1], "gap:") || f.conns.Load() != 2 {
		t.Fatalf("named: events %q after %d connections", got, f.conns.Load())
	}
	call.Egress = []string{"*"}
	events, ue, err = newHarness(t).Stream(ctxT(t), call, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(summarize(events, ue), " | ")
	if !strings.Contains(got, "egress refused") || !strings.Contains(got, "is a loopback address") || f.conns.Load() != 2 {
		t.Fatalf("under *: %s after %d connections", got, f.conns.Load())
	}
}
