package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Raw requests.
//
// The go-sdk client sends only the requests it knows, and MCP Tasks
// (task-augmented tools/call, tasks/get, tasks/result, tasks/cancel) are
// not among them. A session's raw channel sends the adapter's own JSON-RPC
// requests on the session, with ids of the adapter's own ("crank-raw-<n>",
// strings, which the go-sdk client never uses):
//
//   - over stdio, the connection the go-sdk client reads and writes is
//     wrapped (rawConn): a request is written to it as the client's are,
//     and its response is taken out of Read before the client sees it;
//   - over Streamable HTTP, a request is a POST of its own with the
//     session's Mcp-Session-Id and Mcp-Protocol-Version (rawHTTP), as the
//     client's are, through the same HTTP client (configured headers, TLS,
//     max_message_bytes); its response is the POST's JSON body or the
//     response on its SSE stream. The go-sdk connection is not wrapped
//     there: the client tells it the session's state (the protocol
//     version for its headers, when to open the standalone stream)
//     through an unexported method (sessionUpdated) that a wrapper from
//     outside the go-sdk cannot have. The stdio connection has no such
//     method on the client side, so wrapping it loses nothing.

// rawIDPrefix begins the ids of the adapter's own requests.
const rawIDPrefix = "crank-raw-"

// rawChannel sends the adapter's own requests on one upstream session.
type rawChannel interface {
	// call sends method with params and decodes the result into out; a
	// JSON-RPC error is returned as a *jsonrpc.Error.
	call(ctx context.Context, method string, params, out any) error
}

// rawIDs numbers the raw requests of a session.
type rawIDs struct{ n atomic.Uint64 }

func (r *rawIDs) request(method string, params any) (*jsonrpc.Request, string, error) {
	id := rawIDPrefix + strconv.FormatUint(r.n.Add(1), 10)
	b, err := json.Marshal(params)
	if err != nil {
		return nil, "", err
	}
	return &jsonrpc.Request{ID: mustID(id), Method: method, Params: b}, id, nil
}

func mustID(s string) jsonrpc.ID {
	id, err := jsonrpc.MakeID(s)
	if err != nil {
		panic(err) // a string is always a valid id
	}
	return id
}

// decodeResponse turns a response into the result out, or its error.
func decodeResponse(resp *jsonrpc.Response, method string, out any) error {
	if resp.Error != nil {
		return resp.Error
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return fmt.Errorf("the upstream answered %s with a result that is not one: %v", method, err)
	}
	return nil
}

// rawTransport makes the connection of a stdio transport a rawConn.
type rawTransport struct {
	gomcp.Transport
	conn *rawConn // set by Connect
}

func (t *rawTransport) Connect(ctx context.Context) (gomcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &rawConn{Connection: c, waiting: map[string]chan *jsonrpc.Response{}, closed: make(chan struct{})}
	return t.conn, nil
}

// rawConn is a connection that carries raw requests beside the go-sdk
// client's: their responses are taken out of Read.
type rawConn struct {
	gomcp.Connection
	ids     rawIDs
	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response
	// closed is closed when Read fails: the session is gone.
	closed    chan struct{}
	closeOnce sync.Once
}

// Read passes the upstream's messages on to the go-sdk client, but for the
// responses to raw requests.
func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.end()
			}
			return msg, err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			if id, _ := resp.ID.Raw().(string); strings.HasPrefix(id, rawIDPrefix) {
				c.mu.Lock()
				ch := c.waiting[id]
				delete(c.waiting, id)
				c.mu.Unlock()
				if ch != nil {
					ch <- resp // buffered
				}
				continue
			}
		}
		return msg, nil
	}
}

// Close ends the raw requests waiting with the connection.
func (c *rawConn) Close() error {
	c.end()
	return c.Connection.Close()
}

func (c *rawConn) end() { c.closeOnce.Do(func() { close(c.closed) }) }

