package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Client speaks raw JSON-RPC over MCP Streamable HTTP, one request per
// POST, and reads the reply from a JSON or SSE response.
type Client struct {
	T   testing.TB
	URL string
	// Session is the Mcp-Session-Id sent with every request ("" for
	// none); Initialize sets it.
	Session string
	// Version is sent as MCP-Protocol-Version with requests in a session;
	// Initialize sets it to the negotiated version.
	Version string
	// Header is sent with every request (e.g. an agent header).
	Header http.Header

	next atomic.Int64
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Reply is the JSON-RPC reply to a request, or the HTTP failure that
// replaced it (HTTPStatus other than 200, Body; Error when the body was a
// JSON-RPC error).
type Reply struct {
	HTTPStatus int
	Body       string
	Result     json.RawMessage
	Error      *Error
}

// SkipIDs makes the client's request ids start after n, so that clients
// sharing a session do not reuse each other's ids.
func (c *Client) SkipIDs(n int64) { c.next.Store(n) }

// Request sends one request and returns the HTTP response (for a test that
// reads or drops the stream itself) and the request's id.
func (c *Client) Request(ctx context.Context, method string, params any) (*http.Response, int64, error) {
	id := c.next.Add(1)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	resp, err := c.post(ctx, body)
	return resp, id, err
}

func (c *Client) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
		if c.Version != "" {
			req.Header.Set("MCP-Protocol-Version", c.Version)
		}
	}
	return http.DefaultClient.Do(req)
}

// Call sends one request and returns its reply.
func (c *Client) Call(method string, params any) Reply {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := c.Try(ctx, method, params)
	if err != nil {
		c.T.Fatal(err)
	}
	return r
}

// Try sends one request and returns its reply, or the error that kept it
// from arriving; it does not touch T, so any goroutine may call it.
func (c *Client) Try(ctx context.Context, method string, params any) (Reply, error) {
	resp, id, err := c.Request(ctx, method, params)
	if err != nil {
		return Reply{}, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	out := Reply{HTTPStatus: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		out.Body = string(b)
		_ = json.Unmarshal(b, &struct{ Error **Error }{&out.Error})
		return out, nil
	}
	var msgs []string
	var cut error // the stream ended without its end: a server or proxy died
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				msgs = append(msgs, d)
			}
		}
		if cut = sc.Err(); cut == nil {
			// A stream that ends without the reply was cut too: a
			// replica drained for a restart closes its sessions' streams.
			cut = io.ErrUnexpectedEOF
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		msgs = append(msgs, string(b))
	}
	for _, m := range msgs {
		var msg struct {
			ID     *int64          `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *Error          `json:"error"`
		}
		if json.Unmarshal([]byte(m), &msg) == nil && msg.ID != nil && *msg.ID == id {
			out.Result, out.Error = msg.Result, msg.Error
			if c.Session == "" {
				c.Session = resp.Header.Get("Mcp-Session-Id")
			}
			return out, nil
		}
	}
	if cut != nil {
		return out, fmt.Errorf("%s: the response stream was cut before the reply: %w", method, cut)
	}
	return out, fmt.Errorf("%s: no reply with id %d in %q", method, id, msgs)
}

// OK sends a request that must succeed and decodes its result into v.
func (c *Client) OK(method string, params, v any) {
	c.T.Helper()
	r := c.Call(method, params)
	if r.HTTPStatus != http.StatusOK || r.Error != nil {
		c.T.Fatalf("%s %v: HTTP %d %s, error %+v", method, params, r.HTTPStatus, r.Body, r.Error)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		c.T.Fatalf("%s: %v: %s", method, err, r.Result)
	}
}

// Fails sends a request that must fail with a JSON-RPC error of code whose
// message contains want.
func (c *Client) Fails(method string, params any, code int, want string) {
	c.T.Helper()
	r := c.Call(method, params)
	if r.Error == nil || r.Error.Code != code || !strings.Contains(r.Error.Message, want) {
		c.T.Fatalf("%s %v: HTTP %d, result %s, error %+v; want error %d containing %q",
			method, params, r.HTTPStatus, r.Result, r.Error, code, want)
	}
}

// Initialize opens a session at the given protocol version, sends
// notifications/initialized and returns the initialize result.
func (c *Client) Initialize(version string) map[string]any {
	c.T.Helper()
	c.Session = ""
	var res map[string]any
	c.OK("initialize", map[string]any{"protocolVersion": version, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "mcptest", "version": "1"}}, &res)
	if c.Session == "" {
		c.T.Fatal("initialize: no Mcp-Session-Id")
	}
	c.Version, _ = res["protocolVersion"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		c.T.Fatalf("notifications/initialized: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.T.Fatalf("notifications/initialized: %s", resp.Status)
	}
	return res
}

// Task is an MCP Task object.
type Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// CallResult is a CallToolResult, or a CreateTaskResult (Task set).
type CallResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	Task              *Task          `json:"task"`
}

// Text is the text of the result's first content block.
func (r CallResult) Text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

// RelatedTask is the task id of the result's related-task _meta.
func (r CallResult) RelatedTask() string {
	rt, _ := r.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	id, _ := rt["taskId"].(string)
	return id
}

// StartTask calls tool as a task with arguments and returns the task of
// the CreateTaskResult.
func (c *Client) StartTask(tool string, arguments any) Task {
	c.T.Helper()
	var res CallResult
	c.OK("tools/call", map[string]any{"name": tool, "arguments": arguments, "task": map[string]any{"ttl": 60000}}, &res)
	if res.Task == nil || res.Task.TaskID == "" {
		c.T.Fatalf("task-augmented call of %s: no task in %+v", tool, res)
	}
	return *res.Task
}

// GetTask returns tasks/get of id.
func (c *Client) GetTask(id string) Task {
	c.T.Helper()
	var t Task
	c.OK("tasks/get", map[string]any{"taskId": id}, &t)
	return t
}

// InitializeBody is an initialize request (protocol 2025-06-18) of a
// client named "raw".
const InitializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// NewInitialize returns a server-side POST of InitializeBody to target,
// for calling a handler directly.
func NewInitialize(target string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(InitializeBody))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	return r
}
