package websocket_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// stompConfig subscribes with a plain-text STOMP SUBSCRIBE frame.
func stompConfig(url string) map[string]any {
	return map[string]any{
		"url":       url + "/stomp",
		"subscribe": "SUBSCRIBE\ndestination:/topic/{{topic}}\nid:sub-0\nfrom:{{cursor}}\n\n\x00",
		"reconnect": map[string]any{"max_attempts": 0},
	}
}

// injection is a value that, put raw into the frame above, ends it and
// sends a second frame subscribing to another destination.
const injection = "public\n\n\x00SUBSCRIBE\ndestination:/topic/admin-only\nid:sub-1\n\n\x00"

// firstMessageFeed is a feed that hands on the first message of each
// connection, then closes it normally.
func firstMessageFeed(t *testing.T) (*feed, chan string) {
	got := make(chan string, 4)
	f := newFeed(t, func(p *peer) {
		got <- p.next()
		p.c.Close(ws.StatusNormalClosure, "")
	}, nil)
	return f, got
}

// A value with a control character never reaches a plain-text message:
// neither an argument nor the cursor can end the frame and send another.
// The stream fails before connecting, naming what carried it.
func TestPlainTextRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   map[string]any
		cursor string
		want   string
	}{
		{"argument", map[string]any{"topic": injection}, "", `argument "topic"`},
		{"cursor", map[string]any{"topic": "public"}, "0\n\n\x00SUBSCRIBE\ndestination:/topic/admin-only\n\n\x00", `the cursor ({{cursor}})`},
		{"carriage return", map[string]any{"topic": "a\rb"}, "", `U+000D`},
		{"delete", map[string]any{"topic": "a\x7fb"}, "", `U+007F`},
		{"C1 control", map[string]any{"topic": "a\u0085b"}, "", `U+0085`},
		{"line separator", map[string]any{"topic": "a\u2028b"}, "", `U+2028`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, got := firstMessageFeed(t)
			events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: stompConfig(f.url), Args: tc.args, Cursor: tc.cursor}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, tc.want) ||
				!strings.Contains(ue.Message, "control character") || !strings.Contains(ue.Message, "subscribe") {
				select {
				case m := <-got:
					t.Fatalf("the upstream received %q; events %v, error %+v", m, events, ue)
				default:
					t.Fatalf("events %v, error %+v: want an invalid-argument error naming %s", events, ue, tc.want)
				}
			}
			if n := f.conns.Load(); n != 0 {
				t.Errorf("%d connections: the stream must fail before it connects", n)
			}
		})
	}
}

// The same values in a JSON message are JSON-escaped: one message, whose
// field holds the value exactly.
func TestJSONMessagesEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	f, got := firstMessageFeed(t)
	cfg := map[string]any{
		"url":       f.url + "/feed",
		"subscribe": map[string]any{"op": "subscribe", "channel": "{{topic}}", "text": "t={{topic}}", "from": "{{cursor}}"},
	}
	cursor := "0\n\x00\u2028"
	_, _, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"topic": injection}, Cursor: cursor}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Op, Channel, Text, From string }
	raw := <-got
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Channel != injection || m.Text != "t="+injection || m.From != cursor {
		t.Fatalf("subscribe message %q: %+v %v", raw, m, err)
	}
	if strings.ContainsAny(raw, "\n\x00") {
		t.Errorf("a control character went out unescaped: %q", raw)
	}
}

// An item id (id_path) with a control character does not become the
// cursor of a plain-text resubscription: the stream fails naming id_path
// rather than send it.
func TestPlainTextRefusesControlCharactersInItemIDs(t *testing.T) {
	t.Parallel()
	subs := make(chan string, 4)
	f := newFeed(t, func(p *peer) {
		m := p.next()
		if m == "" {
			return
		}
		subs <- m
		if p.n == 1 {
			p.send(map[string]any{"seq": "7\n\n\x00SUBSCRIBE\ndestination:/topic/admin-only\n\n\x00"})
			p.c.CloseNow()
			return
		}
		p.c.Close(ws.StatusNormalClosure, "")
	}, nil)
	cfg := stompConfig(f.url)
	cfg["id_path"] = "$.seq"
	cfg["reconnect"] = map[string]any{"initial_delay_ms": 1, "max_delay_ms": 2}
	events, ue, err := newHarness(t).Stream(ctxT(t), adaptertest.Call{Config: cfg, Args: map[string]any{"topic": "public"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ue == nil || ue.Kind != sdk.KindBadResponse || !strings.Contains(ue.Message, "id_path") || !strings.Contains(ue.Message, "control character") {
		t.Fatalf("events %v, error %+v", summarize(events, nil), ue)
	}
	if first := <-subs; first != "SUBSCRIBE\ndestination:/topic/public\nid:sub-0\nfrom:\n\n\x00" {
		t.Errorf("first subscribe: %q", first)
	}
	select {
	case m := <-subs:
		t.Fatalf("resubscribed with %q", m)
	case <-time.After(50 * time.Millisecond):
	}
}
