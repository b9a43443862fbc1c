package rest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// reconnectBackoff is the wait before a dropped stream is reopened.
var reconnectBackoff = sdk.Backoff{Initial: 250 * time.Millisecond, Max: 5 * time.Second}

// errStreamEnd ends a stream normally: the upstream said so (end_data, a
// 204, or a plain JSON answer that is the whole stream).
var errStreamEnd = errors.New("stream ended by the upstream")

// Stream implements sdk.Streamer: it opens the operation's URL and sends
// every event of the answer as an item until the upstream ends the stream
// or the host cancels (a window limit). A text/event-stream answer is read
// with go-sse, one item per event; a JSON answer is one item. A dropped
// stream is reopened with Last-Event-ID when stream.reconnect is on.
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) (err error) {
	op, ue := a.operation(&req.Operation)
	if ue != nil {
		return ue
	}
	args, ue := op.decodeArgs(req.Arguments)
	if ue != nil {
		return ue
	}
	args.cursor = req.Cursor
	s := &stream{a: a, op: op, req: req, args: args, send: send, lastID: req.Cursor,
		timeout: op.callTimeout(req.Operation.Timeout)}
	err = s.run(ctx)
	if ctx.Err() != nil {
		return nil // the host ended the stream
	}
	return err
}

// stream is one Stream call.
type stream struct {
	a       *adapter
	op      *operation
	req     *sdk.Request
	args    callArgs
	send    sdk.StreamSender
	timeout time.Duration
	// lastID is the last SSE event id seen (or the window's cursor): sent
	// as Last-Event-ID when the stream is reopened.
	lastID string
}

func (s *stream) run(ctx context.Context) error {
	failures := 0
	for conn := 0; ; conn++ {
		n, err := s.connection(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errStreamEnd):
			return nil
		case !s.op.stream.reconnect:
			return err // nil: the upstream closed the stream, which ends it
		case err == nil && n == 0:
			// Reopened (or opened) and closed without a single event: the
			// upstream has nothing more.
			return nil
		}
		var ue *sdk.UpstreamError
		if errors.As(err, &ue) && (conn == 0 && n == 0 || !ue.Retryable && ue.Kind != sdk.KindTransport) {
			// The first connection fails fast; later ones retry what may
			// go away.
			return err
		}
		if n > 0 {
			failures = 0
		} else {
			failures++
		}
		if failures > s.op.stream.maxReconnects {
			if err == nil {
				return nil
			}
			return err
		}
		if s.lastID == "" {
			if s.send.Gap("the upstream stream dropped and was reopened without an event id: events may have been missed") != nil {
				return nil
			}
		}
		if !reconnectBackoff.Wait(ctx, failures+1) {
			return nil
		}
	}
}

// connection opens the stream once and reads it until it ends; it returns
// the number of items sent.
func (s *stream) connection(ctx context.Context) (int, error) {
	op := s.op
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The upstream must answer (send its headers) within the timeout; the
	// host bounds the rest of the stream.
	answered := httpadapter.CancelUnanswered(s.timeout, cancel, errCallTimeout)
	defer answered()
	s.args.cursor = s.lastID
	hreq, ue := op.newRequest(cctx, &s.args, "text/event-stream", &s.req.Context)
	if ue != nil {
		return 0, ue
	}
	hreq.Header.Set("Cache-Control", "no-cache")
	if s.lastID != "" {
		hreq.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := s.a.clients.For(s.req.Operation.Egress).Do(hreq)
	answered()
	if err != nil {
		return 0, op.failure(ctx, cctx, s.timeout, hreq.URL.Host, err, false)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return 0, errStreamEnd
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return 0, op.statusError(resp)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		n, err := s.readSSE(resp.Body)
		if err != nil && !errors.Is(err, errStreamEnd) && ctx.Err() == nil {
			return n, op.failure(ctx, cctx, s.timeout, hreq.URL.Host, err, true)
		}
		return n, err
	case httpadapter.JSONMediaType(mt) || mt == "":
		body, over, err := httpadapter.ReadBounded(resp.Body, op.maxBytes, resp.ContentLength)
		if over {
			return 0, op.tooLarge()
		}
		if err != nil {
			return 0, op.failure(ctx, cctx, s.timeout, hreq.URL.Host, err, true)
		}
		if !json.Valid(body) {
			return 0, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: op.upstream,
				Message: "the upstream answered invalid JSON instead of a stream"}
		}
		if s.send.Item(sdk.Item{Data: body}) != nil {
			return 0, nil
		}
		return 1, errStreamEnd
	}
	return 0, &sdk.UpstreamError{Kind: sdk.KindBadResponse, Upstream: op.upstream,
		Message: fmt.Sprintf("expected a text/event-stream (or JSON) answer, got %q", mt)}
}

