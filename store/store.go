package store

import (
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned when an entity does not exist, has expired, or is
// outside the caller's scope (the three look exactly alike).
var ErrNotFound = errors.New("store: not found")

// MCPSession is the state of an MCP session recorded at initialize time:
// what another replica needs to rebuild the session when a request with
// its Mcp-Session-Id reaches it (go-sdk's ServerSessionState: initialize
// params, negotiated version, log level).
type MCPSession struct {
	ID string
	// ProtocolVersion is the negotiated protocol version.
	ProtocolVersion string
	// ClientName, ClientVersion and ClientTitle are the client's
	// clientInfo.
	ClientName    string
	ClientVersion string
	ClientTitle   string
	// ClientCapabilities is the client's capabilities object, as JSON.
	ClientCapabilities json.RawMessage
	// InitializeParams are the client's initialize params verbatim, as
	// JSON (optional; lets a replica restore exactly what the SDK saw).
	InitializeParams json.RawMessage
	// Initialized: the client sent notifications/initialized.
	Initialized bool
	// LogLevel is the level set by logging/setLevel ("" for none).
	LogLevel string
	// WorkspaceID and AgentID are who opened the session, when known, so
	// that a replica can refuse the session ID from anyone else.
	WorkspaceID string
	AgentID     string
	// CreatedAt is when the session was initialized. PutMCPSession fills it
	// with the current time when it is zero.
	CreatedAt time.Time
	// TTL is how long the session lives after its last put or touch. It
	// must be positive; it is stored rounded up to whole milliseconds.
	TTL time.Duration
}

// maxIDLen bounds entity IDs so that a hostile ID (e.g. from an
// Mcp-Session-Id header) cannot produce oversized keys.
const maxIDLen = 512
