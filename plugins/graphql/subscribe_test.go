package graphql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	ws "github.com/coder/websocket"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// The subscription tests run the adapter against loopback servers that
// play the server's side of graphql-transport-ws (coder/websocket) and of
// GraphQL over SSE message by message, so that every protocol turn (and
// every way a server misbehaves) is shown. e2e runs the reference servers
// (graphql-ws, graphql-sse) and the demo's.

const bookAdded = "subscription BookAdded($genre: Genre) { bookAdded(genre: $genre) { id title genre } }"

// wsServer is a loopback graphql-transport-ws server; serve runs each
// connection (numbered from 1).
type wsServer struct {
	url   string
	conns atomic.Int32
	done  chan struct{}
}

// wsPeer is the server's side of one connection.
type wsPeer struct {
	n      int
	c      *ws.Conn
	r      *http.Request
	msgs   chan map[string]any
	closed chan ws.StatusCode
	done   chan struct{}
}

func newWSServer(t *testing.T, serve func(p *wsPeer)) *wsServer {
	s := &wsServer{done: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := ws.Accept(w, r, &ws.AcceptOptions{Subprotocols: []string{"graphql-transport-ws", "graphql-ws"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		p := &wsPeer{n: int(s.conns.Add(1)), c: c, r: r, msgs: make(chan map[string]any, 64), closed: make(chan ws.StatusCode, 1), done: s.done}
		go func() {
			for {
				_, b, err := c.Read(context.Background())
				if err != nil {
					p.closed <- ws.CloseStatus(err)
					close(p.msgs)
					return
				}
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				p.msgs <- m
			}
		}()
		serve(p)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.done) })
	s.url = srv.URL + "/graphql"
	return s
}

// next is the client's next message (nil when the connection ended).
func (p *wsPeer) next() map[string]any {
	select {
	case m := <-p.msgs:
		return m
	case <-p.done:
		return nil
	}
}

func (p *wsPeer) send(v any) bool {
	b, _ := json.Marshal(v)
	return p.c.Write(context.Background(), ws.MessageText, b) == nil
}

// handshake reads ConnectionInit, acknowledges it and reads Subscribe.
func (p *wsPeer) handshake() (init, sub map[string]any) {
	init = p.next()
	p.send(map[string]any{"type": "connection_ack"})
	return init, p.next()
}

func (p *wsPeer) nextEvent(title string) bool {
	return p.send(map[string]any{"id": "1", "type": "next", "payload": map[string]any{"data": map[string]any{"bookAdded": map[string]any{"id": "9", "title": title, "genre": "FICTION"}}}})
}

func (p *wsPeer) waitClosed() ws.StatusCode {
	select {
	case s := <-p.closed:
		return s
	case <-p.done:
		return -2
	}
}

// subTool expands a subscription entry and returns its tool.
func subTool(t *testing.T, h *adaptertest.Harness, endpoint string, sub map[string]any) sdk.Tool {
	t.Helper()
	cfg := map[string]any{"endpoint": endpoint, "schema": "testdata/library.graphqls", "query": bookAdded, "subscriptions": sub}
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg})
	if err != nil || len(diags) > 0 || len(tools) != 1 {
		t.Fatalf("expand: %v %v %v", tools, diags, err)
	}
	return tools[0]
}

func summarize(events []client.Event, ue *sdk.UpstreamError) string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.String())
	}
	if ue != nil {
		out = append(out, fmt.Sprintf("error %s %s rejected=%v: %s", ue.Kind, ue.Status, ue.Rejected, ue.Message))
	}
	return strings.Join(out, " | ")
}

