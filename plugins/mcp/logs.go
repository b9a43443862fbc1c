package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Log messages.
//
// An upstream's notifications/message carries no request id, and one
// upstream session serves every call. A call whose client asked for log
// messages is given a random tag of its own; over Streamable HTTP the
// messages the upstream sends on the call's response stream (where the
// go-sdk and TypeScript servers send the log messages of a request) are
// tagged with it as they are read (msgReader), so that they reach that
// call alone, however many run at once. A message read outside any call's
// stream (over stdio, or on the standalone stream) is tagged for the call
// in flight on the session when exactly one is as it is read, and dropped
// otherwise: a call never receives a message that may belong to another
// caller's call. An upstream cannot forge a tag: tags are random and never
// sent to it, and the reader sets the tag of every message it passes on.
// A message with no tag or no live call's is dropped.

// metaCallTag is the _meta key of a log message's call tag, set by the
// adapter on messages it reads from a call's response stream.
const metaCallTag = "crank.call"

// metaLogLevel is the _meta key of a request's logging level in protocol
// versions that have no logging/setLevel (2026-07-28).
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// logBuffer is how many log messages of one call wait to be passed on;
// beyond it they are dropped (bounded memory, and the session's reading
// never waits on a slow client).
const logBuffer = 256

// callTagKey is the context key of a call's tag: the HTTP transport tags
// the log messages of the call's response stream with it.
type callTagKey struct{}

// logSink receives one call's log messages. read counts those tagged for
// the call as they were read, handled those the session handed over
// (dropped ones included): a call that answered waits until handled
// reaches what read was then, since the session hands notifications over
// apart from responses.
type logSink struct {
	ch            chan *gomcp.LoggingMessageParams
	read, handled atomic.Int64
}

// logRoutes are the log messages' ways to the calls of one connection.
type logRoutes struct {
	mu    sync.Mutex
	calls map[string]*logSink
	// askers are the calls whose clients may be asked the upstream's
	// requests (ask.go), by the same tags.
	askers map[string]*asker
	// inflight counts the connection's calls in flight, of any caller.
	inflight atomic.Int32
}

func newCallTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// open registers a call that wants log messages.
func (r *logRoutes) open() (string, *logSink, func()) {
	tag := newCallTag()
	s, done := r.openAs(tag)
	return tag, s, done
}

// openAsker registers the call tagged tag as one whose client may be
// asked the upstream's requests.
func (r *logRoutes) openAsker(tag string, a *asker) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.askers == nil {
		r.askers = map[string]*asker{}
	}
	r.askers[tag] = a
	return func() {
		r.mu.Lock()
		delete(r.askers, tag)
		r.mu.Unlock()
	}
}

// asker is the asker of the call tagged tag, nil when there is none.
func (r *logRoutes) asker(tag string) *asker {
	if tag == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.askers[tag]
}

// soleAsker is the tag of the only call in flight, when its client may
// be asked; "" otherwise.
func (r *logRoutes) soleAsker() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return soleKey(r.askers, r.inflight.Load())
}

// openAs registers the call tagged tag as one that wants log messages.
func (r *logRoutes) openAs(tag string) (*logSink, func()) {
	s := &logSink{ch: make(chan *gomcp.LoggingMessageParams, logBuffer)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]*logSink{}
	}
	r.calls[tag] = s
	return s, func() {
		r.mu.Lock()
		delete(r.calls, tag)
		r.mu.Unlock()
	}
}

// soleTag is the tag of the only call in flight, when it wants log
// messages; "" otherwise.
func (r *logRoutes) soleTag() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return soleKey(r.calls, r.inflight.Load())
}

// soleKey is the one key of calls when it is the only call in flight of
// inflight, "" otherwise.
func soleKey[V any](calls map[string]V, inflight int32) string {
	if len(calls) != 1 || inflight != 1 {
		return ""
	}
	for tag := range calls {
		return tag
	}
	return ""
}

// deliver hands a log message to the call of its tag without waiting;
// an untagged one, or one whose call has answered, is dropped.
func (r *logRoutes) deliver(p *gomcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	tag, _ := p.Meta[metaCallTag].(string)
	s := r.sink(tag)
	if s == nil {
		return
	}
	select {
	case s.ch <- p:
	default:
	}
	s.handled.Add(1)
}

// sink is the sink of the call tagged tag, nil when there is none.
func (r *logRoutes) sink(tag string) *logSink {
	if tag == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[tag]
}

// await hands the call's log messages to forward until the session has
// handed over target of them (s.read when the call answered), for at
// most settleMax.
func (s *logSink) await(ctx context.Context, target int64, forward func(*gomcp.LoggingMessageParams)) {
	limit := time.NewTimer(settleMax)
	defer limit.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.handled.Load() < target {
		select {
		case p := <-s.ch:
			forward(p)
		case <-tick.C:
		case <-limit.C:
			return
		case <-ctx.Done():
			return
		}
	}
	for {
		select {
		case p := <-s.ch:
			forward(p)
		default:
			return
		}
	}
}

// logMessage is the SDK's form of a log message.
func logMessage(p *gomcp.LoggingMessageParams) sdk.LogMessage {
	data, err := json.Marshal(p.Data)
	if err != nil {
		data = json.RawMessage("null")
	}
	return sdk.LogMessage{Level: string(p.Level), Logger: p.Logger, Data: data}
}

