package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// subscriptionID is the id of the one subscription a connection carries.
const subscriptionID = "1"

// wsMessage is one graphql-transport-ws message.
type wsMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsDialect is what tells the two WebSocket protocols apart: the
// subprotocol, the names of the messages and how liveness is checked.
type wsDialect struct {
	name, subprotocol string
	// subscribe is the type of the message that starts the subscription;
	// stop the message that ends it.
	subscribe string
	stop      []byte
	// next is the type of an event.
	next string
	// appPing: liveness by Ping and Pong messages; otherwise by protocol
	// pings (coder/websocket's Ping, answered by the reader).
	appPing bool
	// types are the message types the server may send.
	types map[string]bool
}

var dialects = map[string]*wsDialect{
	protocolTransportWS: {name: protocolTransportWS, subprotocol: "graphql-transport-ws", subscribe: "subscribe",
		stop: []byte(`{"id":"` + subscriptionID + `","type":"complete"}`), next: "next", appPing: true,
		types: map[string]bool{"connection_ack": true, "ping": true, "pong": true, "next": true, "error": true, "complete": true}},
	protocolLegacy: {name: protocolLegacy, subprotocol: "graphql-ws", subscribe: "start",
		stop: []byte(`{"id":"` + subscriptionID + `","type":"stop"}`), next: "data",
		types: map[string]bool{"connection_ack": true, "connection_error": true, "ka": true, "data": true, "error": true, "complete": true}},
}

// Messages of graphql-transport-ws's heartbeat.
var (
	wsPing = []byte(`{"type":"ping"}`)
	wsPong = []byte(`{"type":"pong"}`)
)

// parseWSMessage reads one message of the dialect: a JSON object with a
// string type the server may send; an event, an error and complete carry
// an id.
func parseWSMessage(data []byte, d *wsDialect) (wsMessage, error) {
	var m wsMessage
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &m) != nil {
		return m, errors.New("a message is not a JSON object")
	}
	switch {
	case m.Type == "":
		return m, errors.New("a message has no type")
	case !d.types[m.Type]:
		return m, fmt.Errorf("unknown message type %q", clip(m.Type, 40))
	case m.ID == "" && (m.Type == d.next || m.Type == "error" || m.Type == "complete"):
		return m, fmt.Errorf("a %s message has no id", m.Type)
	}
	return m, nil
}