func fastReconnect(extra map[string]any) map[string]any {
	m := map[string]any{"reconnect": map[string]any{"initial_delay": "1ms", "max_delay": "2ms"}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestSubscriptionExpandsToAWindow: a subscription of a unary entry is a
// window tool whose items are the data of its events; before this change
// the load refused it.
func TestSubscriptionExpandsToAWindow(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, "http://127.0.0.1:1/graphql", nil)
	if tool.Mode != sdk.ModeWindow || tool.OutputSchema != nil || !strings.Contains(string(tool.ItemSchema), `"bookAdded"`) {
		t.Fatalf("tool: mode %v output %s item %s", tool.Mode, tool.OutputSchema, tool.ItemSchema)
	}
	if tool.Annotations.ReadOnly == nil || !*tool.Annotations.ReadOnly {
		t.Errorf("a subscription is read-only: %+v", tool.Annotations)
	}
	if !strings.Contains(string(tool.InputSchema), `"genre"`) {
		t.Errorf("input schema from the variables: %s", tool.InputSchema)
	}
	// A window entry serves the subscription in its own mode, and refuses
	// a query.
	cfg := map[string]any{"endpoint": "http://127.0.0.1:1/graphql", "schema": "testdata/library.graphqls",
		"query": bookAdded + " query GetBook($id: ID!) { book(id: $id) { id } }"}
	_, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg, Mode: sdk.ModeWindow})
	if err != nil || len(diags) != 1 || !strings.Contains(diags[0].Message, "query GetBook is one request") {
		t.Fatalf("a query in a window entry: %v %v", diags, err)
	}
	cfg["operations"] = []string{"BookAdded"}
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg, Mode: sdk.ModeWindow})
	if err != nil || len(diags) != 0 || len(tools) != 1 || tools[0].Mode != 0 {
		t.Fatalf("window entry: %v %v %v", tools, diags, err)
	}
	// A host that does not read a tool's mode cannot serve it from a
	// unary entry.
	delete(cfg, "operations")
	cfg["query"] = bookAdded
	_, diags, _ = h.Expand(ctxT(t), adaptertest.Call{Config: cfg, OldHost: true})
	if len(diags) != 1 || !strings.Contains(diags[0].Message, "give the entry mode window or session") {
		t.Fatalf("old host: %v", diags)
	}
	// Invoking a subscription says it is a stream.
	_, ue, _ := h.Invoke(ctxT(t), adaptertest.Call{Config: tool.Config})
	if ue == nil || ue.Kind != sdk.KindInvalidArgument || !strings.Contains(ue.Message, "a subscription is a stream") {
		t.Fatalf("invoke: %v", ue)
	}
}

// TestSubscriptionWebSocket: ConnectionInit with the configured payload,
// the ack, Subscribe with the variables, items from next; when the host
// stops, Complete and a normal close.
func TestSubscriptionWebSocket(t *testing.T) {
	t.Parallel()
	got := make(chan []map[string]any, 1)
	srv := newWSServer(t, func(p *wsPeer) {
		init, sub := p.handshake()
		for i := 1; i <= 3; i++ {
			p.nextEvent(fmt.Sprint("book ", i))
		}
		complete := p.next()
		p.waitClosed()
		got <- []map[string]any{init, sub, complete}
	})
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, srv.url, map[string]any{"connection_init": map[string]any{"token": "s3cret"}})
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config, Args: map[string]any{"genre": "FICTION"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bookAdded":{"genre":"FICTION","id":"9","title":"book 1"}} | {"bookAdded":{"genre":"FICTION","id":"9","title":"book 2"}} | {"bookAdded":{"genre":"FICTION","id":"9","title":"book 3"}}`
	if s := summarize(events, ue); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
	msgs := <-got
	if b, _ := json.Marshal(msgs[0]); string(b) != `{"payload":{"token":"s3cret"},"type":"connection_init"}` {
		t.Errorf("connection_init: %s", b)
	}
	if b, _ := json.Marshal(msgs[1]); !strings.Contains(string(b), `"operationName":"BookAdded"`) || !strings.Contains(string(b), `"variables":{"genre":"FICTION"}`) || !strings.Contains(string(b), `"type":"subscribe"`) {
		t.Errorf("subscribe: %s", b)
	}
	if b, _ := json.Marshal(msgs[2]); string(b) != `{"id":"1","type":"complete"}` {
		t.Errorf("complete: %s", b)
	}
}

