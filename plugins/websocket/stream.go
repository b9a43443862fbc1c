package websocket

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// errHostGone: the host stopped taking events.
var errHostGone = errors.New("the host ended the stream")

// stream is one Stream call: one subscription, over as many connections
// as the reconnect policy allows.
type stream struct {
	cfg     *config
	send    sdk.StreamSender
	timeout time.Duration

	mu   sync.Mutex
	vars vars // vars.cursor moves with the items (id_path)
}

// snapshot returns the template variables as they are now.
func (s *stream) snapshot() *vars {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vars
	return &v
}

func (s *stream) setCursor(c string) {
	s.mu.Lock()
	s.vars.cursor, s.vars.itemCursor = c, true
	s.mu.Unlock()
}

// unsafeText refuses values that would bring a control character into a
// plain-text message the stream sends (textUnsafe), naming the value and
// the message: an argument or the cursor the host passed is an invalid
// argument, an item id (id_path) become the cursor a bad response.
func (s *stream) unsafeText(v *vars) *sdk.UpstreamError {
	c := s.cfg
	msgs := append(append([]*msgTemplate(nil), c.subscribe...), c.unsubscribe...)
	if c.heartbeat != nil {
		msgs = append(msgs, c.heartbeat)
	}
	for _, m := range msgs {
		if name, r, bad := m.unsafeVar(v); bad {
			return s.textRefusal(m, name, r, v)
		}
	}
	return nil
}

func (s *stream) textRefusal(m *msgTemplate, name string, r rune, v *vars) *sdk.UpstreamError {
	what, kind := fmt.Sprintf("argument %q", name), sdk.KindInvalidArgument
	if name == cursorVar {
		what = "the cursor ({{cursor}})"
		if v.itemCursor {
			what, kind = "the id of the last item (id_path), the stream's cursor ({{cursor}}),", sdk.KindBadResponse
		}
	}
	return s.fail(kind, false, fmt.Sprintf("%s holds the control character U+%04X and would fill the plain-text message %s: "+
		"refused, as it could end that message and send another (write line breaks in the template itself, or send a JSON message)",
		what, r, m.field))
}

// run connects until the host cancels, the upstream ends the stream or
// the reconnect policy gives up. A connection that was established and
// lost is reported as a gap: messages sent while it was down are missed.
func (s *stream) run(ctx context.Context) error {
	r := s.cfg.reconnect
	r.Lost = func(ue *sdk.UpstreamError) error {
		return s.send.Gap("the upstream connection was lost (" + ue.Message + "); reconnecting and subscribing again: messages sent meanwhile may have been missed")
	}
	return r.Run(ctx, s.connection)
}

