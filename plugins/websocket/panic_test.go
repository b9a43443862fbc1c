package websocket_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/websocket"
)

// panicky is a stream sender that panics on an item, as a bug in what the
// reader does with a message would.
type panicky struct{ gaps int }

func (*panicky) Item(sdk.Item) error { panic("item") }
func (p *panicky) Gap(string) error  { p.gaps++; return nil }

// A panic in the goroutine that reads the connection ends that stream
// with an error; it does not end the adapter process (here: the test).
func TestReaderPanicEndsStream(t *testing.T) {
	t.Parallel()
	f := newFeed(t, func(p *peer) {
		p.next()
		p.send(map[string]any{"type": "subscribed"})
		p.send(alert(1))
		p.hold()
	}, nil)
	cfg, _ := json.Marshal(alertConfig(f.url))
	st := websocket.New().(sdk.Streamer)
	done := make(chan error, 1)
	go func() {
		done <- st.Stream(ctxT(t), &sdk.Request{
			Operation: sdk.Operation{Name: "alerts", Config: cfg, Timeout: 5 * time.Second, Mode: sdk.ModeWindow},
			Arguments: json.RawMessage(`{"channel":"alerts"}`),
		}, &panicky{})
	}()
	select {
	case err := <-done:
		var pe *sdk.PanicError
		if !errors.As(err, &pe) {
			t.Fatalf("stream ended with %v, want the reader's panic as an error", err)
		}
		if f.conns.Load() != 1 {
			t.Errorf("%d connections: a panic must not reconnect", f.conns.Load())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end")
	}
}