// TestSubscriptionErrors: an event with errors is a gap (with its data an
// item), the server's complete ends the stream, an error message refuses
// the subscription, and a refused ConnectionInit (4403) is a clear,
// rejected error.
func TestSubscriptionErrors(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	cases := []struct {
		name  string
		serve func(p *wsPeer)
		want  string
	}{
		{"complete", func(p *wsPeer) {
			p.handshake()
			p.nextEvent("a")
			p.send(map[string]any{"id": "1", "type": "next", "payload": map[string]any{"data": nil, "errors": []any{map[string]any{"message": "rating failed", "path": []any{"bookAdded", "rating"}}}}})
			p.send(map[string]any{"id": "1", "type": "complete"})
			p.waitClosed()
		}, `{"bookAdded":{"genre":"FICTION","id":"9","title":"a"}} | gap: an event was lost to 1 error from the GraphQL server: rating failed (at bookAdded.rating) | end`},
		{"error mid-stream", func(p *wsPeer) {
			p.handshake()
			p.nextEvent("a")
			p.send(map[string]any{"id": "1", "type": "error", "payload": []any{map[string]any{"message": "feed closed", "extensions": map[string]any{"code": "FEED_GONE"}}}})
			p.waitClosed()
		}, `{"bookAdded":{"genre":"FICTION","id":"9","title":"a"}} | error upstream_status FEED_GONE rejected=false: the GraphQL server ended the subscription with 1 error: feed closed [FEED_GONE]`},
		{"refused", func(p *wsPeer) {
			p.handshake()
			p.send(map[string]any{"id": "1", "type": "error", "payload": []any{map[string]any{"message": "not allowed", "extensions": map[string]any{"code": "FORBIDDEN"}}}})
			p.waitClosed()
		}, `error upstream_status FORBIDDEN rejected=true: the GraphQL server refused the subscription with 1 error: not allowed [FORBIDDEN]`},
		{"wrong credentials", func(p *wsPeer) {
			p.next()
			p.c.Close(4403, "Forbidden")
		}, `error upstream_status 4403 rejected=true: the server closed the connection with status 4403 (forbidden: the server refused ConnectionInit (check the credentials in subscriptions.connection_init and headers)): Forbidden`},
		{"not a protocol message", func(p *wsPeer) {
			p.handshake()
			p.send(map[string]any{"type": "data", "id": "1"})
			p.waitClosed()
		}, `error bad_response  rejected=false: the server broke the graphql-transport-ws protocol: unknown message type "data"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newWSServer(t, tc.serve)
			tool := subTool(t, h, srv.url, fastReconnect(nil))
			events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if s := summarize(events, ue); s != tc.want {
				t.Fatalf("events:\n got %s\nwant %s", s, tc.want)
			}
		})
	}
}

// TestSubscriptionLegacyProtocol: subscriptions-transport-ws (subprotocol
// graphql-ws): start, data and stop, keep-alives, protocol pings, and a
// connection_error that refuses ConnectionInit.
func TestSubscriptionLegacyProtocol(t *testing.T) {
	t.Parallel()
	got := make(chan []any, 1)
	srv := newWSServer(t, func(p *wsPeer) {
		init := p.next()
		if init["payload"].(map[string]any)["token"] != "s3cret" {
			p.send(map[string]any{"type": "connection_error", "payload": map[string]any{"message": "bad token"}})
			p.waitClosed()
			return
		}
		p.send(map[string]any{"type": "connection_ack"})
		p.send(map[string]any{"type": "ka"})
		start := p.next()
		for i := 1; i <= 2; i++ {
			p.send(map[string]any{"id": "1", "type": "data", "payload": map[string]any{"data": map[string]any{"bookAdded": map[string]any{"id": fmt.Sprint(i)}}}})
			p.send(map[string]any{"type": "ka"})
		}
		stop := p.next()
		p.waitClosed()
		got <- []any{p.c.Subprotocol(), start["type"], start["id"], stop}
	})
	h := adaptertest.New(t, graphql.New())
	sub := map[string]any{"protocol": "subscriptions-transport-ws", "connection_init": map[string]any{"token": "s3cret"}, "ping_interval": "10ms"}
	tool := subTool(t, h, srv.url, sub)
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s := summarize(events, ue); s != `{"bookAdded":{"id":"1"}} | {"bookAdded":{"id":"2"}}` {
		t.Fatalf("events: %s", s)
	}
	if msgs := fmt.Sprint(<-got); msgs != "[graphql-ws start 1 map[id:1 type:stop]]" {
		t.Errorf("messages: %s", msgs)
	}
	sub["connection_init"] = map[string]any{"token": "nope"}
	tool = subTool(t, h, srv.url, sub)
	events, ue, _ = h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 0)
	want := `error upstream_status GRAPHQL_ERROR rejected=true: the GraphQL server refused connection_init (check the credentials in subscriptions.connection_init and headers) with 1 error: bad token`
	if s := summarize(events, ue); s != want {
		t.Fatalf("connection_error:\n got %s\nwant %s", s, want)
	}
}

// TestSubscriptionReconnects: a lost connection is a gap, then the
// subscription is made again on a new connection.
func TestSubscriptionReconnects(t *testing.T) {
	t.Parallel()
	srv := newWSServer(t, func(p *wsPeer) {
		p.handshake()
		p.nextEvent(fmt.Sprint("conn ", p.n))
		if p.n == 1 {
			p.c.CloseNow() // dropped
			return
		}
		p.waitClosed()
	})
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, srv.url, fastReconnect(nil))
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 3)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize(events, ue)
	if !strings.HasPrefix(s, `{"bookAdded":{"genre":"FICTION","id":"9","title":"conn 1"}} | gap: the subscription's connection was lost (`) ||
		!strings.HasSuffix(s, `subscribing again: events sent meanwhile were missed | {"bookAdded":{"genre":"FICTION","id":"9","title":"conn 2"}}`) {
		t.Fatalf("events: %s", s)
	}
}

// A subscription held to egress rules (a catalog's entry) is checked on
// every connection it dials, its reconnect too: rules naming the server's
// address carry it through a dropped connection; under * the loopback
// server is never connected to and the stream ends with the refusal.
func TestSubscriptionEgress(t *testing.T) {
	t.Parallel()
	srv := newWSServer(t, func(p *wsPeer) {
		p.handshake()
		p.nextEvent(fmt.Sprint("conn ", p.n))
		if p.n == 1 {
			p.c.CloseNow() // dropped
			return
		}
		p.waitClosed()
	})
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, srv.url, fastReconnect(nil))
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config, Egress: []string{srv.url}}, 3)
	if s := summarize(events, ue); err != nil || !strings.HasSuffix(s, `"title":"conn 2"}}`) || srv.conns.Load() != 2 {
		t.Fatalf("named: %s %v after %d connections", s, err, srv.conns.Load())
	}
	events, ue, err = h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config, Egress: []string{"*"}}, 0)
	if s := summarize(events, ue); err != nil || !strings.Contains(s, "egress refused") || !strings.Contains(s, "is a loopback address") || srv.conns.Load() != 2 {
		t.Fatalf("under *: %s %v after %d connections", s, err, srv.conns.Load())
	}
}

