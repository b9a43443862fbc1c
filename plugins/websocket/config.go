package websocket

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	ws "github.com/coder/websocket"
	"github.com/theory/jsonpath"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// Defaults and bounds of the config.
const (
	defaultConnectTimeout  = 10 * time.Second
	defaultMaxMessageBytes = 1 << 20
	minMaxMessageBytes     = 64
	maxMaxMessageBytes     = 32 << 20
	defaultAckTimeout      = 5 * time.Second
	defaultPingInterval    = 15 * time.Second
	defaultPongTimeout     = 5 * time.Second
	defaultMaxAttempts     = 5
	maxMaxAttempts         = 100
	defaultInitialDelay    = 250 * time.Millisecond
	defaultMaxDelay        = 5 * time.Second
	defaultCloseTimeout    = 2 * time.Second
	maxMS                  = 600000
	maxTemplates           = 16
	maxFileBytes           = 1 << 20
)

// Binary frame handling.
const (
	binaryRefuse = "refuse"
	binaryBase64 = "base64"
	binaryText   = "text"
	binarySkip   = "skip"
)

var (
	knownFields = []string{"url", "subprotocols", "headers", "tls", "compression", "max_message_bytes",
		"subscribe", "unsubscribe", "ack", "filter", "id_path", "binary", "heartbeat", "reconnect", "close_timeout_ms"}
	knownTLSFields       = []string{"ca_file", "cert_file", "key_file", "server_name"}
	knownAckFields       = []string{"path", "equals", "timeout_ms"}
	knownHeartbeatFields = []string{"ping_interval_ms", "pong_timeout_ms", "message"}
	knownReconnectFields = []string{"max_attempts", "initial_delay_ms", "max_delay_ms"}
	compressionModes     = map[string]ws.CompressionMode{
		"disabled":            ws.CompressionDisabled,
		"no_context_takeover": ws.CompressionNoContextTakeover,
		"context_takeover":    ws.CompressionContextTakeover,
	}
	binaryModes = []string{binaryRefuse, binaryBase64, binaryText, binarySkip}
	// managedHeaders are the handshake headers the WebSocket client sets.
	managedHeaders = []string{"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions",
		"Sec-Websocket-Protocol", "Sec-Websocket-Accept"}
)

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
	maxAttempts  int
	initialDelay time.Duration
	maxDelay     time.Duration
	closeTimeout time.Duration
	// inputSchema is derived from the templates' variables.
	inputSchema json.RawMessage
}

// ackMatcher recognises the upstream's acknowledgement of the
// subscription: a message where path selects a value equal to equals (or
// any value when equals is unset).
type ackMatcher struct {
	path    *jsonpath.Path
	equals  *msgTemplate
	timeout time.Duration
}

// parseResult is the outcome of parsing one raw config.
type parseResult struct {
	cfg   *config // nil when diags holds an error
	diags []sdk.Diagnostic
	err   error // summary of the error diagnostics, for calls
}

// diags collects diagnostics.
type diags = sdk.Diagnostics

// fields is one config object being read: each getter reports a bad
// value as a diagnostic naming the field and returns the default.
type fields struct {
	prefix string
	m      map[string]json.RawMessage
	d      *diags
}

// readFields decodes raw as an object, reporting unknown fields (with a
// suggestion) under prefix.
func readFields(raw json.RawMessage, prefix, shape string, known []string, d *diags) (*fields, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			name = "config"
		}
		d.Errorf(strings.TrimSuffix(prefix, "."), "%s must be an object %s", name, shape)
		return nil, false
	}
	d.UnknownFields(m, known, prefix)
	return &fields{prefix: prefix, m: m, d: d}, true
}