// connection runs one connection: dial, subscribe, await the ack, then
// read until the host cancels (unsubscribe and a normal close), the
// upstream closes, a heartbeat is lost or reading fails. established says
// the subscription was made (and acknowledged), progressed that the
// upstream acknowledged it or sent a message; err is nil when the stream
// ended normally.
func (s *stream) connection(ctx context.Context) (established, progressed bool, err error) {
	c := s.cfg
	v := s.snapshot()
	if ue := s.unsafeText(v); ue != nil {
		return false, false, ue
	}
	u, err := c.url.render(v)
	if err != nil {
		return false, false, &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstream, Message: err.Error()}
	}
	r := &reader{s: s, acked: make(chan struct{})}
	dctx, cancel := context.WithTimeout(ctx, s.timeout)
	conn, resp, err := ws.Dial(dctx, u, &ws.DialOptions{
		HTTPClient:      c.client,
		HTTPHeader:      c.headers.Clone(),
		Host:            c.host,
		Subprotocols:    c.subprotocols,
		CompressionMode: c.compression,
		OnPongReceived:  func(context.Context, []byte) { r.lastRead.Store(time.Now().UnixNano()) },
	})
	cancel()
	if err != nil {
		return false, r.progressed(), s.upstreamError(httpadapter.HandshakeFailure(ctx, dctx, resp, err, s.timeout))
	}
	// Messages are bounded by readMessage, which skips an oversize one
	// and keeps the connection.
	conn.SetReadLimit(-1)
	if len(c.subprotocols) > 0 && conn.Subprotocol() == "" {
		_ = conn.Close(ws.StatusProtocolError, "no subprotocol")
		return false, r.progressed(), s.fail(sdk.KindBadResponse, false, "the upstream accepted none of the configured subprotocols")
	}
	r.conn = conn
	r.awaitAck = c.ack != nil
	if c.ack != nil && c.ack.equals != nil {
		r.ackWant = c.ack.equals.value(v)
	}

	readCtx, kill := context.WithCancel(context.Background())
	readDone := make(chan error, 1)
	go func() { readDone <- r.run(readCtx) }()
	finished := false
	defer func() {
		kill()
		_ = conn.CloseNow()
		if !finished {
			<-readDone
		}
	}()
	wait := func(err error) error {
		if ctx.Err() != nil || errors.Is(err, errHostGone) {
			// The host stopped the stream as the reader found out (its
			// send failed): the subscription still ends cleanly, with a
			// reader again so that the close handshake stays bounded.
			r.stopping.Store(true)
			go func() { readDone <- r.run(readCtx) }()
			s.stop(conn, kill)
			return nil
		}
		finished = true
		return s.readError(err)
	}

	// Writes never use the host's context: coder/websocket closes the
	// connection when a write's context ends mid-write, and a stop must
	// still unsubscribe and close cleanly.
	for _, m := range c.subscribe {
		if err := s.write(context.Background(), conn, m, v); err != nil {
			return false, r.progressed(), s.fail(sdk.KindTransport, true, "cannot send the subscribe message: "+httpadapter.ErrorText(err))
		}
	}
	if c.ack != nil {
		t := time.NewTimer(c.ack.timeout)
		select {
		case <-r.acked:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			r.stopping.Store(true)
			s.stop(conn, kill)
			return false, r.progressed(), nil
		case err := <-readDone:
			t.Stop()
			// The ack may have come just before the end.
			return r.ackSeen.Load(), r.progressed(), wait(err)
		case <-t.C:
			s.close(conn, ws.StatusPolicyViolation, "subscription not acknowledged", kill)
			return false, r.progressed(), s.fail(sdk.KindTimeout, true,
				fmt.Sprintf("the upstream did not acknowledge the subscription within ack.timeout_ms (%d ms)", c.ack.timeout.Milliseconds()))
		}
	}

	hbCtx, hbStop := context.WithCancel(context.Background())
	defer hbStop()
	lost := make(chan string, 1)
	hbPanic := make(chan error, 1)
	if c.pingInterval > 0 {
		go func() {
			var err error
			defer func() {
				if err != nil {
					hbPanic <- err
				}
			}()
			defer sdk.Recover("websocket adapter: heartbeat", &err)
			s.heartbeat(hbCtx, conn, r, lost)
		}()
	}
	select {
	case <-ctx.Done():
		r.stopping.Store(true)
		s.stop(conn, kill)
		return true, r.progressed(), nil
	case err := <-readDone:
		return true, r.progressed(), wait(err)
	case reason := <-lost:
		return true, r.progressed(), s.fail(sdk.KindTimeout, true, "heartbeat lost: "+reason)
	case err := <-hbPanic:
		return true, r.progressed(), err
	}
}

// stop ends a subscription the host no longer wants: the unsubscribe
// messages, then a normal close, all within close_timeout_ms. The reader
// is told to discard what still arrives.
func (s *stream) stop(conn *ws.Conn, kill context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
	defer cancel()
	v := s.snapshot()
	for _, m := range s.cfg.unsubscribe {
		if s.write(ctx, conn, m, v) != nil {
			break
		}
	}
	s.closeWithin(ctx, conn, ws.StatusNormalClosure, "", kill)
}