// TestSubscriptionPongLost: a server that answers no Ping loses the
// connection; without reconnect the stream fails naming the timeout.
func TestSubscriptionPongLost(t *testing.T) {
	t.Parallel()
	srv := newWSServer(t, func(p *wsPeer) {
		p.handshake()
		p.nextEvent("a")
		p.waitClosed() // pings are read and never answered
	})
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, srv.url, map[string]any{"ping_interval": "10ms", "pong_timeout": "10ms", "reconnect": map[string]any{"max_attempts": 0}})
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The event may come before the Pong is missed or not (a loaded
	// machine): the stream ends with the heartbeat's error either way.
	want := `error timeout  rejected=false: no Pong within subscriptions.pong_timeout (10ms) of a Ping (reconnect is off: subscriptions.reconnect.max_attempts is 0)`
	if s := strings.TrimPrefix(summarize(events, ue), `{"bookAdded":{"genre":"FICTION","id":"9","title":"a"}} | `); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
}

// TestSubscriptionOversizeMessage: a message above max_message_bytes is
// skipped as a gap; the next one is an item.
func TestSubscriptionOversizeMessage(t *testing.T) {
	t.Parallel()
	srv := newWSServer(t, func(p *wsPeer) {
		p.handshake()
		p.nextEvent(strings.Repeat("x", 200))
		p.nextEvent("b")
		p.waitClosed()
	})
	h := adaptertest.New(t, graphql.New())
	tool := subTool(t, h, srv.url, map[string]any{"max_message_bytes": 100})
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tool.Config}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := `gap: a message larger than subscriptions.max_message_bytes (100) was skipped | {"bookAdded":{"genre":"FICTION","id":"9","title":"b"}}`
	if s := summarize(events, ue); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
}

