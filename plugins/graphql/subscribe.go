package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Subscription transports.
const (
	transportWebSocket = "websocket"
	transportSSE       = "sse"
)

// The WebSocket protocols of GraphQL subscriptions, by their
// subscriptions.protocol names.
const (
	// protocolTransportWS is the GraphQL over WebSocket protocol of
	// graphql-ws (subprotocol graphql-transport-ws).
	protocolTransportWS = "graphql-transport-ws"
	// protocolLegacy is Apollo's older subscriptions-transport-ws
	// (subprotocol graphql-ws), which some servers still speak.
	protocolLegacy = "subscriptions-transport-ws"
)

// closeTimeout bounds a stop: complete, then the close handshake.
const closeTimeout = 2 * time.Second

// subscriptionFields is the subscriptions block as written.
type subscriptionFields struct {
	Transport       string          `json:"transport,omitempty" enum:"websocket,sse" default:"websocket" jsonschema:"websocket: GraphQL over WebSocket (see protocol); sse: GraphQL over SSE in distinct connections mode (one POST per subscription)."`
	Protocol        string          `json:"protocol,omitempty" enum:"graphql-transport-ws,subscriptions-transport-ws" default:"graphql-transport-ws" jsonschema:"The websocket transport's protocol: graphql-transport-ws (graphql-ws), or the legacy subscriptions-transport-ws (subprotocol graphql-ws) of older servers."`
	URL             string          `reach:"upstream" json:"url,omitempty" jsonschema:"URL of the subscription endpoint: ws:// or wss:// for websocket, http:// or https:// for sse. Default: endpoint (as ws:// or wss:// for websocket)."`
	ConnectionInit  json.RawMessage `json:"connection_init,omitempty" jsonschema:"Payload of graphql-transport-ws ConnectionInit: a JSON object (credentials via placeholders)."`
	AckTimeout      sdk.Duration    `json:"ack_timeout,omitempty" default:"10s" jsonschema:"How long the server may take to answer ConnectionInit with ConnectionAck."`
	PingInterval    sdk.Duration    `json:"ping_interval,omitempty" default:"15s" jsonschema:"How often a graphql-transport-ws Ping is sent."`
	PongTimeout     sdk.Duration    `json:"pong_timeout,omitempty" default:"5s" jsonschema:"How long the Pong may take; without one the connection is lost."`
	MaxMessageBytes int             `json:"max_message_bytes,omitempty" default:"1048576" minimum:"64" maximum:"33554432" jsonschema:"Largest message (websocket) or event (sse) read; a larger one is skipped and reported as a gap."`
	Reconnect       reconnectFields `json:"reconnect,omitzero" jsonschema:"How a lost connection is reopened (and the subscription made again)."`
}

// reconnectFields is the subscriptions.reconnect block as written.
type reconnectFields struct {
	MaxAttempts  int          `json:"max_attempts,omitempty" default:"5" minimum:"0" maximum:"100" jsonschema:"Consecutive failed reopenings before the stream fails; 0 never reconnects."`
	InitialDelay sdk.Duration `json:"initial_delay,omitempty" default:"250ms" jsonschema:"The first backoff delay, doubling up to max_delay."`
	MaxDelay     sdk.Duration `json:"max_delay,omitempty" default:"5s" jsonschema:"The longest backoff delay."`
}

// subConfig is how subscription operations are read.
type subConfig struct {
	transport string
	dialect   *wsDialect
	// url is the subscription endpoint; upstream names it in errors
	// (scheme and host).
	url, upstream, hostport string
	// init is the ConnectionInit message, payload included.
	init         []byte
	ackTimeout   time.Duration
	pingInterval time.Duration
	pongTimeout  time.Duration
	maxMessage   int
	// reconnect is the policy of a lost connection.
	reconnect sdk.Reconnect
}