// close closes the connection with a status, waiting at most
// close_timeout_ms for the upstream's close frame.
func (s *stream) close(conn *ws.Conn, code ws.StatusCode, reason string, kill context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
	defer cancel()
	s.closeWithin(ctx, conn, code, reason, kill)
}

// closeWithin runs the close handshake until ctx ends, then drops the
// connection: kill cancels the reader's context, which closes it at once.
// Close sends the close frame and waits for the upstream's, which the
// reader (reading all along) receives.
func (s *stream) closeWithin(ctx context.Context, conn *ws.Conn, code ws.StatusCode, reason string, kill context.CancelFunc) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		defer sdk.Recover("websocket adapter: close", nil)
		_ = conn.Close(code, reason)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		kill()
	}
}

// write sends one message template, filled in: JSON values and plain text
// both as text frames. A plain-text message a value would bring a control
// character into is not sent (unsafeText).
func (s *stream) write(ctx context.Context, conn *ws.Conn, m *msgTemplate, v *vars) error {
	if name, r, bad := m.unsafeVar(v); bad {
		return s.textRefusal(m, name, r, v)
	}
	b, _ := m.render(v)
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return conn.Write(wctx, ws.MessageText, b)
}

// heartbeat detects a dead connection within ping_interval_ms +
// pong_timeout_ms: protocol pings (answered by the reader, which reads
// concurrently), or the application heartbeat message after which some
// message must arrive.
func (s *stream) heartbeat(ctx context.Context, conn *ws.Conn, r *reader, lost chan<- string) {
	c := s.cfg
	t := time.NewTicker(c.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now().UnixNano()
		if c.heartbeat != nil {
			if err := s.write(ctx, conn, c.heartbeat, s.snapshot()); err != nil {
				if ctx.Err() == nil {
					lost <- "the heartbeat message could not be sent: " + httpadapter.ErrorText(err)
				}
				return
			}
			w := time.NewTimer(c.pongTimeout)
			select {
			case <-ctx.Done():
				w.Stop()
				return
			case <-w.C:
			}
			if r.lastRead.Load() < sent {
				lost <- fmt.Sprintf("no message within heartbeat.pong_timeout_ms (%d ms) of a heartbeat message", c.pongTimeout.Milliseconds())
				return
			}
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, c.pongTimeout)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				lost <- fmt.Sprintf("no pong within heartbeat.pong_timeout_ms (%d ms) of a ping", c.pongTimeout.Milliseconds())
			}
			return
		}
	}
}

// upstreamError names this stream's upstream in ue.
func (s *stream) upstreamError(ue *sdk.UpstreamError) *sdk.UpstreamError {
	ue.Upstream = s.cfg.upstream
	return ue
}

// fail is an upstream error of this stream.
func (s *stream) fail(kind sdk.ErrorKind, retryable bool, msg string) *sdk.UpstreamError {
	return &sdk.UpstreamError{Kind: kind, Upstream: s.cfg.upstream, Message: msg, Retryable: retryable}
}

// readError turns the reader's end into the connection's outcome: nil for
// a normal close by the upstream (the stream ends), else an error.
func (s *stream) readError(err error) error {
	var ue *sdk.UpstreamError
	var pe *sdk.PanicError
	switch {
	case errors.As(err, &ue):
		return ue
	case errors.Is(err, errHostGone), errors.As(err, &pe):
		return err // a panic ends the stream: no reconnect
	}
	var ce ws.CloseError
	if errors.As(err, &ce) {
		if ce.Code == ws.StatusNormalClosure {
			return nil
		}
		reason := ce.Reason // at most 123 bytes (RFC 6455): never cut
		msg := fmt.Sprintf("the upstream closed the connection with status %d (%s)", int(ce.Code), ce.Code)
		if reason != "" && utf8.ValidString(reason) {
			msg += ": " + reason
		}
		return s.fail(sdk.KindTransport, true, msg)
	}
	return s.fail(sdk.KindTransport, true, "the connection broke: "+httpadapter.ErrorText(err))
}

