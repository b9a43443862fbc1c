package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/crankmcp/crank/store"
)

// eventStoreTimeout bounds a store call made where the SDK gives no
// deadline (closing a session).
const eventStoreTimeout = 5 * time.Second

// eventStore is go-sdk's mcp.EventStore over the state store, so that a
// client whose SSE stream dropped resumes it with Last-Event-ID, on any
// replica that holds the session.
//
// It numbers each stream's events itself, counting appends that failed,
// so that the index the store records always equals the SDK's event id:
// after a failed append the store drops the events before the gap rather
// than replay the wrong ones.
type eventStore struct {
	store  func() store.Store
	limits store.EventLimits
	logger *zap.Logger

	mu   sync.Mutex
	next map[string]map[string]int64 // session → stream → next index
}

func newEventStore(st func() store.Store, lim store.EventLimits) *eventStore {
	return &eventStore{store: st, limits: lim, next: make(map[string]map[string]int64)}
}

func (es *eventStore) backend() (store.Store, error) {
	if st := es.store(); st != nil {
		return st, nil
	}
	return nil, errors.New("crank: no state store for SSE events")
}

// Open implements mcp.EventStore: a stream starts at event 0. Nothing is
// written until its first event.
func (es *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	es.mu.Lock()
	defer es.mu.Unlock()
	streams := es.next[sessionID]
	if streams == nil {
		streams = make(map[string]int64)
		es.next[sessionID] = streams
	}
	streams[streamID] = 0
	return nil
}

// claim returns the index of the stream's next event (-1 when this
// process did not open the stream: the store picks the next one). A POST
// stream ends with its response, so its counter goes with it.
func (es *eventStore) claim(sessionID, streamID string, data []byte) int64 {
	es.mu.Lock()
	defer es.mu.Unlock()
	streams := es.next[sessionID]
	idx, ok := streams[streamID]
	if !ok {
		return -1
	}
	if streamID != "" && isResponse(data) {
		delete(streams, streamID)
	} else {
		streams[streamID] = idx + 1
	}
	return idx
}

// isResponse reports whether an encoded JSON-RPC message is a response
// (it has no method).
func isResponse(data []byte) bool {
	if len(data) == 0 {
		return false
	}
	var m struct {
		Method *string `json:"method"`
	}
	return json.Unmarshal(data, &m) == nil && m.Method == nil
}

// Append implements mcp.EventStore. The write outlives the request's
// cancellation: a client that dropped the connection is exactly the one
// that will ask for the event.
func (es *eventStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	idx := es.claim(sessionID, streamID, data)
	st, err := es.backend()
	if err != nil {
		return err
	}
	_, err = st.AppendEvent(context.WithoutCancel(ctx), sessionID, streamID, idx, data, es.limits)
	return err
}

// After implements mcp.EventStore. Events the store no longer holds are
// reported as mcp.ErrEventsPurged.
func (es *eventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		st, err := es.backend()
		if err != nil {
			yield(nil, err)
			return
		}
		evs, err := st.EventsAfter(ctx, sessionID, streamID, int64(index))
		if errors.Is(err, store.ErrEventsPurged) {
			err = fmt.Errorf("%w: %w", mcp.ErrEventsPurged, err)
		}
		if err != nil {
			yield(nil, err)
			return
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore: the session's logs go (they
// would expire by their TTL anyway). The SDK calls it holding the
// session's lock, so the store is not waited for.
func (es *eventStore) SessionClosed(ctx context.Context, sessionID string) error {
	es.mu.Lock()
	delete(es.next, sessionID)
	es.mu.Unlock()
	st, err := es.backend()
	if err != nil {
		return err
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventStoreTimeout)
		defer cancel()
		if err := st.DeleteEventStreams(ctx, sessionID); err != nil && es.logger != nil {
			es.logger.Debug("SSE event logs of a closed session not deleted; they expire on their own",
				zap.String("session", sessionID), zap.Error(err))
		}
	}()
	return nil
}

// Interface guard.
var _ mcp.EventStore = (*eventStore)(nil)