// parseSubscriptions checks the subscriptions block. The url defaults to
// the endpoint, so it is read after it.
func parseSubscriptions(f *subscriptionFields, c *config, d *diags) {
	s := &c.sub
	s.transport = f.Transport
	s.dialect = dialects[f.Protocol]
	if s.transport == transportSSE && f.Protocol != protocolTransportWS {
		d.Errorf("subscriptions.protocol", "is the websocket transport's: GraphQL over SSE has one protocol")
	}
	s.ackTimeout, s.pingInterval, s.pongTimeout = time.Duration(f.AckTimeout), time.Duration(f.PingInterval), time.Duration(f.PongTimeout)
	s.maxMessage = f.MaxMessageBytes
	r := &f.Reconnect
	s.reconnect = sdk.Reconnect{MaxAttempts: r.MaxAttempts, Field: "subscriptions.reconnect.max_attempts",
		Backoff: sdk.Backoff{Initial: time.Duration(r.InitialDelay), Max: time.Duration(r.MaxDelay)}}
	if r.MaxDelay < r.InitialDelay {
		d.Errorf("subscriptions.reconnect.max_delay", "must not be below subscriptions.reconnect.initial_delay")
	}
	init := map[string]json.RawMessage{"type": json.RawMessage(`"connection_init"`)}
	if p := bytes.TrimSpace(f.ConnectionInit); len(p) > 0 && !isNull(p) {
		if p[0] != '{' || !json.Valid(p) {
			d.Errorf("subscriptions.connection_init", "must be a JSON object (the ConnectionInit payload)")
		} else {
			init["payload"] = p
		}
		if s.transport == transportSSE {
			d.Errorf("subscriptions.connection_init", "is sent by the websocket transport only: GraphQL over SSE authenticates with headers")
		}
	}
	s.init, _ = json.Marshal(init)

	raw := strings.TrimSpace(f.URL)
	if raw == "" {
		if c.endpoint == "" {
			return // endpoint is reported
		}
		raw = c.endpoint
		if s.transport == transportWebSocket {
			raw = "ws" + strings.TrimPrefix(raw, "http")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		d.Errorf("subscriptions.url", "not a valid URL") // never its text: it may carry secrets
		return
	}
	scheme := strings.ToLower(u.Scheme)
	want := map[string][]string{transportWebSocket: {"ws", "wss"}, transportSSE: {"http", "https"}}[s.transport]
	if scheme != want[0] && scheme != want[1] || u.Hostname() == "" {
		d.Errorf("subscriptions.url", "must be an absolute %s:// or %s:// URL for transport %s", want[0], want[1], s.transport)
		return
	}
	u.Fragment = ""
	s.url, s.upstream, s.hostport = u.String(), scheme+"://"+u.Host, u.Host
}

// errHostGone: the host stopped taking events.
var errHostGone = errors.New("the host ended the stream")

// subStream is one Stream call of a subscription tool: one subscription,
// over as many connections as the reconnect policy allows.
type subStream struct {
	c       *config
	t       *tool
	send    sdk.StreamSender
	client  *http.Client
	timeout time.Duration
	// request is the subscription's {"query","operationName","variables"}.
	request []byte
	// upstream names the subscription in errors: "subscription X at ws://h".
	upstream string
}

// Stream implements sdk.Streamer: it makes the subscription and sends the
// data of every event as an item until the host cancels (a window limit,
// a session stop: the subscription is completed), the server completes
// it, or the connection is lost for good.
func (a *adapter) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	p := a.configs.Get(&req.Operation)
	if p.Err() != nil {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Message: p.Err().Error()}
	}
	c := p.Value.cfg
	t := c.tool
	if t == nil {
		var ue *sdk.UpstreamError
		if t, ue = a.entryTool(ctx, p.Value, req); ue != nil {
			return ue
		}
	}
	if !t.subscription {
		return &sdk.UpstreamError{Kind: sdk.KindInvalidArgument, Upstream: c.upstreamLabel(t),
			Message: "a " + t.spec.Kind + " is one request: give it mode unary (only a subscription is a stream)"}
	}
	vars, verr := t.variables(req.Arguments)
	if verr != nil {
		return c.invalidArg(t, verr)
	}
	body := make([]byte, 0, len(t.prefix)+len(vars)+16)
	body = append(body, t.prefix...)
	body = append(body, `,"variables":`...)
	body = append(body, vars...)
	body = append(body, '}')
	s := &subStream{c: c, t: t, send: send, client: a.clients.For(c.egress), timeout: c.callTimeout(req.Operation.Timeout),
		request: body, upstream: t.label + " at " + c.sub.upstream}
	err := s.run(ctx)
	if ctx.Err() != nil {
		return nil // the host ended the stream
	}
	return err
}