func (c *rawConn) call(ctx context.Context, method string, params, out any) error {
	req, id, err := c.ids.request(method, params)
	if err != nil {
		return err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
	}()
	if err := c.Connection.Write(ctx, req); err != nil {
		return err
	}
	select {
	case resp := <-ch:
		return decodeResponse(resp, method, out)
	case <-c.closed:
		return fmt.Errorf("%s: %w", method, gomcp.ErrConnectionClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rawHTTP sends raw requests on a Streamable HTTP session: the go-sdk
// client's session, or (session nil) one another process opened, named
// by its id and protocol version (a resumed task's, resume.go).
type rawHTTP struct {
	client  *http.Client
	url     string
	ids     rawIDs
	session *gomcp.ClientSession // set once the session is open
	// sessionID and protocol name the session when session is nil.
	sessionID, protocol string
}

func (r *rawHTTP) call(ctx context.Context, method string, params, out any) error {
	req, id, err := r.ids.request(method, params)
	if err != nil {
		return err
	}
	resp, err := r.post(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	var answer *jsonrpc.Response
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		msg, err := decodeMessage(b)
		if err != nil {
			return err
		}
		answer = responseTo(msg, id)
	case strings.HasPrefix(ct, "text/event-stream"):
		if answer, err = r.readStream(ctx, resp.Body, id); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: the upstream answered with content type %q", method, ct)
	}
	if answer == nil {
		return fmt.Errorf("%s: the upstream's answer is not the response to the request", method)
	}
	return decodeResponse(answer, method, out)
}

// post sends one message on the session. A request that could not be sent
// is reported as the go-sdk reports it (codeNotSent), one the upstream
// refused for its unknown session as gomcp.ErrSessionMissing.
func (r *rawHTTP) post(ctx context.Context, msg jsonrpc.Message) (*http.Response, error) {
	body, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	id, version := r.sessionID, r.protocol
	if r.session != nil {
		id, version = r.session.ID(), ""
		if ir := r.session.InitializeResult(); ir != nil {
			version = ir.ProtocolVersion
		}
	}
	if id != "" {
		req.Header.Set("Mcp-Session-Id", id)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v", &jsonrpc.Error{Code: codeNotSent, Message: "rejected by transport"}, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		return nil, gomcp.ErrSessionMissing
	case resp.StatusCode/100 != 2:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
		resp.Body.Close()
		return nil, &httpStatusError{code: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}
	return resp, nil
}

// httpStatusError is a raw request the upstream answered with an HTTP
// error status.
type httpStatusError struct {
	code int
	body string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// readStream reads an SSE response stream until the response to id. A
// request the upstream sends on it (an elicitation for the task, say) is
// refused as the go-sdk client refuses those it has no handler for:
// "method not found".
func (r *rawHTTP) readStream(ctx context.Context, body io.Reader, id string) (*jsonrpc.Response, error) {
	br := bufio.NewReader(body)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		text := bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(text, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(text, []byte("data:")), []byte(" "))...)
		case len(text) == 0 && len(data) > 0: // an event ends
			msg, derr := decodeMessage(data)
			data = nil
			if derr != nil {
				return nil, derr
			}
			if answer := responseTo(msg, id); answer != nil {
				return answer, nil
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				r.refuse(ctx, req)
			}
		}
		if err != nil {
			if errors.Is(err, errTooLarge) || ctx.Err() != nil {
				return nil, errors.Join(err, ctx.Err())
			}
			return nil, errors.New("the upstream ended the response stream before answering")
		}
	}
}

// refuse answers a request of the upstream with "method not found".
func (r *rawHTTP) refuse(ctx context.Context, req *jsonrpc.Request) {
	resp := &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
		Message: fmt.Sprintf("method %q is not supported by this client", req.Method)}}
	if answered, err := r.post(ctx, resp); err == nil {
		answered.Body.Close()
	}
}

func decodeMessage(b []byte) (jsonrpc.Message, error) {
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, fmt.Errorf("the upstream sent something that is not a JSON-RPC message: %v", err)
	}
	return msg, nil
}

// responseTo is msg when it is the response to the request id, else nil.
func responseTo(msg jsonrpc.Message, id string) *jsonrpc.Response {
	if m, ok := msg.(*jsonrpc.Response); ok {
		if s, _ := m.ID.Raw().(string); s == id {
			return m
		}
	}
	return nil
}
