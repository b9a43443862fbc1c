package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// errTooLarge is the error of reading a message beyond max_message_bytes.
var errTooLarge = errors.New("an upstream message exceeds max_message_bytes")

// frameLimiter passes a stream through and fails it with errTooLarge once
// one frame exceeds max bytes: a line (stdio), or an SSE event or a whole
// JSON body (HTTP: frames end at a blank line). The connection it belongs
// to is marked, so that the failed call says why.
type frameLimiter struct {
	r       io.ReadCloser
	max     int64
	perLine bool
	marked  *atomic.Bool

	n       int64 // bytes of the current frame
	lineHas bool  // the current line has more than \r
}

func (f *frameLimiter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i+1]
		}
		if f.n += int64(len(chunk)); f.n > f.max {
			f.marked.Store(true)
			return n - len(b), errTooLarge
		}
		content := chunk
		if i >= 0 {
			content = chunk[:i]
		}
		if len(bytes.Trim(content, "\r")) > 0 {
			f.lineHas = true
		}
		if i >= 0 {
			if f.perLine || !f.lineHas {
				f.n = 0 // a line ends a stdio frame, a blank line an SSE event
			}
			f.lineHas = false
		}
		b = b[len(chunk):]
	}
	return n, err
}

func (f *frameLimiter) Close() error { return f.r.Close() }

// limitTransport bounds the frames of every HTTP response body.
// The SSE streams of calls that want log messages, and the standalone
// stream, are read by a msgReader (logs.go) above the bound.
type limitTransport struct {
	base   http.RoundTripper
	max    int64
	marked *atomic.Bool
	logs   *logRoutes
	hs     *handshake
	// listened is told of the answer to a GET (the standalone stream).
	listened func()
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	hs := t.hs.watching()
	if hs && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, t.max))
			t.hs.sentMsg(b)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if req.Method == http.MethodGet && t.listened != nil {
		t.listened() // answered or failed: either way, waiting longer is useless
	}
	if err == nil && resp.Body != nil {
		resp.Body = &frameLimiter{r: resp.Body, max: t.max, marked: t.marked}
		if req.Method == http.MethodPost && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			resp.Body = &oneMessage{r: resp.Body, req: req}
		}
		tag, _ := req.Context().Value(callTagKey{}).(string)
		switch ct := resp.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream") && (tag != "" || hs || req.Method == http.MethodGet):
			resp.Body = newMsgReader(resp.Body, framedByEvent, tag, t.logs)
		case strings.HasPrefix(ct, "application/json") && hs:
			resp.Body = newMsgReader(resp.Body, framedByBody, "", t.logs)
		}
		if m, ok := resp.Body.(*msgReader); ok && hs {
			m.check = t.hs.received
		}
	}
	return resp, err
}

// oneMessage is an application/json answer, checked to hold one JSON
// value as Streamable HTTP says. The go-sdk client decodes the first and
// ignores the rest, so a body with, say, a notification before the
// response would leave the call waiting until its timeout: such a body
// is replaced by a JSON-RPC error answering the request, marked as the
// adapter's own (malformed), which fails the call at once and leaves the
// session standing.
type oneMessage struct {
	r   io.ReadCloser
	req *http.Request
	out *bytes.Reader
}

func (m *oneMessage) Read(p []byte) (int, error) {
	if m.out == nil {
		b, err := io.ReadAll(m.r) // bounded by the frameLimiter below
		if err != nil {
			return 0, err
		}
		if trailing(b) {
			b = malformedAnswer(m.req, b)
		} else {
			b = inputParams(b) // ask.go
		}
		m.out = bytes.NewReader(b)
	}
	return m.out.Read(p)
}

func (m *oneMessage) Close() error { return m.r.Close() }

// trailing reports whether b is a JSON value followed by more than
// white space.
func trailing(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return false // not JSON at all: the go-sdk client fails on it
	}
	_, err := dec.Token()
	return err != io.EOF
}

// malformedMark, in the data of a JSON-RPC error, marks the error as the
// adapter's own answer for a malformed body (oneMessage), not the
// upstream's.
const malformedMark = "io.crank/malformed"

// errMalformed is the message of a call whose answer was malformed.
const errMalformed = "the upstream answered with more than one JSON value in one application/json body (Streamable HTTP allows one JSON-RPC message there)"

// malformedAnswer is the JSON-RPC error answering the request req in
// place of the malformed body b; b itself when req carries no id.
func malformedAnswer(req *http.Request, b []byte) []byte {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if req.GetBody == nil {
		return b
	}
	body, err := req.GetBody()
	if err != nil || json.NewDecoder(body).Decode(&msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return b
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
		"code": jsonrpc.CodeInternalError, "message": errMalformed, "data": map[string]bool{malformedMark: true}}})
	return out
}

// malformed reports whether err is the adapter's answer for a malformed
// body (malformedAnswer).
func malformed(err error) bool {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInternalError || rpc.Message != errMalformed {
		return false
	}
	var data map[string]bool
	return json.Unmarshal(rpc.Data, &data) == nil && data[malformedMark]
}

// stdioTransport starts the upstream's command with its stdout bounded
// per line (one JSON-RPC message a line) and, where the platform allows,
// tied to the adapter's life (childSysProcAttr): a child dies with the
// adapter rather than outliving it. Its connection carries the adapter's
// raw requests too (rawTransport, raw.go).
func (c *conn) stdioTransport() (gomcp.Transport, error) {
	u := c.up
	cmd := exec.Command(u.command, u.args...)
	cmd.Env = u.env
	cmd.Stderr = os.Stderr // the adapter's stderr goes to the gateway's log
	cmd.SysProcAttr = childSysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := newMsgReader(&frameLimiter{r: io.NopCloser(stdout), max: u.maxMessage, perLine: true, marked: &c.tooLarge}, framedByLine, "", &c.logs)
	r.check = c.hs.received
	return &rawTransport{Transport: &gomcp.IOTransport{
		Reader:        r,
		Writer:        &childStdin{WriteCloser: stdin, cmd: cmd, hs: &c.hs},
		MaxLineLength: -1, // frameLimiter bounds the lines
	}}, nil
}

// childStdin is the child's stdin; closing it ends the child as the MCP
// stdio transport says: close its input, wait, then SIGTERM, then SIGKILL.
type childStdin struct {
	io.WriteCloser
	cmd *exec.Cmd
	hs  *handshake
}

// Write notes the requests of a handshake (handshake.go).
func (s *childStdin) Write(p []byte) (int, error) {
	s.hs.sentMsg(p)
	return s.WriteCloser.Write(p)
}

const terminateWait = 2 * time.Second

func (s *childStdin) Close() error {
	_ = s.WriteCloser.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	wait := func() bool {
		select {
		case <-done:
			return true
		case <-time.After(terminateWait):
			return false
		}
	}
	if wait() {
		return nil
	}
	if terminate(s.cmd.Process) == nil && wait() {
		return nil
	}
	_ = s.cmd.Process.Kill()
	if !wait() {
		return fmt.Errorf("the upstream process %d does not exit", s.cmd.Process.Pid)
	}
	return nil
}