// readSSE sends the events of an SSE body as items until it ends. An
// event larger than max_event_bytes is skipped (reported as a gap) and
// reading goes on after it; memory stays bounded by max_event_bytes.
func (s *stream) readSSE(body io.Reader) (int, error) {
	n := 0
	var stop error
	err := newEventReader(body, s.op.stream.maxEventBytes).each(func(ev sseEvent) bool {
		if ev.tooLarge {
			return s.send.Gap("an SSE event larger than max_event_bytes ("+strconv.Itoa(s.op.stream.maxEventBytes)+") was skipped") == nil
		}
		if ev.id != "" {
			s.lastID = ev.id
		}
		if !s.wanted(ev.typ) || ev.data == "" {
			return true
		}
		if s.op.stream.endData != "" && ev.data == s.op.stream.endData {
			stop = errStreamEnd
			return false
		}
		if s.send.Item(sdk.Item{Data: eventJSON(ev.data), ID: ev.id, Cursor: s.lastID}) != nil {
			return false
		}
		n++
		return true
	})
	if stop != nil {
		return n, stop
	}
	return n, err
}

func (s *stream) wanted(typ string) bool {
	if len(s.op.stream.events) == 0 {
		return true
	}
	if typ == "" {
		typ = "message"
	}
	for _, e := range s.op.stream.events {
		if e == typ {
			return true
		}
	}
	return false
}

// eventJSON is an event's data as a JSON value: the data itself when it is
// JSON, otherwise the data as a JSON string.
func eventJSON(data string) json.RawMessage {
	if json.Valid([]byte(data)) {
		return json.RawMessage(data)
	}
	b, _ := json.Marshal(data)
	return b
}

// sseEvent is one parsed event, or the mark of a skipped oversize one.
type sseEvent struct {
	typ, data string
	// id is the last event id seen, as EventSource tracks it.
	id       string
	tooLarge bool
}

// eventReader parses an SSE stream with go-sse, bounding each event's
// size. After an oversize event it skips to the event's end and parses on.
type eventReader struct {
	br     *bufio.Reader
	tail   *tailReader
	max    int
	lastID string
}

// eventReaderBuffer is the size of the reader in front of go-sse's
// scanner. The scanner reads in chunks of its own (4 KiB and up), which
// pass this buffer by; it serves skipping an oversize event (skipEvent).
// A live stream holds it for its whole life, so it is small.
const eventReaderBuffer = 512

func newEventReader(body io.Reader, maxEvent int) *eventReader {
	r := &eventReader{br: bufio.NewReaderSize(body, eventReaderBuffer), max: maxEvent}
	r.tail = &tailReader{r: r.br}
	return r
}

// each calls fn with every event until fn returns false, the body ends
// (nil) or reading fails (the error).
func (r *eventReader) each(fn func(sseEvent) bool) error {
	cfg := &sse.ReadConfig{MaxEventSize: r.max}
	for {
		skipped := false
		for ev, err := range sse.Read(r.tail, cfg) {
			if errors.Is(err, bufio.ErrTooLong) {
				err := r.skipEvent()
				if err != nil && !errors.Is(err, io.EOF) {
					return err
				}
				if !fn(sseEvent{tooLarge: true}) || err != nil {
					return nil // the stream ended inside the oversize event
				}
				skipped = true
				break
			}
			if err != nil {
				return err
			}
			if ev.LastEventID != "" {
				r.lastID = ev.LastEventID
			}
			if !fn(sseEvent{typ: ev.Type, data: ev.Data, id: r.lastID}) {
				return nil
			}
		}
		if !skipped {
			return nil
		}
	}
}

// skipEvent discards the rest of an oversize event: everything up to the
// blank line that ends it. The parser read up to the limit, the last two
// bytes of which seed the line-end state.
func (r *eventReader) skipEvent() error {
	var sk skipper
	sk.scan(r.tail.last())
	for !sk.done {
		if _, err := r.br.Peek(1); err != nil {
			return err
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		_, _ = r.br.Discard(sk.scan(buf))
	}
	return nil
}

// skipper finds the blank line ending an event: two line ends in a row,
// where a line end is CRLF, CR or LF.
type skipper struct {
	lastCR, atLineStart, done bool
}

// scan feeds the bytes of buf until the event ends and returns how many it
// took. Only line ends matter, so it goes from one to the next.
func (s *skipper) scan(buf []byte) int {
	i := 0
	for i < len(buf) && !s.done {
		j := bytes.IndexAny(buf[i:], "\r\n")
		if j < 0 {
			s.atLineStart, s.lastCR = false, false
			return len(buf)
		}
		if j > 0 {
			s.atLineStart, s.lastCR = false, false
		}
		i += j
		s.feed(buf[i])
		i++
	}
	return i
}

func (s *skipper) feed(c byte) {
	switch {
	case c == '\n' && s.lastCR:
		s.lastCR = false // the LF of a CRLF
	case c == '\r' || c == '\n':
		if s.atLineStart {
			s.done = true
		}
		s.atLineStart, s.lastCR = true, c == '\r'
	default:
		s.atLineStart, s.lastCR = false, false
	}
}

// tailReader remembers the last two bytes read through it.
type tailReader struct {
	r   io.Reader
	buf [2]byte
	n   int
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	switch {
	case n >= 2:
		t.buf[0], t.buf[1], t.n = p[n-2], p[n-1], 2
	case n == 1:
		t.buf[0], t.buf[1] = t.buf[1], p[0]
		t.n = min(t.n+1, 2)
	}
	return n, err
}

func (t *tailReader) last() []byte { return t.buf[2-t.n:] }
