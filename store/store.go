package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned when an entity does not exist, has expired, or is
// outside the caller's scope (the three look exactly alike).
var ErrNotFound = errors.New("store: not found")

// Store holds Crank's shared state: MCP sessions, stream sessions and async
// jobs, so that any replica can serve any of them. Implementations must be
// safe for concurrent use.
//
// Errors: ErrNotFound, ErrUnavailable (etcd unreachable: retryable, returned
// within the operation timeout), ErrConflict (a lost race or a moved
// cursor), ErrIllegalTransition, ErrBufferFull, ErrTooLarge, ErrNotOwner and
// ErrInvalid (a bad argument, named in the message); test with errors.Is.
type Store interface {
	// PutMCPSession records (or overwrites) the state of an MCP session,
	// recorded when a client initializes, so that another replica can
	// accept its Mcp-Session-Id. The entry expires after s.TTL unless it is
	// touched or put again.
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

	// SSE event logs, for resuming MCP response streams with
	// Last-Event-ID (go-sdk's EventStore). Events of a stream are numbered
	// from 0 by the caller; see EventLimits for the retention.
	//
	// AppendEvents stores data as the stream's events first, first+1, ...
	// (first < 0: from the next one) and returns the first one's index. An
	// index beyond the next one (an earlier append failed) drops the events
	// before it, since a replay across the gap would lose one. Index 0
	// starts the stream afresh (it was opened again, e.g. on another
	// replica); any other index already stored is ErrConflict.
	AppendEvents(ctx context.Context, session, stream string, first int64, data [][]byte, lim EventLimits) (uint64, error)
	// AppendStreams appends the events of several streams, each as
	// AppendEvents would, sharing transactions where it can, and returns
	// one error per stream (nil: stored).
	AppendStreams(ctx context.Context, streams []StreamEvents, lim EventLimits) []error
	// EventsAfter returns the stream's events after index (-1: all), or
	// ErrEventsPurged when one of them is no longer stored: never a partial
	// replay.
	EventsAfter(ctx context.Context, session, stream string, index int64) ([][]byte, error)
	// DeleteEventStreams removes every event log of the session.
	DeleteEventStreams(ctx context.Context, session string) error

	// Stream sessions (create/get/advance/close, spec 11.2). See
	// StreamSession for the two ways to use one.
	CreateStreamSession(ctx context.Context, ns NewStreamSession) (*StreamSession, error)
	GetStreamSession(ctx context.Context, scope Scope, id string) (*StreamSession, error)
	AdvanceStreamSession(ctx context.Context, scope Scope, id string, a Advance) (*StreamSession, error)
	PollStreamSession(ctx context.Context, scope Scope, id string, req PollRequest) (*PollResult, error)
	CloseStreamSession(ctx context.Context, scope Scope, id, reason string) (*StreamSession, error)
	// Runner side: only the owning replica (or any, for an unowned
	// session).
	AppendStreamSessionItems(ctx context.Context, id string, a Append) (int, error)
	FinishStreamSession(ctx context.Context, id string, end StreamSessionEnd) (*StreamSession, error)
	WatchStreamSession(ctx context.Context, scope Scope, id string) (<-chan StreamSessionEvent, error)

	// Async jobs (create/get/update-status/cancel, spec 11.2).
	CreateJob(ctx context.Context, nj NewJob) (*AsyncJobHandle, error)
	GetJob(ctx context.Context, scope Scope, id string) (*AsyncJobHandle, error)
	CancelJob(ctx context.Context, scope Scope, id, reason string) (*AsyncJobHandle, error)
	// Runner side.
	ClaimJob(ctx context.Context, id string) (*AsyncJobHandle, error)
	UpdateJob(ctx context.Context, id string, u JobUpdate) (*AsyncJobHandle, error)
	WatchJob(ctx context.Context, scope Scope, id string) (<-chan JobEvent, error)

	// ListJobs returns the unexpired jobs visible to scope, newest first
	// (at most limit; 1000 when limit is 0).
	ListJobs(ctx context.Context, scope Scope, limit int) ([]*AsyncJobHandle, error)
	// CountOpen counts the open sessions (or, with jobs, jobs) of the
	// scope's workspace, or of its agent with agent set (see Quota).
	CountOpen(ctx context.Context, scope Scope, jobs, agent bool) (int, error)

	// WatchSignals reports stop and cancel requests of running sessions
	// and jobs from any replica: one watch per replica (see Signal).
	WatchSignals(ctx context.Context) (<-chan Signal, error)

	// Expiry and ownership.
	CleanupExpired(ctx context.Context) (CleanupReport, error)
	SweepOrphans(ctx context.Context, adopt AdoptFunc) (SweepReport, error)
	RunSweeper(ctx context.Context, cfg SweeperConfig) error
	OwnerID() string

	// Ping checks that the backing store is reachable and can serve
	// consistent reads.
	Ping(ctx context.Context) error
	// Close releases the resources held by the Store. Stored entries are
	// kept; they expire on their own.
	Close() error
}

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
