package websocket

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ws "github.com/coder/websocket"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
	"github.com/theory/jsonpath"
)

// Bounds the config's fields do not state (theirs are their tags).
const (
	defaultConnectTimeout = 10 * time.Second
	maxTemplates          = 16
)

// Binary frame handling.
const (
	binaryRefuse = "refuse"
	binaryBase64 = "base64"
	binaryText   = "text"
	binarySkip   = "skip"
)

var (
	compressionModes = map[string]ws.CompressionMode{
		"disabled":            ws.CompressionDisabled,
		"no_context_takeover": ws.CompressionNoContextTakeover,
		"context_takeover":    ws.CompressionContextTakeover,
	}
	// managedHeaders are the handshake headers the WebSocket client sets.
	managedHeaders = []string{"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions",
		"Sec-Websocket-Protocol", "Sec-Websocket-Accept"}
)

// configFields is an operation's websocket config as written. Decoding,
// unknown fields and the published schema come from it (sdk.Config);
// prepare checks the values.
type configFields struct {
	URL             string          `reach:"upstream" json:"url" jsonschema:"ws:// or wss:// URL; {{name}} in the path and query is filled from the tool argument of that name. The host is literal."`
	Subprotocols    []string        `json:"subprotocols,omitempty" jsonschema:"Subprotocols offered in the handshake; the upstream must pick one."`
	Headers         json.RawMessage `json:"headers,omitempty" jsonschema:"Static handshake headers (secrets via placeholders)."`
	TLS             *sdk.ClientTLS  `json:"tls,omitempty" jsonschema:"TLS settings of a wss:// url; without ca_file the system roots verify the upstream."`
	Compression     string          `json:"compression,omitempty" enum:"disabled,no_context_takeover,context_takeover" default:"disabled" jsonschema:"permessage-deflate offered to the upstream; it decides."`
	MaxMessageBytes int             `json:"max_message_bytes,omitempty" default:"1048576" minimum:"64" maximum:"33554432" jsonschema:"Largest message read; a larger one is skipped and reported as a gap."`
	Subscribe       json.RawMessage `json:"subscribe,omitempty" jsonschema:"Sent after every connect: one message, or a list of messages sent in order."`
	Unsubscribe     json.RawMessage `json:"unsubscribe,omitempty" jsonschema:"Sent before a normal close: one message, or a list of messages sent in order."`
	Ack             *ackFields      `json:"ack,omitempty" jsonschema:"The upstream's acknowledgement of the subscription."`
	Filter          string          `json:"filter,omitempty" jsonschema:"RFC 9535 filter expression on the message as @; messages it rejects are not items."`
	IDPath          string          `json:"id_path,omitempty" jsonschema:"JSONPath of an item's id, also the stream's cursor ({{cursor}})."`
	Binary          string          `json:"binary,omitempty" enum:"refuse,base64,text,skip" default:"refuse" jsonschema:"What a binary message becomes: refused (the stream fails), base64, text, or skipped."`
	Heartbeat       heartbeatFields `json:"heartbeat,omitzero" jsonschema:"How a dead connection is detected: protocol pings, or an application message."`
	Reconnect       reconnectFields `json:"reconnect,omitzero" jsonschema:"How a dropped connection is reopened."`
	CloseTimeoutMS  int             `json:"close_timeout_ms,omitempty" default:"2000" minimum:"1" maximum:"600000" jsonschema:"How long a normal close waits for the upstream's answer."`
}

// ackFields is the ack block as written.
type ackFields struct {
	Path      string          `json:"path" jsonschema:"JSONPath of the acknowledgement's value."`
	Equals    json.RawMessage `json:"equals,omitempty" jsonschema:"The value the acknowledgement holds (a message template); default: any value."`
	TimeoutMS int             `json:"timeout_ms,omitempty" default:"5000" minimum:"1" maximum:"600000" jsonschema:"How long the first connection waits for the acknowledgement."`
}

// heartbeatFields is the heartbeat block as written.
type heartbeatFields struct {
	PingIntervalMS int             `json:"ping_interval_ms,omitempty" default:"15000" minimum:"0" maximum:"600000" jsonschema:"How often a ping (or message) is sent; 0 turns heartbeats off."`
	PongTimeoutMS  int             `json:"pong_timeout_ms,omitempty" default:"5000" minimum:"1" maximum:"600000" jsonschema:"How long the answer may take."`
	Message        json.RawMessage `json:"message,omitempty" jsonschema:"An application message sent instead of protocol pings; any message answers it."`
}

// reconnectFields is the reconnect block as written.
type reconnectFields struct {
	MaxAttempts    int `json:"max_attempts,omitempty" default:"5" minimum:"0" maximum:"100" jsonschema:"Consecutive failed reopenings before the stream fails."`
	InitialDelayMS int `json:"initial_delay_ms,omitempty" default:"250" minimum:"1" maximum:"600000" jsonschema:"The first backoff delay, doubling up to max_delay_ms."`
	MaxDelayMS     int `json:"max_delay_ms,omitempty" default:"5000" minimum:"1" maximum:"600000" jsonschema:"The longest backoff delay."`
}

