package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	ws "github.com/coder/websocket"
	gql "github.com/graph-gophers/graphql-go"
)

// The demo GraphQL API's subscriptions, offline: Subscription.bookEvents
// is an endless stream of library events (a book borrowed, returned or
// reviewed every 200ms, cycling through the books of the genre asked
// for), served over both subscription transports of GraphQL:
//
//   - GET /graphql upgrading to a WebSocket with the subprotocol
//     graphql-transport-ws (the graphql-ws protocol): ConnectionInit and
//     ConnectionAck, Subscribe/Next/Error/Complete by id, Ping/Pong, and
//     the protocol's close codes (4400, 4401, 4406, 4408, 4409, 4429).
//   - POST /graphql with Accept: text/event-stream: GraphQL over SSE in
//     distinct connections mode (next events, then complete); a request
//     that does not validate is a 400 with a GraphQL error body.
//
// Neither ever completes an endless subscription: the client bounds it
// (the gateway's window, session or job). Events of book 3 select a
// rating that fails, so they come with an error (a partial event).

// gqlEventKinds cycle through the events.
var gqlEventKinds = []string{"BORROWED", "RETURNED", "REVIEWED"}

// gqlEventEvery is the pace of the demo's events.
const gqlEventEvery = 200 * time.Millisecond

type gqlEventR struct {
	seq  int32
	kind string
	at   time.Time
	book *gqlBookR
}

func (e *gqlEventR) Seq() int32      { return e.seq }
func (e *gqlEventR) Kind() string    { return e.kind }
func (e *gqlEventR) At() string      { return e.at.UTC().Format(time.RFC3339Nano) }
func (e *gqlEventR) Book() *gqlBookR { return e.book }

func (q *gqlRoot) books(genre *string) []*gqlBook {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	var out []*gqlBook
	for _, b := range q.l.books {
		if genre == nil || *genre == b.genre {
			out = append(out, b)
		}
	}
	return out
}

// BookEvents resolves Subscription.bookEvents: an event every
// gqlEventEvery until the subscriber goes.
func (q *gqlRoot) BookEvents(ctx context.Context, args struct{ Genre *string }) <-chan *gqlEventR {
	ch := make(chan *gqlEventR)
	go func() {
		defer close(ch)
		t := time.NewTicker(gqlEventEvery)
		defer t.Stop()
		for seq := int32(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			books := q.books(args.Genre)
			if len(books) == 0 {
				continue
			}
			ev := &gqlEventR{seq: seq, kind: gqlEventKinds[int(seq-1)%len(gqlEventKinds)], at: time.Now(),
				book: &gqlBookR{q.l, books[int(seq-1)%len(books)]}}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// gqlRequest is a GraphQL request as both transports carry it.
type gqlRequest struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// subscribe runs a subscription; the first answer of a request that does
// not validate is errors without data, and then the channel closes.
func subscribe(ctx context.Context, schema *gql.Schema, req gqlRequest) (<-chan any, error) {
	return schema.Subscribe(ctx, req.Query, req.OperationName, req.Variables)
}

// refused reports the answer of a subscription refused before it ran.
func refused(r any) (*gql.Response, bool) {
	resp, ok := r.(*gql.Response)
	return resp, ok && len(resp.Errors) > 0 && resp.Data == nil
}

// serveSubscriptionsWS serves graphql-transport-ws on one connection.
func serveSubscriptionsWS(schema *gql.Schema, w http.ResponseWriter, r *http.Request) {
	c, err := ws.Accept(w, r, &ws.AcceptOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	if c.Subprotocol() != "graphql-transport-ws" {
		_ = c.Close(4406, "Subprotocol not acceptable")
		return
	}
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	send := func(v any) {
		b, _ := json.Marshal(v)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = c.Write(wctx, ws.MessageText, b)
	}
	var mu sync.Mutex
	subs := map[string]context.CancelFunc{}
	acked := false
	initTimeout := time.AfterFunc(10*time.Second, func() { _ = c.Close(4408, "Connection initialisation timeout") })
	defer initTimeout.Stop()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m struct {
			Type    string          `json:"type"`
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &m) != nil {
			_ = c.Close(4400, "Invalid message received")
			return
		}
		switch m.Type {
		case "connection_init":
			if acked {
				_ = c.Close(4429, "Too many initialisation requests")
				return
			}
			acked = true
			initTimeout.Stop()
			send(map[string]any{"type": "connection_ack"})
		case "ping":
			send(map[string]any{"type": "pong"})
		case "pong":
		case "subscribe":
			var req gqlRequest
			switch {
			case !acked:
				_ = c.Close(4401, "Unauthorized")
				return
			case m.ID == "" || json.Unmarshal(m.Payload, &req) != nil:
				_ = c.Close(4400, "Invalid message received")
				return
			}
			mu.Lock()
			if _, dup := subs[m.ID]; dup {
				mu.Unlock()
				_ = c.Close(4409, "Subscriber for "+m.ID+" already exists")
				return
			}
			sctx, stop := context.WithCancel(ctx)
			subs[m.ID] = stop
			mu.Unlock()
			go func(id string) {
				defer stop()
				ch, err := subscribe(sctx, schema, req)
				if err != nil {
					send(map[string]any{"id": id, "type": "error", "payload": []any{map[string]any{"message": err.Error()}}})
					return
				}
				first := true
				for r := range ch {
					if resp, ok := refused(r); ok && first {
						send(map[string]any{"id": id, "type": "error", "payload": resp.Errors})
						break
					}
					first = false
					send(map[string]any{"id": id, "type": "next", "payload": r})
				}
				mu.Lock()
				_, live := subs[id]
				delete(subs, id)
				mu.Unlock()
				if live && sctx.Err() == nil && !first {
					send(map[string]any{"id": id, "type": "complete"})
				}
			}(m.ID)
		case "complete":
			mu.Lock()
			if stop, ok := subs[m.ID]; ok {
				stop()
				delete(subs, m.ID)
			}
			mu.Unlock()
		default:
			_ = c.Close(4400, "Invalid message received")
			return
		}
	}
}

// serveSubscriptionSSE serves one subscription over GraphQL over SSE in
// distinct connections mode.
func serveSubscriptionSSE(schema *gql.Schema, w http.ResponseWriter, r *http.Request) {
	var req gqlRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeGraphQLErrors(w, http.StatusBadRequest, "the request is not a JSON GraphQL request")
		return
	}
	ch, err := subscribe(r.Context(), schema, req)
	if err != nil {
		writeGraphQLErrors(w, http.StatusBadRequest, err.Error())
		return
	}
	// Caddy's response writer wraps the connection's: only a
	// ResponseController reaches its Flush (a type assertion finds none,
	// and the events would wait in the buffer).
	rc := http.NewResponseController(w)
	keepAlive := time.NewTicker(12 * time.Second)
	defer keepAlive.Stop()
	first := true
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			fmt.Fprint(w, ":\n\n")
		case res, ok := <-ch:
			if !ok {
				fmt.Fprint(w, "event: complete\ndata:\n\n")
				return
			}
			if resp, bad := refused(res); bad && first {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"errors": resp.Errors})
				return
			}
			if first {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				first = false
			}
			b, _ := json.Marshal(res)
			fmt.Fprintf(w, "event: next\ndata: %s\n\n", b)
		}
		_ = rc.Flush()
	}
}

func writeGraphQLErrors(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{"message": msg}}})
}

// wantsEventStream reports a GraphQL over SSE request.
func wantsEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}