// wsConnection runs one connection: dial with the graphql-transport-ws
// subprotocol, ConnectionInit and its ack, Subscribe, then read until the
// host cancels (Complete and a normal close), the server completes the
// subscription, refuses it, closes, or a Pong is missed. established says
// the subscription was made, progressed that an event arrived.
func (s *subStream) wsConnection(ctx context.Context) (established, progressed bool, err error) {
	sc := &s.c.sub
	r := &wsReader{s: s, acked: make(chan struct{}), stopped: make(chan struct{})}
	dctx, cancel := context.WithTimeout(ctx, s.timeout)
	h := s.c.headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", userAgent)
	}
	conn, resp, err := ws.Dial(dctx, sc.url, &ws.DialOptions{
		HTTPClient:   s.client,
		HTTPHeader:   h,
		Host:         s.c.host,
		Subprotocols: []string{sc.dialect.subprotocol},
	})
	cancel()
	if err != nil {
		ue := httpadapter.HandshakeFailure(ctx, dctx, resp, err, s.timeout)
		ue.Upstream = s.upstream
		return false, false, ue
	}
	conn.SetReadLimit(-1) // bounded by readBounded, which skips an oversize message
	if conn.Subprotocol() != sc.dialect.subprotocol {
		_ = conn.Close(ws.StatusProtocolError, "subprotocol not acceptable")
		return false, false, s.fail(sdk.KindBadResponse, false, fmt.Sprintf("the server did not accept the %s subprotocol (%s): "+
			"set subscriptions.protocol to the one it speaks, or subscriptions.transport to sse for a GraphQL over SSE server", sc.dialect.subprotocol, sc.dialect.name))
	}
	r.conn = conn
	readCtx, kill := context.WithCancel(context.Background())
	readDone := make(chan error, 1)
	go func() { readDone <- r.run(readCtx) }()
	defer func() {
		kill()
		_ = conn.CloseNow()
		<-readDone
	}()
	stop := func() {
		// Complete, then a normal close, within closeTimeout; the reader
		// reads on (discarding) so that the close handshake ends.
		r.stopping.Store(true)
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if r.subscribed.Load() {
			_ = conn.Write(cctx, ws.MessageText, sc.dialect.stop)
		}
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			defer sdk.Recover("graphql adapter: close", nil)
			_ = conn.Close(ws.StatusNormalClosure, "")
		}()
		select {
		case <-closed:
		case <-cctx.Done():
			kill()
		}
	}
	// Writes never use the host's context: coder/websocket closes the
	// connection when a write's context ends mid-write, and a stop must
	// still complete the subscription and close cleanly.
	write := func(b []byte) error {
		wctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		return conn.Write(wctx, ws.MessageText, b)
	}
	r.write = write
	if err := write(sc.init); err != nil {
		return false, false, s.fail(sdk.KindTransport, true, "cannot send ConnectionInit: "+httpadapter.ErrorText(err))
	}
	ack := time.NewTimer(sc.ackTimeout)
	select {
	case <-r.acked:
		ack.Stop()
	case <-ctx.Done():
		ack.Stop()
		stop()
		return false, false, nil
	case err := <-readDone:
		ack.Stop()
		readDone <- err // for the deferred wait
		return false, false, s.readError(err, false)
	case <-ack.C:
		_ = conn.Close(4408, "Connection initialisation timeout")
		return false, false, s.fail(sdk.KindTimeout, true,
			fmt.Sprintf("the server did not answer ConnectionInit with ConnectionAck within subscriptions.ack_timeout (%s)", sc.ackTimeout))
	}
	sub, _ := json.Marshal(wsMessage{Type: sc.dialect.subscribe, ID: subscriptionID, Payload: s.request})
	if err := write(sub); err != nil {
		return false, false, s.fail(sdk.KindTransport, true, "cannot send Subscribe: "+httpadapter.ErrorText(err))
	}
	r.subscribed.Store(true)

	ping := time.NewTicker(sc.pingInterval)
	defer ping.Stop()
	var pongDue <-chan time.Time
	var pingSent int64
	for {
		select {
		case <-ctx.Done():
			stop()
			return true, r.got.Load() > 0, nil
		case <-r.stopped:
			stop() // the host went away as the reader found out
			return true, r.got.Load() > 0, errHostGone
		case err := <-readDone:
			readDone <- err
			return true, r.got.Load() > 0, s.readError(err, true)
		case <-ping.C:
			if pongDue != nil {
				continue // a Ping is still unanswered
			}
			pingSent = time.Now().UnixNano()
			pongDue = time.After(sc.pongTimeout)
			if !sc.dialect.appPing {
				// A protocol ping; the reader reads its pong.
				go func() {
					pctx, cancel := context.WithTimeout(context.Background(), sc.pongTimeout)
					defer cancel()
					if conn.Ping(pctx) == nil {
						r.lastPong.Store(time.Now().UnixNano())
					}
				}()
				continue
			}
			if err := write(wsPing); err != nil {
				return true, r.got.Load() > 0, s.fail(sdk.KindTransport, true, "cannot send a Ping: "+httpadapter.ErrorText(err))
			}
		case <-pongDue:
			if r.lastPong.Load() < pingSent {
				_ = conn.CloseNow() // a dead connection answers no close either
				return true, r.got.Load() > 0, s.fail(sdk.KindTimeout, true,
					fmt.Sprintf("no Pong within subscriptions.pong_timeout (%s) of a Ping", sc.pongTimeout))
			}
			pongDue = nil
		}
	}
}

// errCompleted ends a connection whose subscription the server completed.
var errCompleted = errors.New("the server completed the subscription")

// closeReasons are what the graphql-transport-ws close codes say.
var closeReasons = map[ws.StatusCode]string{
	4400: "the server found a message invalid",
	4401: "unauthorized: the subscription was sent before the ConnectionAck",
	4403: "forbidden: the server refused ConnectionInit (check the credentials in subscriptions.connection_init and headers)",
	4406: "the server does not accept the subprotocol",
	4408: "the connection initialisation timed out",
	4409: "a subscription with this id already exists",
	4429: "too many initialisation requests",
	4500: "the server failed internally",
}