// Schemas of the fields whose Go type cannot say it all.
const (
	messageSchema  = `{"description": "A JSON value sent as JSON text, or a string sent as plain text; strings may hold {{argument}} variables and {{cursor}}. A value that would bring a control character (C0, DEL, C1, U+2028, U+2029) into a plain-text message is refused; JSON escapes them."}`
	messagesSchema = `{"anyOf": [{"description": "One message: a JSON value sent as JSON text, or a string sent as plain text; strings may hold {{argument}} variables and {{cursor}}. A value that would bring a control character (C0, DEL, C1, U+2028, U+2029) into a plain-text message is refused; JSON escapes them."}, {"type": "array"}]}`
)

// configKeywords state what the Go types of configFields cannot.
var configKeywords = map[string]string{
	"headers":           `{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}`,
	"subscribe":         messagesSchema,
	"unsubscribe":       messagesSchema,
	"ack.equals":        messageSchema,
	"heartbeat.message": messageSchema,
}

// newConfigs returns the config declaration of one adapter, with its cache
// of prepared configs.
func newConfigs() *sdk.Config[configFields, *config] {
	return &sdk.Config[configFields, *config]{Name: Name, Prepare: prepare, Keywords: configKeywords}
}

// config is a parsed, validated operation config. It is immutable and
// shared by all calls of the operation.
type config struct {
	url *urlTemplate
	// upstream names the upstream in errors: scheme, host and the path
	// template; never userinfo or the query string.
	upstream     string
	subprotocols []string
	headers      http.Header
	host         string
	client       *http.Client
	compression  ws.CompressionMode
	maxMessage   int
	subscribe    []*msgTemplate
	unsubscribe  []*msgTemplate
	ack          *ackMatcher
	filter       *jsonpath.Path
	idPath       *jsonpath.Path
	binary       string
	pingInterval time.Duration
	pongTimeout  time.Duration
	heartbeat    *msgTemplate // an application heartbeat instead of pings
	// reconnect is the policy of a lost connection.
	reconnect    sdk.Reconnect
	closeTimeout time.Duration
	// inputSchema is derived from the templates' variables.
	inputSchema json.RawMessage
	// resumes: items carry ids (id_path) that the subscription sends
	// back as {{cursor}}, so a window's cursor continues the stream.
	resumes bool
}

// ackMatcher recognises the upstream's acknowledgement of the
// subscription: a message where path selects a value equal to equals (or
// any value when equals is unset).
type ackMatcher struct {
	path    *jsonpath.Path
	equals  *msgTemplate
	timeout time.Duration
}

// diags collects diagnostics.
type diags = sdk.Diagnostics

// prepare checks a decoded config; relative TLS file paths resolve against
// op's BaseDir. It never echoes config values (they may be secrets) in
// diagnostics.
func prepare(op *sdk.Operation, f *configFields, d *diags) *config {
	c := &config{}
	uses := varUses{}
	if f.URL == "" {
		d.Errorf("url", "is required: the ws:// or wss:// URL of the upstream")
	} else {
		t, name, err := parseURLTemplate(strings.TrimSpace(f.URL))
		if err != nil {
			d.Errorf("url", "%v", err)
		} else {
			c.url, c.upstream = t, name
			t.uses(uses)
		}
	}
	c.subprotocols = f.Subprotocols
	for i, p := range c.subprotocols {
		if !httpadapter.ValidHeaderName(p) {
			d.Errorf(fmt.Sprintf("subprotocols[%d]", i), "must be a token (letters, digits and !#$%%&'*+-.^_`|~)")
		}
	}
	if f.Headers != nil {
		h, host, hd := httpadapter.StaticHeaders(f.Headers, managedHeaders...)
		d.Add(hd...)
		c.headers, c.host = h, host
	}
	var tlsCfg *tls.Config
	if f.TLS != nil {
		tlsCfg, _ = f.TLS.Load(op, "tls", d)
		if c.url != nil && strings.HasPrefix(c.url.prefix, "ws://") {
			d.Errorf("tls", "is only used with a wss:// url")
		}
	}
	// Redirects within the URL's origin only: a redirect must not carry
	// the configured headers to another place. Every connection, each
	// reconnect's too, is held to the entry's egress rules. Each
	// connection is hijacked by its WebSocket.
	c.client = httpadapter.NewClient(httpadapter.ClientOptions{TLS: tlsCfg, Egress: op.Egress})
	c.compression = compressionModes[f.Compression]
	c.maxMessage = f.MaxMessageBytes
	c.subscribe = messages(d, "subscribe", f.Subscribe)
	c.unsubscribe = messages(d, "unsubscribe", f.Unsubscribe)
	for _, m := range append(append([]*msgTemplate(nil), c.subscribe...), c.unsubscribe...) {
		uses.addMsg(m)
	}
	if f.Ack != nil {
		c.ack = parseAck(f.Ack, d, uses)
		if len(c.subscribe) == 0 {
			d.Errorf("ack", "needs subscribe: the acknowledgement answers the subscribe message")
		}
	}
	if s := strings.TrimSpace(f.Filter); s != "" {
		c.filter = parseFilter(s, d)
	}
	c.idPath = jsonPath(d, "id_path", f.IDPath)
	c.binary = f.Binary
	hf := &f.Heartbeat
	c.pingInterval, c.pongTimeout = millis(hf.PingIntervalMS), millis(hf.PongTimeoutMS)
	if ms := messages(d, "heartbeat.message", hf.Message); len(ms) > 1 {
		d.Errorf("heartbeat.message", "must be one message")
	} else if len(ms) == 1 {
		c.heartbeat = ms[0]
		uses.addMsg(c.heartbeat)
		if c.pingInterval == 0 {
			d.Errorf("heartbeat.ping_interval_ms", "must be above 0 with heartbeat.message: it is how often the message is sent")
		}
	}
	rf := &f.Reconnect
	c.reconnect = sdk.Reconnect{MaxAttempts: rf.MaxAttempts, Field: "reconnect.max_attempts",
		Backoff: sdk.Backoff{Initial: millis(rf.InitialDelayMS), Max: millis(rf.MaxDelayMS)}}
	if rf.MaxDelayMS < rf.InitialDelayMS {
		d.Errorf("reconnect.max_delay_ms", "must not be below reconnect.initial_delay_ms")
	}
	c.closeTimeout = millis(f.CloseTimeoutMS)
	c.inputSchema = uses.inputSchema()
	c.resumes = c.idPath != nil && usesCursor(c.url, c.subscribe)
	if d.Failed() {
		return nil
	}
	return c
}

