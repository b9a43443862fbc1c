// Package websocket is Crank's WebSocket adapter (adapter name
// "websocket"): it connects to an upstream WebSocket feed, subscribes with
// messages built from the tool arguments and streams the feed's messages
// to the host as items. It is a stream source only (no unary calls): the
// host's window mode collects a bounded window from it, and session and
// async_job operations read the same Stream. It runs as an adapter plugin
// (see cmd/crank-adapter-websocket, or `crank crank-adapter websocket`)
// and is built on the adapter SDK and github.com/coder/websocket.
// WebSocket is an upstream only, never a downstream MCP transport.
//
// # Config
//
// An operation's adapter config is a JSON object (written as YAML in
// operations files). Placeholders such as {env.FEED_TOKEN} are expanded by
// the host before the adapter sees the config; the adapter never logs the
// config nor quotes its values in diagnostics, errors or results.
//
//	url: "wss://feed.example.com/v1/{{region}}?depth={{depth}}"   # required
//	subprotocols: [feed.v1]           # offered; the upstream must pick one
//	headers: {Authorization: "Bearer {env.FEED_TOKEN}"}   # handshake headers
//	tls: {ca_file: ca.pem, cert_file: c.pem, key_file: c.key, server_name: feed.internal}
//	compression: disabled             # disabled | no_context_takeover | context_takeover
//	max_message_bytes: 1048576        # default 1 MiB; larger messages are skipped (a gap)
//	subscribe: {op: subscribe, channel: "{{channel}}"}    # or a list of messages
//	unsubscribe: {op: unsubscribe, channel: "{{channel}}"}
//	ack: {path: $.type, equals: subscribed, timeout_ms: 5000}
//	filter: "@.type == 'alert'"       # which messages are items
//	id_path: $.seq                    # an item's id, and the stream's cursor
//	binary: refuse                    # refuse | base64 | text | skip
//	heartbeat: {ping_interval_ms: 15000, pong_timeout_ms: 5000}   # or message: {op: ping}
//	reconnect: {max_attempts: 5, initial_delay_ms: 250, max_delay_ms: 5000}
//	close_timeout_ms: 2000
//
// Fields, in detail:
//
//   - url: a ws:// or wss:// URL. {{name}} in the path is filled from the
//     tool argument of that name (a string, number or boolean, escaped as
//     one path segment; absent or empty is an error naming the argument),
//     {{name}} in the query is escaped as a query value. The scheme and
//     host are literal: an argument never chooses where the adapter
//     connects. Errors name the upstream by its scheme and host alone.
//   - subprotocols, headers: sent in the handshake. Headers may be
//     strings, numbers or booleans; Host sets the handshake's Host; the
//     Sec-WebSocket-* and hop-by-hop headers are refused. Redirects are not
//     followed (they would carry the headers elsewhere). The handshake
//     also carries the call's W3C trace context (traceparent, tracestate)
//     and is recorded as a client span when the host traces the call.
//   - tls: for wss://; relative files resolve against the operations
//     file's directory; without ca_file the system roots verify.
//   - compression: permessage-deflate offered in the handshake; the
//     upstream's answer decides whether it is used.
//   - subscribe, unsubscribe: messages sent after every connect (and so
//     after every reconnect) and, when the host stops the stream (a window
//     limit, a session stop), before a normal close (status 1000) that
//     waits at most close_timeout_ms. A message is a JSON value sent as
//     JSON text, or a string sent as plain text. Inside, a string that is
//     exactly "{{name}}" becomes the argument's JSON value (any type; null
//     when absent); other strings have {{name}} replaced by the argument's
//     text. {{cursor}} is the stream's cursor: the id of the last item
//     (id_path), or the cursor the window was called with, so a feed that
//     can resume is asked to; with id_path and {{cursor}} in the url or a
//     subscribe message the tool resumes its stream (sdk.Tool's
//     ResumesStream), and only then does a window take and return a
//     cursor. Object keys are literal. A list of messages
//     is sent in order; a message that is itself a JSON list is written
//     inside a list. In a JSON message every value is JSON-escaped. In a
//     plain-text message a value is inserted as it is, so a value holding
//     a control character is refused: a C0 control (line feed, carriage
//     return, NUL, tab, …), DEL, a C1 control (U+0080–U+009F) or the
//     line and paragraph separators U+2028 and U+2029, the characters
//     text protocols end a line, a header or a frame with (a STOMP frame
//     ends at NUL: a topic "x\n\n\u0000SUBSCRIBE…" would send a second
//     frame). An argument or the cursor the host passed fails the stream
//     before it connects (invalid argument, naming the argument or
//     {{cursor}} and the message); an item id (id_path) that would become
//     such a cursor fails it before it resubscribes (bad response). There
//     is no opt-out: line breaks a protocol needs belong in the template
//     itself, never in a value; send a JSON message to pass text with
//     line breaks. The cursor a window is called with is one the host
//     sealed and took back (an item id this adapter sent), never text a
//     client chose; it is checked all the same.
//   - ack: the upstream's acknowledgement of the subscription: the first
//     message where path selects a value equal to equals (a template like
//     the messages; numbers compare by value; without equals any value
//     matches). It is not an item. No ack within timeout_ms fails the
//     first connection (kind timeout) and counts as a failed attempt on a
//     reconnect. Messages before the ack are items as usual.
//   - filter: an RFC 9535 filter expression on the message as @, e.g.
//     "@.type == 'alert' && @.severity != 'info'": only messages it holds
//     for are items (control messages such as heartbeat answers are left
//     out). A text message that is not JSON is a JSON string.
//   - Extraction (items_path) is the host's: each item the adapter sends
//     is one document, and the operation's aggregation.items_path splits
//     it (after redaction) exactly as for every other stream source.
//   - id_path: JSONPath of an item's id (a scalar); it becomes the item's
//     id and cursor, so a window's result cursor and {{cursor}} follow it.
//   - binary: binary messages are refused (the stream fails, naming this
//     field), sent as a base64 JSON string, read as UTF-8 text like a text
//     message (invalid UTF-8 is skipped as a gap), or skipped silently.
//   - heartbeat: a dead connection is detected within ping_interval_ms +
//     pong_timeout_ms. Protocol pings by default: a reader goroutine reads
//     the connection all the time, so pongs are read while the stream
//     waits for messages (coder/websocket's Ping needs that concurrent
//     reader). With message, that application message is sent every
//     ping_interval_ms instead, and some message (any) must arrive within
//     pong_timeout_ms of it. ping_interval_ms 0 turns heartbeats off.
//   - reconnect: a connection that drops (an abnormal close, a close
//     status other than 1000, a broken read, a lost heartbeat) is reopened
//     after an exponential backoff from initial_delay_ms doubling up to
//     max_delay_ms, half of each delay random (jitter), and subscribed
//     again. Each loss is a gap event, so the window or session result says
//     that messages may have been missed, never silently. After
//     max_attempts consecutive failed attempts (0: never reconnect) the
//     stream fails. The first connection is not retried: a wrong URL or a
//     refused handshake fails at once (a handshake answered with a 4xx but
//     408 and 429 is Rejected). A normal close (1000) by the
//     upstream ends the stream (end_reason upstream_end).
//
// The connect timeout is the operation's upstream timeout (the host's
// upstream_timeout_ms for windows), 10s when unset; within it, the TCP
// connect and the TLS handshake take at most 10s each (the HTTP adapters'
// client, httpadapter.NewClient).
//
// A panic in the reader or heartbeat goroutine (a bug in handling a
// message) ends that stream with an internal error and is not retried;
// it does not end the adapter process and its other streams.
//
// # Input schema
//
// The tool's input schema is derived from the config: every {{variable}}
// of the url and the messages (but {{cursor}}) is a required argument; a
// variable used inside text takes a string, number or boolean, one used as
// a whole JSON value takes any value; other arguments are refused. An
// input_schema written in the operations file replaces it.
package websocket
