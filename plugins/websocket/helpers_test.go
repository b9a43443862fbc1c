package websocket_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
	"github.com/crankmcp/crank/plugins/websocket"
)

// ctxT bounds a test so that a bug shows as a failure, not a hang.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newHarness(t testing.TB) *adaptertest.Harness { return adaptertest.New(t, websocket.New()) }

// feed is a loopback WebSocket server. Each connection runs serve with
// its number (from 1).
type feed struct {
	t     testing.TB
	url   string
	conns atomic.Int32
	// done ends handlers still running when the test ends.
	done chan struct{}
}

// peer is the server's side of one connection.
type peer struct {
	t    testing.TB
	n    int
	c    *ws.Conn
	r    *http.Request
	ctx  context.Context
	msgs chan string
	// closed receives the close status the client sent (-1 for none)
	// once the connection ends.
	closed chan ws.StatusCode
	done   chan struct{}
}

// newFeed starts a server; read starts a reader of the client's messages
// on each connection unless the connection is "silent" (silent(n) true):
// a silent connection answers no ping.
func newFeed(t testing.TB, serve func(p *peer), silent func(n int) bool) *feed {
	f := &feed{t: t, done: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, &ws.AcceptOptions{Subprotocols: []string{"feed.v1"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		n := int(f.conns.Add(1))
		p := &peer{t: t, n: n, c: c, r: r, ctx: context.Background(), msgs: make(chan string, 64),
			closed: make(chan ws.StatusCode, 1), done: f.done}
		if silent == nil || !silent(n) {
			go func() {
				for {
					typ, b, err := c.Read(context.Background())
					if err != nil {
						p.closed <- ws.CloseStatus(err)
						close(p.msgs)
						return
					}
					if typ == ws.MessageText {
						p.msgs <- string(b)
					}
				}
			}()
		}
		serve(p)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(f.done) })
	f.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return f
}

// next returns the client's next message ("" when the connection ended).
func (p *peer) next() string {
	select {
	case m := <-p.msgs:
		return m
	case <-p.done:
		return ""
	}
}

// send writes a JSON message; it reports whether the write succeeded.
func (p *peer) send(v any) bool {
	b, _ := json.Marshal(v)
	return p.c.Write(context.Background(), ws.MessageText, b) == nil
}

// hold blocks until the test ends.
func (p *peer) hold() { <-p.done }

// waitClosed returns the close status the client sent.
func (p *peer) waitClosed() ws.StatusCode {
	select {
	case s := <-p.closed:
		return s
	case <-p.done:
		return -2
	}
}

// summarize renders stream events compactly: item data (#cursor), gap, end
// or error kind.
func summarize(events []client.Event, ue *sdk.UpstreamError) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.String())
	}
	if ue != nil {
		out = append(out, "error "+ue.Kind.String()+": "+ue.Message)
	}
	return out
}