// run connects until the host cancels, the server completes the
// subscription or the reconnect policy gives up. A connection that was
// established and lost is a gap: events meanwhile are missed, and the
// subscription is made again (GraphQL subscriptions do not resume).
func (s *subStream) run(ctx context.Context) error {
	r := s.c.sub.reconnect
	r.Lost = func(ue *sdk.UpstreamError) error {
		return s.send.Gap("the subscription's connection was lost (" + ue.Message + "); subscribing again: events sent meanwhile were missed")
	}
	return r.Run(ctx, func(ctx context.Context) (established, progressed bool, err error) {
		if s.c.sub.transport == transportSSE {
			established, progressed, err = s.sseConnection(ctx)
		} else {
			established, progressed, err = s.wsConnection(ctx)
		}
		if errors.Is(err, errHostGone) {
			err = nil // the host stopped taking events: the stream ends
		}
		return established, progressed, err
	})
}

// fail is an upstream error of this subscription.
func (s *subStream) fail(kind sdk.ErrorKind, retryable bool, msg string) *sdk.UpstreamError {
	return &sdk.UpstreamError{Kind: kind, Upstream: s.upstream, Message: msg, Retryable: retryable}
}

// event handles one execution result of the subscription (a next message
// or an SSE next event): its data is an item; errors beside data make it
// a partial item that says which fields failed (nothing was missed);
// errors alone are a gap (the event is lost, the subscription goes on).
func (s *subStream) event(payload []byte) error {
	gr, ok := parseResponse(payload)
	if !ok {
		return s.fail(sdk.KindBadResponse, false, "a subscription event is not a GraphQL execution result (a JSON object with data or errors)")
	}
	var why string
	if len(gr.errors) > 0 {
		why = fmt.Sprintf("%s from the GraphQL server: %s", plural(len(gr.errors), "error"), summarizeErrors(gr.errors))
	}
	if gr.data == nil {
		if why != "" && s.send.Gap("an event was lost to "+why) != nil {
			return errHostGone
		}
		return nil
	}
	if s.send.Item(sdk.Item{Data: gr.data, Partial: why}) != nil {
		return errHostGone
	}
	return nil
}

// refused is the error of a subscription the server refused with GraphQL
// errors (a graphql-transport-ws error message, or an SSE answer that is
// a GraphQL response): not retryable, and Rejected. ended says events
// came first: the server ended a running subscription with errors (an
// error message mid-stream), which is not retried either but refuses
// nothing.
func (s *subStream) refused(rawErrors []byte, status int, ended bool) *sdk.UpstreamError {
	gr, ok := parseResponse(append(append([]byte(`{"errors":`), rawErrors...), '}'))
	if !ok || len(gr.errors) == 0 {
		gr = gqlResponse{errors: []gqlError{{Message: "no error message"}}, requestError: true}
	}
	_, ue := s.c.result(s.t, gr, status)
	ue.Upstream = s.upstream
	what := "refused the subscription with"
	if ended {
		what = "ended the subscription with"
	}
	ue.Rejected = !ended
	ue.Message = strings.Replace(ue.Message, "answered with", what, 1)
	return ue
}