// millis is a duration written in milliseconds.
func millis(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// jsonPath compiles a JSONPath field, nil when it is absent.
func jsonPath(d *diags, field, s string) *jsonpath.Path {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	if !strings.HasPrefix(s, "$") {
		d.Errorf(field, "must be an RFC 9535 JSONPath starting with $, e.g. $.type")
		return nil
	}
	p, err := parsePath(s)
	if err != nil {
		d.Errorf(field, "not a valid RFC 9535 JSONPath: %v", err)
	}
	return p
}

// parsePath parses a JSONPath, turning a parser panic into an error.
func parsePath(s string) (p *jsonpath.Path, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, errors.New("cannot parse it")
		}
	}()
	p, err = jsonpath.Parse(s)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "jsonpath: "))
	}
	return p, nil
}

// messages reads a list of message templates (a single non-list value is
// one message).
func messages(d *diags, name string, v json.RawMessage) []*msgTemplate {
	if v == nil {
		return nil
	}
	var list []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' {
		list = []json.RawMessage{v}
	} else if json.Unmarshal(v, &list) != nil {
		d.Errorf(name, "must be a message or a list of messages")
		return nil
	}
	if len(list) > maxTemplates {
		d.Errorf(name, "at most %d messages", maxTemplates)
		return nil
	}
	var out []*msgTemplate
	for i, raw := range list {
		field := name
		if len(list) > 1 || bytes.TrimSpace(v)[0] == '[' {
			field = fmt.Sprintf("%s[%d]", field, i)
		}
		m, err := parseMsgTemplate(raw)
		if err != nil {
			d.Errorf(field, "%v", err)
			continue
		}
		m.field = field
		out = append(out, m)
	}
	return out
}

func parseAck(af *ackFields, d *diags, uses varUses) *ackMatcher {
	a := &ackMatcher{timeout: millis(af.TimeoutMS)}
	if strings.TrimSpace(af.Path) == "" {
		d.Errorf("ack.path", "is required: the JSONPath of the acknowledgement's value, e.g. $.type")
	}
	a.path = jsonPath(d, "ack.path", af.Path)
	if af.Equals != nil {
		m, err := parseMsgTemplate(af.Equals)
		if err != nil {
			d.Errorf("ack.equals", "%v", err)
		}
		a.equals = m
		uses.addMsg(m)
	}
	return a
}

// parseFilter compiles a filter expression: RFC 9535 filter syntax on the
// message as @, e.g. "@.type == 'alert' && @.level != 'debug'".
func parseFilter(s string, d *diags) *jsonpath.Path {
	if strings.HasPrefix(s, "$") {
		d.Errorf("filter", "must be a filter expression on the message as @ (e.g. @.type == 'alert'), not a $ query")
		return nil
	}
	p, err := parsePath("$[?" + s + "]")
	if err != nil {
		d.Errorf("filter", "not a valid RFC 9535 filter expression: %v", err)
		return nil
	}
	return p
}