// lowerLevel returns the less severe of two logging levels ("" is none).
func lowerLevel(a, b string) string {
	if a == "" || b != "" && slices.Index(sdk.LogLevels, b) < slices.Index(sdk.LogLevels, a) {
		return b
	}
	return a
}

// msgReader passes the upstream's messages through frame by frame (a line
// over stdio, an SSE event or a whole JSON body over HTTP), counting the
// log messages for their calls (logSink.read) and tagging them with their
// call's tag; check, when set, sees each message (handshake.go).
type msgReader struct {
	r      *bufio.Reader
	c      io.Closer
	mode   frameMode
	tag    string
	routes *logRoutes
	check  func([]byte)
	out    []byte
	err    error
}

// frameMode is how a msgReader's stream is framed.
type frameMode int

const (
	framedByLine  frameMode = iota // stdio: one message a line
	framedByEvent                  // SSE: one message an event's data
	framedByBody                   // a JSON body: one message
)

func newMsgReader(r io.ReadCloser, mode frameMode, tag string, routes *logRoutes) *msgReader {
	return &msgReader{r: bufio.NewReader(r), c: r, mode: mode, tag: tag, routes: routes}
}

func (m *msgReader) Read(p []byte) (int, error) {
	for len(m.out) == 0 && m.err == nil {
		m.frame()
	}
	if len(m.out) > 0 {
		n := copy(p, m.out)
		m.out = m.out[n:]
		return n, nil
	}
	return 0, m.err
}

func (m *msgReader) Close() error { return m.c.Close() }

// frame reads the next frame into out.
func (m *msgReader) frame() {
	m.out = nil
	if m.mode == framedByBody {
		b, err := io.ReadAll(m.r)
		if m.err = err; err == nil {
			m.err = io.EOF
		}
		if m.check != nil {
			m.check(b)
		}
		m.out = b
		return
	}
	var lines [][]byte
	for {
		line, err := m.r.ReadBytes('\n')
		if len(line) > 0 {
			lines = append(lines, line)
		}
		if err != nil {
			m.err = err
			break
		}
		if m.mode == framedByLine || len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
	}
	data := -1 // the index of the frame's one data line
	for i, l := range lines {
		switch {
		case m.mode == framedByLine:
			data = i
		case bytes.HasPrefix(l, []byte("data:")):
			if data >= 0 {
				data = -2 // data in several lines: passed on as it is
			} else if data == -1 {
				data = i
			}
		}
	}
	if data >= 0 {
		if m.check != nil {
			body := bytes.TrimRight(lines[data], "\r\n")
			if m.mode == framedByEvent {
				body = bytes.TrimPrefix(bytes.TrimPrefix(body, []byte("data:")), []byte(" "))
			}
			m.check(body)
		}
		lines[data] = m.inspect(m.inputParams(lines[data]))
	}
	if len(lines) == 1 {
		m.out = lines[0]
		return
	}
	for _, l := range lines {
		m.out = append(m.out, l...)
	}
}

// split parts a frame's line into its message and what the frame puts
// around it: the "data: " of an SSE event, and the line's end.
func (m *msgReader) split(line []byte) (prefix, body, end []byte) {
	body = bytes.TrimRight(line, "\r\n")
	end = line[len(body):]
	if m.mode == framedByEvent {
		prefix, body = []byte("data: "), bytes.TrimPrefix(bytes.TrimPrefix(body, []byte("data:")), []byte(" "))
	}
	return prefix, body, end
}

// inputParams is inputParams of a frame's line (an SSE event's data line,
// or a line over stdio).
func (m *msgReader) inputParams(line []byte) []byte {
	if !bytes.Contains(line, []byte(`"inputRequests"`)) {
		return line
	}
	prefix, body, end := m.split(line)
	fixed := inputParams(body)
	if bytes.Equal(fixed, body) {
		return line
	}
	return append(append(append([]byte(nil), prefix...), fixed...), end...)
}

// inspect counts and tags the message of a frame's line: a log message,
// or a request of the client (ask.go).
func (m *msgReader) inspect(line []byte) []byte {
	if !bytes.Contains(line, []byte(`"notifications/message"`)) && !bytes.Contains(line, []byte(`"sampling/createMessage"`)) &&
		!bytes.Contains(line, []byte(`"elicitation/create"`)) && !bytes.Contains(line, []byte(`"roots/list"`)) {
		return line
	}
	prefix, body, end := m.split(line)
	var msg map[string]json.RawMessage
	var method string
	if json.Unmarshal(body, &msg) != nil || json.Unmarshal(msg["method"], &method) != nil {
		return line
	}
	ask := isAsk(method) && msg["id"] != nil
	if method != "notifications/message" && !ask {
		return line
	}
	var params map[string]json.RawMessage
	if len(msg["params"]) == 0 && ask {
		params = map[string]json.RawMessage{} // roots/list may come without
	} else if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return line
	}
	tag := m.tag
	if tag == "" {
		// Not read from a call's stream: the only call in flight now,
		// if any, as the message comes before that call's answer.
		if ask {
			tag = m.routes.soleAsker()
		} else {
			tag = m.routes.soleTag()
		}
		if tag == "" {
			return line
		}
	}
	if s := m.routes.sink(tag); s != nil && !ask {
		s.read.Add(1)
	}
	var meta map[string]any
	_ = json.Unmarshal(params["_meta"], &meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaCallTag] = tag
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return line
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return line
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return line
	}
	return append(append(prefix, b...), end...)
}
