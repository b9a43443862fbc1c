package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bounded peek: ServeHTTP reads a POST's body once, before the SDK
// does, for what the endpoint decides on its own (transport.go,
// taskheader.go, sessions.go), and hands the body on unchanged.

// maxPeekBytes bounds how much of a POST is read before the SDK reads it
// (the SDK's own body limit: a larger body is the SDK's to refuse).
const maxPeekBytes = mcp.DefaultMaxRequestBodyBytes

// peeked is a POST's body as ServeHTTP read it, and the message in it.
type peeked struct {
	// body is the whole body; nil when the request is no POST, its body
	// is over maxPeekBytes or could not be read.
	body   []byte
	msg    message
	parsed bool
}

// peek reads the body of a POST, up to maxPeekBytes, and puts it back for
// the SDK (with the rest of a larger one, which the SDK then refuses).
func peek(r *http.Request) *peeked {
	p := &peeked{}
	if r.Method != http.MethodPost || r.Body == nil {
		return p
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPeekBytes+1))
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err == nil && len(body) <= maxPeekBytes {
		p.body = body
	}
	return p
}

// message returns the body's message, parsing it on first use.
func (p *peeked) message() *message {
	if !p.parsed {
		p.parsed = true
		p.msg = parseMessage(p.body)
	}
	return &p.msg
}

// message is what the endpoint reads of one JSON-RPC message, as the SDK's
// decoder reads it: keys match exactly (encoding/json's struct decoding
// would also take "Method"), the last of duplicate keys wins, and what
// follows the first JSON value is ignored.
type message struct {
	// ok: the body is one JSON object (not a batch, not malformed).
	ok bool
	// version is the jsonrpc member ("" for none, or not a string);
	// method the request's method ("" for none, or not a string).
	version string
	method  string
	// id is the request's id as sent (nil for a notification).
	id json.RawMessage
	// params is params as sent; task is params.task, meta params._meta
	// (nil when absent or not objects).
	params json.RawMessage
	task   json.RawMessage
	meta   map[string]json.RawMessage
}

// parseMessage reads the parts of a JSON-RPC message the endpoint acts on.
func parseMessage(body []byte) message {
	var m message
	var top map[string]json.RawMessage
	if len(body) == 0 || json.NewDecoder(bytes.NewReader(body)).Decode(&top) != nil || top == nil {
		return m
	}
	m.ok = true
	if raw, ok := top["method"]; ok {
		_ = json.Unmarshal(raw, &m.method)
	}
	if raw, ok := top["jsonrpc"]; ok {
		_ = json.Unmarshal(raw, &m.version)
	}
	m.id = top["id"]
	m.params = top["params"]
	var params map[string]json.RawMessage
	if json.Unmarshal(m.params, &params) == nil {
		if t := params["task"]; len(t) > 0 && string(t) != "null" {
			m.task = t
		}
		_ = json.Unmarshal(params["_meta"], &m.meta)
	}
	return m
}

// progressToken reports whether the message asks for progress.
func (m *message) progressToken() bool {
	t := m.meta["progressToken"]
	return len(t) > 0 && string(t) != "null"
}

// pingWithID is a ping request with the given id, which the endpoint sends
// to the SDK in place of a tasks/* request it tunnels (taskheader.go).
func pingWithID(id json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]json.RawMessage{"jsonrpc": json.RawMessage(`"2.0"`), "id": id, "method": json.RawMessage(`"ping"`)})
	return b
}

// describe names the message in an error: its method, quoted, or "a
// response".
func (m *message) describe() string {
	if m.method == "" {
		return "a response"
	}
	return strconv.Quote(m.method)
}