// TestSubscriptionSSE: GraphQL over SSE in distinct connections mode: a
// POST of the request with the headers, next events as items, complete
// ends; a GraphQL error answer refuses the subscription.
func TestSubscriptionSSE(t *testing.T) {
	t.Parallel()
	var body atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql/stream", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body.Store(r.Header.Get("Authorization") + " " + r.Header.Get("Accept") + " " + string(b))
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= 2; i++ {
			fmt.Fprintf(w, "event: next\ndata: {\"data\":{\"bookAdded\":{\"id\":\"%d\"}}}\n\n", i)
		}
		fmt.Fprint(w, ": keep-alive\n\nevent: next\ndata: {\"data\":{\"bookAdded\":{\"id\":\"3\"}},\"errors\":[{\"message\":\"title failed\",\"path\":[\"bookAdded\",\"title\"]}]}\n\n")
		fmt.Fprint(w, "event: complete\ndata:\n\n")
	})
	mux.HandleFunc("POST /graphql/refuse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"errors":[{"message":"Cannot query field \"nope\""}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	h := adaptertest.New(t, graphql.New())
	cfg := map[string]any{"endpoint": srv.URL + "/graphql", "schema": "testdata/library.graphqls", "query": bookAdded,
		"headers": map[string]any{"Authorization": "Bearer t0k"}, "subscriptions": map[string]any{"transport": "sse", "url": srv.URL + "/graphql/stream"}}
	tools, diags, err := h.Expand(ctxT(t), adaptertest.Call{Config: cfg})
	if err != nil || len(diags) > 0 {
		t.Fatal(diags, err)
	}
	events, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: tools[0].Config}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bookAdded":{"id":"1"}} | {"bookAdded":{"id":"2"}} | {"bookAdded":{"id":"3"}} (partial: 1 error from the GraphQL server: title failed (at bookAdded.title)) | end`
	if s := summarize(events, ue); s != want {
		t.Fatalf("events:\n got %s\nwant %s", s, want)
	}
	if b := body.Load().(string); !strings.HasPrefix(b, `Bearer t0k text/event-stream {"query":"subscription BookAdded`) {
		t.Errorf("request: %s", b)
	}
	cfg["subscriptions"] = map[string]any{"transport": "sse", "url": srv.URL + "/graphql/refuse"}
	tools, _, _ = h.Expand(ctxT(t), adaptertest.Call{Config: cfg})
	events, ue, _ = h.Stream(ctxT(t), adaptertest.Call{Config: tools[0].Config}, 0)
	want = `error upstream_status GRAPHQL_ERROR rejected=true: the GraphQL server refused the subscription with 1 error: Cannot query field "nope"`
	if s := summarize(events, ue); s != want {
		t.Fatalf("refused:\n got %s\nwant %s", s, want)
	}
}

// TestSubscriptionConfigErrors: the subscriptions block is checked at
// load, naming the field.
func TestSubscriptionConfigErrors(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	for sub, want := range map[string]string{
		`{"transport":"sse","url":"ws://h/graphql"}`:            "subscriptions.url: must be an absolute http:// or https:// URL for transport sse",
		`{"url":"https://h/graphql"}`:                           "subscriptions.url: must be an absolute ws:// or wss:// URL for transport websocket",
		`{"connection_init":[1]}`:                               "subscriptions.connection_init: must be a JSON object",
		`{"transport":"sse","connection_init":{"a":1}}`:         "subscriptions.connection_init: is sent by the websocket transport only",
		`{"reconnect":{"initial_delay":"2s","max_delay":"1s"}}`: "subscriptions.reconnect.max_delay: must not be below",
		`{"transport":"grpc"}`:                                  "subscriptions.transport",
	} {
		cfg := `{"endpoint":"http://127.0.0.1:1/graphql","query":"` + bookAdded + `","subscriptions":` + sub + `}`
		diags, err := h.Validate(ctxT(t), adaptertest.Call{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range diags {
			got = append(got, d.Field+": "+d.Message)
		}
		if !strings.Contains(strings.Join(got, "; "), want) {
			t.Errorf("%s: %v, want %q", sub, got, want)
		}
	}
}