// get returns a field's raw value; ok is false when it is absent or null.
func (f *fields) get(name string) (json.RawMessage, bool) {
	v, ok := f.m[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

func (f *fields) str(name string) string {
	v, ok := f.get(name)
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) != nil || strings.TrimSpace(s) == "" {
		f.d.Errorf(f.prefix+name, "must be a non-empty string")
		return ""
	}
	return strings.TrimSpace(s)
}

func (f *fields) integer(name string, def, lo, hi int) int {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	var n int
	if json.Unmarshal(v, &n) != nil || n < lo || n > hi {
		f.d.Errorf(f.prefix+name, "must be an integer from %d to %d", lo, hi)
		return def
	}
	return n
}

// ms reads a duration in milliseconds; lo 0 means 0 turns it off.
func (f *fields) ms(name string, def time.Duration, lo int) time.Duration {
	return time.Duration(f.integer(name, int(def/time.Millisecond), lo, maxMS)) * time.Millisecond
}

func (f *fields) enum(name, def string, allowed []string) string {
	v, ok := f.get(name)
	if !ok {
		return def
	}
	var s string
	if json.Unmarshal(v, &s) != nil || !slices.Contains(allowed, s) {
		f.d.Errorf(f.prefix+name, "must be one of %s", strings.Join(allowed, ", "))
		return def
	}
	return s
}

func (f *fields) path(name string) *jsonpath.Path {
	s := f.str(name)
	if s == "" {
		return nil
	}
	if !strings.HasPrefix(s, "$") {
		f.d.Errorf(f.prefix+name, "must be an RFC 9535 JSONPath starting with $, e.g. $.type")
		return nil
	}
	p, err := parsePath(s)
	if err != nil {
		f.d.Errorf(f.prefix+name, "not a valid RFC 9535 JSONPath: %v", err)
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
func (f *fields) messages(name string) []*msgTemplate {
	v, ok := f.get(name)
	if !ok {
		return nil
	}
	var list []json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '[' {
		list = []json.RawMessage{v}
	} else if json.Unmarshal(v, &list) != nil {
		f.d.Errorf(f.prefix+name, "must be a message or a list of messages")
		return nil
	}
	if len(list) > maxTemplates {
		f.d.Errorf(f.prefix+name, "at most %d messages", maxTemplates)
		return nil
	}
	var out []*msgTemplate
	for i, raw := range list {
		field := f.prefix + name
		if len(list) > 1 || bytes.TrimSpace(v)[0] == '[' {
			field = fmt.Sprintf("%s[%d]", field, i)
		}
		m, err := parseMsgTemplate(raw)
		if err != nil {
			f.d.Errorf(field, "%v", err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// cacheKey is the ConfigCache key of an operation: its base directory
// (relative TLS file paths resolve against it) and its raw config.
func cacheKey(op *sdk.Operation) []byte {
	return append([]byte(op.BaseDir+"\x00"), op.Config...)
}

// parseConfig parses and validates a cache key's config. It never echoes
// config values (they may be secrets) in diagnostics.
func parseConfig(key []byte) *parseResult {
	baseDir, raw, _ := bytes.Cut(key, []byte{0})
	d := &diags{}
	c := parseInto(raw, &sdk.Operation{BaseDir: string(baseDir)}, d)
	res := &parseResult{diags: d.List()}
	if !d.Failed() {
		res.cfg = c
		return res
	}
	res.err = errors.New(d.Summary("invalid websocket config"))
	return res
}

func parseInto(raw []byte, op *sdk.Operation, d *diags) *config {
	f, ok := readFields(raw, "", "{url, subscribe, ...}", knownFields, d)
	if !ok {
		return nil
	}
	c := &config{}
	uses := varUses{}
	if _, ok := f.get("url"); !ok {
		d.Errorf("url", "is required: the ws:// or wss:// URL of the upstream")
	} else if s := f.str("url"); s != "" {
		t, name, err := parseURLTemplate(s)
		if err != nil {
			d.Errorf("url", "%v", err)
		} else {
			c.url, c.upstream = t, name
			t.uses(uses)
		}
	}
	if v, ok := f.get("subprotocols"); ok {
		if json.Unmarshal(v, &c.subprotocols) != nil {
			d.Errorf("subprotocols", "must be a list of subprotocol names")
		}
		for i, p := range c.subprotocols {
			if !httpadapter.ValidHeaderName(p) {
				d.Errorf(fmt.Sprintf("subprotocols[%d]", i), "must be a token (letters, digits and !#$%%&'*+-.^_`|~)")
			}
		}
	}
	if v, ok := f.get("headers"); ok {
		h, host, hd := httpadapter.StaticHeaders(v, managedHeaders...)
		d.Add(hd...)
		c.headers, c.host = h, host
	}
	var tlsCfg *tls.Config
	if v, ok := f.get("tls"); ok {
		tlsCfg = parseTLS(v, op, d)
		if c.url != nil && strings.HasPrefix(c.url.prefix, "ws://") {
			d.Errorf("tls", "is only used with a wss:// url")
		}
	}
	c.client = newClient(tlsCfg)
	c.compression = compressionModes[f.enum("compression", "disabled", []string{"disabled", "no_context_takeover", "context_takeover"})]
	c.maxMessage = f.integer("max_message_bytes", defaultMaxMessageBytes, minMaxMessageBytes, maxMaxMessageBytes)
	c.subscribe = f.messages("subscribe")
	c.unsubscribe = f.messages("unsubscribe")
	for _, m := range append(append([]*msgTemplate(nil), c.subscribe...), c.unsubscribe...) {
		uses.addMsg(m)
	}
	if v, ok := f.get("ack"); ok {
		c.ack = parseAck(v, d, uses)
		if len(c.subscribe) == 0 {
			d.Errorf("ack", "needs subscribe: the acknowledgement answers the subscribe message")
		}
	}
	if s := f.str("filter"); s != "" {
		c.filter = parseFilter(s, d)
	}
	c.idPath = f.path("id_path")
	c.binary = f.enum("binary", binaryRefuse, binaryModes)
	c.pingInterval, c.pongTimeout = defaultPingInterval, defaultPongTimeout
	if v, ok := f.get("heartbeat"); ok {
		if hf, ok := readFields(v, "heartbeat.", "{ping_interval_ms, pong_timeout_ms, message}", knownHeartbeatFields, d); ok {
			c.pingInterval = hf.ms("ping_interval_ms", defaultPingInterval, 0)
			c.pongTimeout = hf.ms("pong_timeout_ms", defaultPongTimeout, 1)
			if ms := hf.messages("message"); len(ms) > 1 {
				d.Errorf("heartbeat.message", "must be one message")
			} else if len(ms) == 1 {
				c.heartbeat = ms[0]
				uses.addMsg(c.heartbeat)
				if c.pingInterval == 0 {
					d.Errorf("heartbeat.ping_interval_ms", "must be above 0 with heartbeat.message: it is how often the message is sent")
				}
			}
		}
	}
	c.maxAttempts, c.initialDelay, c.maxDelay = defaultMaxAttempts, defaultInitialDelay, defaultMaxDelay
	if v, ok := f.get("reconnect"); ok {
		if rf, ok := readFields(v, "reconnect.", "{max_attempts, initial_delay_ms, max_delay_ms}", knownReconnectFields, d); ok {
			c.maxAttempts = rf.integer("max_attempts", defaultMaxAttempts, 0, maxMaxAttempts)
			c.initialDelay = rf.ms("initial_delay_ms", defaultInitialDelay, 1)
			c.maxDelay = rf.ms("max_delay_ms", defaultMaxDelay, 1)
			if c.maxDelay < c.initialDelay {
				d.Errorf("reconnect.max_delay_ms", "must not be below reconnect.initial_delay_ms")
			}
		}
	}
	c.closeTimeout = f.ms("close_timeout_ms", defaultCloseTimeout, 1)
	c.inputSchema = uses.inputSchema()
	return c
}

func parseAck(v json.RawMessage, d *diags, uses varUses) *ackMatcher {
	af, ok := readFields(v, "ack.", "{path, equals, timeout_ms}", knownAckFields, d)
	if !ok {
		return nil
	}
	a := &ackMatcher{timeout: af.ms("timeout_ms", defaultAckTimeout, 1)}
	if _, ok := af.get("path"); !ok {
		d.Errorf("ack.path", "is required: the JSONPath of the acknowledgement's value, e.g. $.type")
	}
	a.path = af.path("path")
	if ev, ok := af.get("equals"); ok {
		m, err := parseMsgTemplate(ev)
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

// parseTLS reads the tls block; relative file paths resolve against the
// operations file's directory.
func parseTLS(v json.RawMessage, op *sdk.Operation, d *diags) *tls.Config {
	tf, ok := readFields(v, "tls.", "{ca_file, cert_file, key_file, server_name}", knownTLSFields, d)
	if !ok {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: tf.str("server_name")}
	if ca := tf.str("ca_file"); ca != "" {
		pem, err := readSmallFile(op.ResolvePath(ca))
		if err != nil {
			d.Errorf("tls.ca_file", "cannot read %s: %v", ca, err)
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				d.Errorf("tls.ca_file", "%s holds no PEM certificate", ca)
			}
			cfg.RootCAs = pool
		}
	}
	certFile, keyFile := tf.str("cert_file"), tf.str("key_file")
	if (certFile == "") != (keyFile == "") {
		d.Errorf("tls.cert_file", "cert_file and key_file go together (a client certificate and its private key)")
		return cfg
	}
	if certFile != "" {
		certPEM, err1 := readSmallFile(op.ResolvePath(certFile))
		keyPEM, err2 := readSmallFile(op.ResolvePath(keyFile))
		switch {
		case err1 != nil:
			d.Errorf("tls.cert_file", "cannot read %s: %v", certFile, err1)
		case err2 != nil:
			d.Errorf("tls.key_file", "cannot read %s: %v", keyFile, err2)
		default:
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				// The error text never includes key material.
				d.Errorf("tls.cert_file", "not a usable client certificate and key: %s", strings.TrimPrefix(err.Error(), "tls: "))
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	return cfg
}

func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d KiB", maxFileBytes>>10)
	}
	return b, nil
}

// newClient is the HTTP client of one config's handshakes: HTTP/1.1 (a
// WebSocket upgrade), the config's TLS, and no redirects (a redirect must
// not carry the configured headers to another place).
func newClient(tlsCfg *tls.Config) *http.Client {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: defaultConnectTimeout,
		// Each connection is hijacked by its WebSocket; none is reused.
		MaxIdleConns:      1,
		DisableKeepAlives: false,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