// reader reads one connection's messages: it answers pings and reads
// pongs (coder/websocket handles control frames inside Reader), matches
// the ack and sends the items.
type reader struct {
	s        *stream
	conn     *ws.Conn
	awaitAck bool
	ackWant  any
	acked    chan struct{}
	stopping atomic.Bool
	// lastRead is when the last message or pong arrived (UnixNano).
	lastRead atomic.Int64
	// got counts the data messages read.
	got     atomic.Int64
	ackSeen atomic.Bool
}

// progressed reports whether the connection got an ack or a message.
func (r *reader) progressed() bool { return r.ackSeen.Load() || r.got.Load() > 0 }

// run reads the connection (loop); a panic while reading or handling a
// message ends the stream with an error instead of the adapter process.
func (r *reader) run(ctx context.Context) (err error) {
	defer sdk.Recover("websocket adapter: reader", &err)
	return r.loop(ctx)
}

func (r *reader) loop(ctx context.Context) error {
	max := r.s.cfg.maxMessage
	for {
		typ, rd, err := r.conn.Reader(ctx)
		if err != nil {
			return err
		}
		data, over, err := readMessage(rd, max)
		if err != nil {
			return err
		}
		r.lastRead.Store(time.Now().UnixNano())
		r.got.Add(1)
		if r.stopping.Load() {
			continue // closing: messages are discarded
		}
		if over {
			if r.s.send.Gap(fmt.Sprintf("a message larger than max_message_bytes (%d) was skipped", max)) != nil {
				return errHostGone
			}
			continue
		}
		if err := r.handle(typ, data); err != nil {
			return err
		}
	}
}

// readMessage reads one message of at most max bytes; a longer one is
// read to its end and dropped (over), so the connection stays usable and
// memory stays bounded.
func readMessage(rd io.Reader, max int) ([]byte, bool, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(rd, int64(max)+1))
	if err != nil {
		return nil, false, err
	}
	if n > int64(max) {
		_, err := io.Copy(io.Discard, rd)
		return nil, true, err
	}
	return buf.Bytes(), false, nil
}

// handle turns one message into an item, the ack, or nothing (filtered).
func (r *reader) handle(typ ws.MessageType, data []byte) error {
	c := r.s.cfg
	raw := json.RawMessage(data)
	switch {
	case typ == ws.MessageBinary && c.binary == binaryRefuse:
		return r.s.fail(sdk.KindBadResponse, false,
			"the upstream sent a binary message: set binary to base64, text or skip to accept binary messages")
	case typ == ws.MessageBinary && c.binary == binarySkip:
		return nil
	case typ == ws.MessageBinary && c.binary == binaryBase64:
		raw = mustMarshal(base64.StdEncoding.EncodeToString(data))
	case typ == ws.MessageBinary && !utf8.Valid(data):
		if r.s.send.Gap("a binary message that is not UTF-8 text was skipped (binary: text)") != nil {
			return errHostGone
		}
		return nil
	case !json.Valid(data):
		raw = mustMarshal(string(data)) // plain text: one JSON string
	}
	var doc any
	if r.awaitAck || c.filter != nil || c.idPath != nil {
		var err error
		if doc, err = decodeJSON(raw); err != nil {
			return nil // json.Valid said yes; unreachable
		}
	}
	if r.awaitAck && c.ack.matches(doc, r.ackWant) {
		r.awaitAck = false
		r.ackSeen.Store(true)
		close(r.acked)
		return nil
	}
	if c.filter != nil && !matchFilter(c.filter, doc) {
		return nil
	}
	var id string
	if c.idPath != nil {
		if id = idOf(c.idPath, doc); id != "" {
			r.s.setCursor(id)
		}
	}
	if r.s.send.Item(sdk.Item{Data: raw, ID: id, Cursor: id}) != nil {
		return errHostGone
	}
	return nil
}
