package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The handshake (server/discover, initialize) of a new session is watched,
// so that an upstream that answers it with something other than MCP fails
// at once with an error saying so, rather than when the call times out:
// the go-sdk client ignores a response to a request it never sent, which
// would leave the handshake waiting. A wrong protocol version, a refused
// one, and JSON that is not JSON-RPC fail in the client already; their
// errors are reworded (handshakeError).

// handshake watches the messages of one session's handshake.
type handshake struct {
	mu   sync.Mutex
	on   bool
	sent map[string]bool
	fail context.CancelCauseFunc
	// caps are the capabilities the upstream answered the handshake
	// with, as sent: the go-sdk client's keep only those it knows.
	caps json.RawMessage
}

// start watches a handshake, failing it through fail.
func (h *handshake) start(fail context.CancelCauseFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on, h.sent, h.fail, h.caps = true, map[string]bool{}, fail, nil
}

// stop ends the watch, returning the capabilities the upstream sent.
func (h *handshake) stop() json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	caps := h.caps
	h.on, h.sent, h.fail, h.caps = false, nil, nil, nil
	return caps
}

// watching reports whether a handshake is in progress.
func (h *handshake) watching() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.on
}

// rpcMessage is what the handshake reads of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
}

// sentMsg notes the ids of the requests in b (one message a line).
func (h *handshake) sentMsg(b []byte) {
	if !h.watching() {
		return
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m rpcMessage
		if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 {
			h.mu.Lock()
			if h.sent != nil {
				h.sent[string(m.ID)] = true
			}
			h.mu.Unlock()
		}
	}
}

// received checks a message from the upstream: a response to no request
// sent fails the handshake.
func (h *handshake) received(b []byte) {
	var m rpcMessage
	if !h.watching() || json.Unmarshal(b, &m) != nil || m.Method != "" || len(m.ID) == 0 || string(m.ID) == "null" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.on && !h.sent[string(m.ID)] && h.fail != nil {
		h.fail(&unexpectedResponse{id: string(m.ID)})
	}
	var res struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if h.on && json.Unmarshal(m.Result, &res) == nil && len(res.Capabilities) > 0 {
		h.caps = res.Capabilities
	}
}

// unexpectedResponse is the failure of an upstream that answered the
// handshake with a response to a request the adapter never sent.
type unexpectedResponse struct{ id string }

func (e *unexpectedResponse) Error() string {
	return fmt.Sprintf("it answered the handshake with a response to request %s, which the adapter never sent: it does not speak MCP (JSON-RPC 2.0)", bound(e.id))
}

// handshakeProtocol is the protocol version the adapter offers in
// initialize (the go-sdk client's, after server/discover).
const handshakeProtocol = "2025-11-25"

// handshakeError explains a failed handshake, naming the protocol version
// where that is what failed: the version the upstream answered, or the one
// it refused with the versions it supports.
func handshakeError(u *upstream, err error) (string, bool) {
	var ur *unexpectedResponse
	if errors.As(err, &ur) {
		return ur.Error(), true
	}
	msg := err.Error()
	if i := strings.Index(msg, "unsupported protocol version: "); i >= 0 {
		v := strings.TrimPrefix(msg[i:], "unsupported protocol version: ")
		return fmt.Sprintf("it answered initialize with protocol version %s, which the adapter does not speak (it asked for %s, the newest before sessionless MCP)", bound(v), handshakeProtocol), true
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && strings.Contains(msg, `"initialize"`) &&
		(rpc.Code == gomcp.CodeUnsupportedProtocolVersion || strings.Contains(strings.ToLower(rpc.Message), "protocol version")) {
		s := fmt.Sprintf("it refused the protocol version the adapter asked for (%s): %s", handshakeProtocol, bound(rpc.Message))
		var data struct {
			Supported []string `json:"supported"`
		}
		if json.Unmarshal(rpc.Data, &data) == nil && len(data.Supported) > 0 {
			s += fmt.Sprintf("; it supports %s", bound(strings.Join(data.Supported, ", ")))
		}
		return s, true
	}
	if strings.Contains(msg, "invalid message version tag") || strings.Contains(msg, "failed to decode response") ||
		strings.Contains(msg, "invalid character") || strings.Contains(msg, "unsupported content type") {
		return "it answered the handshake with something that is not a JSON-RPC 2.0 message (" + msg + ")", true
	}
	return "", false
}