// readError turns the reader's end into the connection's outcome: nil for
// a completed subscription or a normal close, else an error. A close the
// protocol says is final (4400, 4401, 4403, 4406, 4409, 4429) is refused
// and not retried; established says the subscription was made.
func (s *subStream) readError(err error, established bool) error {
	var ue *sdk.UpstreamError
	var pe *sdk.PanicError
	switch {
	case errors.Is(err, errCompleted):
		return nil
	case errors.As(err, &ue), errors.As(err, &pe), errors.Is(err, errHostGone):
		return err
	}
	var ce ws.CloseError
	if !errors.As(err, &ce) {
		return s.fail(sdk.KindTransport, true, "the connection broke: "+httpadapter.ErrorText(err))
	}
	if ce.Code == ws.StatusNormalClosure && established {
		return nil
	}
	msg := fmt.Sprintf("the server closed the connection with status %d", int(ce.Code))
	if why, ok := closeReasons[ce.Code]; ok {
		msg += " (" + why + ")"
	}
	if reason := ce.Reason; reason != "" && utf8.ValidString(reason) { // at most 123 bytes (RFC 6455): never cut
		msg += ": " + reason
	}
	final := ce.Code >= 4400 && ce.Code < 4500 && ce.Code != 4408
	ue = s.fail(sdk.KindTransport, !final, msg)
	if final {
		ue.Kind, ue.Status, ue.Rejected = sdk.KindUpstreamStatus, strconv.Itoa(int(ce.Code)), true
	}
	return ue
}

// wsReader reads one connection's messages all the time (coder/websocket
// reads control frames inside Reader): it answers Pings, notes Pongs,
// sees the ack and turns events into items.
type wsReader struct {
	s       *subStream
	conn    *ws.Conn
	write   func([]byte) error
	acked   chan struct{}
	ackSeen bool
	// stopped is closed when the host no longer takes events.
	stopped    chan struct{}
	stopping   atomic.Bool
	subscribed atomic.Bool
	lastPong   atomic.Int64
	got        atomic.Int64
}

// run reads the connection; a panic while handling a message ends the
// stream with an error instead of the adapter process.
func (r *wsReader) run(ctx context.Context) (err error) {
	defer sdk.Recover("graphql adapter: reader", &err)
	max := r.s.c.sub.maxMessage
	for {
		_, rd, err := r.conn.Reader(ctx)
		if err != nil {
			return err
		}
		data, over, err := readBounded(rd, max)
		if err != nil {
			return err
		}
		if r.stopping.Load() {
			continue // closing: messages are discarded
		}
		if over {
			if r.s.send.Gap(fmt.Sprintf("a message larger than subscriptions.max_message_bytes (%d) was skipped", max)) != nil {
				r.hostGone()
			}
			continue
		}
		if err := r.handle(data); err != nil {
			var ue *sdk.UpstreamError
			switch {
			case errors.Is(err, errHostGone):
				r.hostGone()
				continue
			case errors.As(err, &ue) && ue.Kind == sdk.KindBadResponse:
				_ = r.conn.Close(4400, "invalid message")
			}
			return err
		}
	}
}

func (r *wsReader) hostGone() {
	if !r.stopping.Swap(true) {
		close(r.stopped)
	}
}

// handle acts on one message.
func (r *wsReader) handle(data []byte) error {
	d := r.s.c.sub.dialect
	m, err := parseWSMessage(data, d)
	if err != nil {
		return r.s.fail(sdk.KindBadResponse, false, "the server broke the "+d.name+" protocol: "+err.Error())
	}
	switch m.Type {
	case "ka": // the legacy protocol's keep-alive
		r.lastPong.Store(time.Now().UnixNano())
	case "connection_error":
		ue := r.s.refused(errorList(m.Payload), 0, false)
		ue.Message = strings.Replace(ue.Message, "refused the subscription", "refused connection_init (check the credentials in subscriptions.connection_init and headers)", 1)
		return ue
	case "connection_ack":
		if !r.ackSeen {
			r.ackSeen = true
			close(r.acked)
		}
	case "ping":
		return r.write(wsPong)
	case "pong":
		r.lastPong.Store(time.Now().UnixNano())
	case d.next, "error", "complete":
		if m.ID != subscriptionID {
			return nil // not this subscription's
		}
		switch m.Type {
		case "complete":
			return errCompleted
		case "error":
			return r.s.refused(errorList(m.Payload), 0, r.got.Load() > 0)
		}
		r.got.Add(1)
		return r.s.event(m.Payload)
	}
	return nil
}

// errorList is an error payload as a list of GraphQL errors: the legacy
// protocol sends one error object (or a list), graphql-transport-ws a
// list.
func errorList(p json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(p); len(t) > 0 && t[0] == '{' {
		return append(append(json.RawMessage{'['}, t...), ']')
	}
	return p
}

// readBounded reads one message or event of at most max bytes; a longer
// one is read to its end and dropped (over), so the connection stays
// usable and memory bounded.
func readBounded(rd io.Reader, max int) ([]byte, bool, error) {
	data, over, err := httpadapter.ReadBounded(rd, int64(max), -1)
	if over {
		_, err = io.Copy(io.Discard, rd)
		return nil, true, err
	}
	return data, false, err
}
