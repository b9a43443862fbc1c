package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when an entity does not exist or has expired.
var ErrNotFound = errors.New("store: not found")

// Store holds Crank's shared session, job and catalog state. Implementations
// must be safe for concurrent use.
type Store interface {
	// PutMCPSession records (or overwrites) the metadata of an MCP session,
	// recorded when a client initializes. The entry expires after s.TTL
	// unless it is touched or put again.
	PutMCPSession(ctx context.Context, s MCPSession) error
	// GetMCPSession returns the session with the given ID, or ErrNotFound
	// when it is absent or has expired.
	GetMCPSession(ctx context.Context, id string) (*MCPSession, error)
	// TouchMCPSession pushes the session's expiry to at least its TTL from
	// now. It returns ErrNotFound when the session is absent or has expired.
	TouchMCPSession(ctx context.Context, id string) error
	// DeleteMCPSession removes the session. Deleting an absent session is
	// not an error.
	DeleteMCPSession(ctx context.Context, id string) error
	// Ping checks that the backing store is reachable and can serve
	// consistent reads.
	Ping(ctx context.Context) error
	// Close releases the resources held by the Store. Stored entries are
	// kept; they expire on their own.
	Close() error
}

// MCPSession is the metadata of an MCP session recorded at initialize time.
type MCPSession struct {
	ID              string
	ProtocolVersion string
	ClientName      string
	ClientVersion   string
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
