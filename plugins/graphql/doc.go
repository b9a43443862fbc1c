// Package graphql is Crank's GraphQL adapter: it turns the queries,
// mutations and subscriptions of a GraphQL API into typed MCP tools. It
// runs as an adapter plugin (the built-in "graphql", or
// cmd/crank-adapter-graphql) and is built on the adapter SDK,
// vektah/gqlparser, coder/websocket (graphql-transport-ws) and
// tmaxmax/go-sse (GraphQL over SSE).
//
// # Tools
//
// One operations-file entry stands for one or more tools. At load the
// adapter (ExpandOperation) gets the schema — by introspecting the
// endpoint, or from an SDL file — parses the entry's GraphQL document and
// validates it against the schema, and derives one tool per operation:
//
//   - the curated way (as Apollo's MCP server): the operator writes named
//     queries and mutations in a .graphql document, one tool each. The tool
//     is named like the operation (after tool_prefix); its description is
//     the operation's """description""" or the comment lines right above
//     it, otherwise a summary of the root fields it selects. A document
//     with a single operation (and no generate) is the entry itself: the
//     tool has the entry's name, and the entry's description, if written,
//     wins.
//   - generated: generate makes a query tool of each chosen top-level
//     Query field, every argument a variable, the result selected
//     max_depth levels deep (scalar and enum fields always; object fields
//     while the depth allows; fields that need arguments and deprecated
//     fields left out; at most 200 fields a tool; a union's members'
//     fields that share a name but not a type — String and String!, a
//     list and not — selected under an alias, <field>_<Member>, after the
//     first, so the query validates). Named tool_prefix + field name,
//     described by the field's description.
//
// A subscription is a stream source (see Subscriptions below): in a unary
// entry it becomes a window tool (Tool.Mode window, the host's default
// window limits; a host that does not read a tool's mode refuses it at
// load); an entry of mode window, session or async_job (with
// transport_behavior server_stream) serves only subscriptions, in its
// own mode and with its own limits, and names a query, a mutation or
// generate in it as an error (pick the subscriptions with operations).
//
// Each tool gets:
//
//   - an input schema (JSON Schema 2020-12) from the operation's variable
//     definitions: Int is a 32-bit integer (minimum/maximum), Float a
//     number, String a string, Boolean a boolean, ID a string, an enum a
//     string enum, an input object an object with additionalProperties
//     false (recursive input types through $defs and $ref), a list an
//     array; a non-null variable without a default is required, a nullable
//     one also accepts null; a default value is the schema's default; a
//     custom scalar accepts any JSON value and is described by the
//     scalar's description. Variable descriptions come from a
//     """description""" or a comment line above the variable.
//   - an output schema of the structured result (below), with data shaped
//     by the selection set.
//   - annotations: a query or subscription is read-only (and
//     idempotent); a mutation is not read-only, possibly destructive and
//     not idempotent, so that clients can ask the user first.
//   - a subscription has no output schema but an item schema
//     (Tool.ItemSchema): one item is the data of one event, shaped by the
//     selection set (the host widens it to what its window aggregation
//     makes of items).
//   - a self-contained config: the connection fields of the entry plus
//     "tool" — the operation and the fragments it uses, its variables and
//     the enum, input and scalar types they refer to. A call needs neither
//     the schema nor the document, so an adapter restart costs nothing.
//
// The schema is introspected (or the SDL file read) at every load: a
// config reload (caddy reload --force) refreshes it. An endpoint that does
// not answer introspection within the operation's timeout fails the load
// with a message naming it; a server with introspection disabled needs
// schema. A field an SDL file defines twice in one type the same way
// (type, arguments, directives: GitHub's published schema does) is merged
// into one with a warning; two different definitions are an error.
//
// # Config
//
// An entry's adapter config is a JSON object (written as YAML in
// operations files). Placeholders such as {env.API_TOKEN} are expanded by
// the host before the adapter sees the config (in an inline query too); the
// adapter never logs the config nor quotes its values in diagnostics,
// errors or results. Relative paths are relative to the operations file.
//
//	endpoint: https://api.example.com/graphql   # required, absolute http or https
//	schema: schema.graphqls          # SDL file; default: introspect the endpoint
//	document: operations.graphql     # named queries and mutations, one tool each
//	query: "query Me { me { id } }"  # or an inline document instead of document
//	operations: [GetUser, AddUser]   # serve only these operations of the document
//	tool_prefix: users_              # prefix of the derived tool names
//	generate:                        # query tools of top-level Query fields
//	  query_fields: true             # or a list: [user, users]
//	  max_depth: 2                   # 1-5, default 2
//	headers: {Authorization: "Bearer {env.API_TOKEN}"}
//	timeout: 10s                     # Go duration; default 30s
//	max_response_bytes: 8388608      # default 8 MiB
//	include_extensions: false        # keep the answer's extensions in results
//	subscriptions:                   # how subscription operations are read
//	  transport: websocket           # websocket | sse (GraphQL over SSE)
//	  protocol: graphql-transport-ws # websocket: or subscriptions-transport-ws (legacy)
//	  url: wss://api.example.com/graphql   # default: endpoint (ws:// or wss:// for websocket)
//	  connection_init: {token: "{env.API_TOKEN}"}   # ConnectionInit payload (websocket)
//	  ack_timeout: 10s               # ConnectionAck within
//	  ping_interval: 15s             # a Ping this often...
//	  pong_timeout: 5s               # ...answered by a Pong within
//	  max_message_bytes: 1048576     # a larger message or event is skipped (a gap)
//	  reconnect: {max_attempts: 5, initial_delay: 250ms, max_delay: 5s}
//
// At least one of document, query or generate is required; document and
// query exclude each other. Header values are strings, numbers or booleans;
// Host sets the request's Host; Content-Type, Content-Length and hop-by-hop
// headers are refused; a configured Accept or User-Agent replaces the
// adapter's (Accept: application/graphql-response+json,
// application/json;q=0.9, User-Agent: crank-graphql/VERSION). The host's
// operation timeout wins over timeout; the host's gRPC deadline bounds
// every call too. Unknown fields are errors (with a suggestion for a
// misspelt one), reported all at once with the field's name, e.g.
// "headers.X-Key", "operations[1]", "generate.max_depth". Errors in the
// document or the schema are reported on document, query or schema with
// their line and column. "tool" is written by ExpandOperation; an entry
// that sets it is refused.
//
// # Calls
//
// Invoke checks the tool arguments against the operation's variables and
// applies GraphQL input coercion before anything is sent: an unknown
// argument, a missing required variable, a null for a non-null type, a
// value of the wrong type, an Int outside 32 bits, an unknown enum value or
// input field, a @oneOf input without exactly one field are
// KindInvalidArgument errors naming the variable and the path inside it
// ("$filter.and[0].genre: ..."). A single value where a list is expected
// becomes a list of one, an integral number is accepted for Int and any
// number for Float, an integer for an ID is sent as a string. Absent
// nullable variables are left out, so the server applies its defaults.
//
// The request is a POST of {"query","operationName","variables"} as JSON
// with the configured headers and the call's W3C trace context
// (traceparent, tracestate; httpadapter.TraceTransport records the request
// as a client span when the host traces the call) unless the headers set
// it. Redirects are not
// followed (a POST with credentials is never resent elsewhere).
//
// # Results
//
// The structured result is shaped like a GraphQL response:
//
//   - data without errors: {"data": ...} (plus "extensions" when
//     include_extensions is set). Text stays empty; the host renders the
//     JSON.
//   - data with errors (a partial result): {"data": ..., "errors": [...],
//     "partial": true}, and a text that starts with "PARTIAL RESULT: the
//     GraphQL server returned data together with N errors: message (at
//     path); ..." followed by the JSON, so that a model reading only the
//     text knows the data is incomplete.
//   - errors without data: an error (isError), below.
//
// # Errors
//
// Failures are *sdk.UpstreamError. Upstream names the call as the
// operation and the endpoint's scheme and host, never its path, query
// string or userinfo, e.g. "query GetUser at https://api.example.com".
//
//   - GraphQL errors (errors and no data, whatever the HTTP status, as
//     GraphQL over HTTP answers a request error with 4xx and a GraphQL
//     body): KindUpstreamStatus, Status the first error's
//     extensions.code (e.g. UNAUTHENTICATED) or GRAPHQL_ERROR, Message
//     "the GraphQL server answered with N errors: message (at path)
//     [CODE]; ..." (at most 10, each bounded), Detail {"errors": [...],
//     "http_status": N}. Not retryable; Rejected for a request error (no
//     data entry: the document or variables refused) or an HTTP 4xx but
//     408 and 429.
//   - HTTP failures (a non-2xx answer that is not a GraphQL response):
//     KindUpstreamStatus, Status the HTTP code ("503"), Message "the GraphQL
//     endpoint answered HTTP 503 Service Unavailable", Body the first 2 KiB
//     of the answer, Detail {"status_code","content_type","retry_after"}.
//     Retryable for 429, 502, 503 and 504; Rejected for the other 4xx but
//     408.
//   - KindBadResponse: a 2xx answer that is not a GraphQL response (not a
//     JSON object with data or errors; the message names its Content-Type),
//     or one larger than max_response_bytes.
//   - KindTransport: the endpoint could not be reached or the connection
//     broke (connection refused, DNS, TLS, reset...). Retryable when the
//     request cannot have reached the server, or for queries when it may
//     have; never for a mutation that may have been applied.
//   - KindTimeout: the call's timeout or the host's deadline expired.
//   - KindCancelled: the host cancelled the call.
//   - KindInvalidArgument: arguments that do not fit the variables (above),
//     or an invalid config.
//
// # Subscriptions
//
// A subscription tool's Stream makes one subscription and sends the data
// of each event as an item until the host stops it (a window's duration,
// max_items or max_bytes, a session's stop, idle or lifetime limit, a
// job's cancel), the server completes it (end_reason upstream_end), or
// its connection is lost for good. It is never an endless pipe: the
// host's window, session or job bounds every subscription, and the
// adapter holds at most one message (max_message_bytes) per stream.
//
//   - websocket: the GraphQL over WebSocket protocol (graphql-ws,
//     subprotocol graphql-transport-ws). The handshake carries headers and
//     the call's trace context; ConnectionInit carries connection_init
//     (placeholders expanded by the host; never logged) and must be
//     acknowledged within ack_timeout; then Subscribe (id "1") with the
//     query, operationName and the coerced variables. A reader goroutine
//     reads all the time: it answers the server's Ping with Pong, and a
//     Ping is sent every ping_interval, which a Pong must answer within
//     pong_timeout. When the host stops the stream the adapter sends
//     Complete and closes normally (1000), within 2s. A message larger
//     than max_message_bytes is read to its end and skipped (a gap).
//   - websocket with protocol subscriptions-transport-ws: Apollo's
//     legacy protocol (subprotocol graphql-ws), which older servers
//     still speak: the same, with start, data and stop for Subscribe,
//     Next and Complete; the server's ka keep-alives are read, and
//     liveness is a WebSocket protocol ping every ping_interval that
//     the pong must answer within pong_timeout; connection_error
//     refuses ConnectionInit (a rejected error, as a 4403).
//   - sse: GraphQL over SSE in distinct connections mode: a POST of the
//     request (Accept: text/event-stream, the configured headers) whose
//     answer is an event stream of next events ended by a complete
//     event. The answer's headers must come within the timeout; the host
//     bounds the rest. An event larger than max_message_bytes drops the
//     connection (the parser cannot resynchronise) and counts as a loss.
//
// Results and errors:
//
//   - next with data: an item (the data); with data and errors: a partial
//     item (sdk.Item.Partial says which fields failed: "N errors from the
//     GraphQL server: message (at path)"), counted as partial, not as a
//     gap, since nothing was missed; errors without data: a gap ("an event
//     was lost to N errors ..."); the subscription goes on.
//   - error (websocket) before any event, or an SSE answer that is a
//     GraphQL response with errors and no data (a 4xx with a JSON body):
//     the server refused the subscription. KindUpstreamStatus, Status the
//     first error's extensions.code or GRAPHQL_ERROR, Message "the
//     GraphQL server refused the subscription with N errors: ...",
//     Detail {"errors": [...]} (and "http_status" over SSE), Rejected,
//     not retried. An error after events (a source that broke
//     mid-stream) says "ended the subscription with N errors", is not
//     Rejected and not retried either: the window keeps what came
//     (end_reason upstream_error).
//   - a close with 4400, 4401, 4403 (ConnectionInit refused: wrong
//     credentials), 4406, 4409 or 4429: KindUpstreamStatus, Status the
//     code, a message that says what the code means, Rejected, not
//     retried; 4408 and 4500 and other closes are losses.
//   - a handshake answered other than 101: as the websocket adapter
//     (KindUpstreamStatus with the HTTP status); a server that does not
//     pick graphql-transport-ws, or breaks the protocol (an unknown
//     message type, a message that is not JSON): KindBadResponse.
//   - reconnect: a connection that was subscribed and is lost (a broken
//     read, a close other than the above, a missed Pong, an SSE stream
//     that ends without complete) is a gap ("events sent meanwhile were
//     missed": GraphQL subscriptions do not resume) and is reopened after
//     a jittered exponential backoff from initial_delay up to max_delay,
//     and subscribed again; after max_attempts consecutive failed
//     attempts (a connection that delivered an event resets the count; 0
//     never reconnects) the stream fails. The first connection is not
//     retried: a wrong URL, credentials or document fails at once.
//
// # Without expansion
//
// A host that does not call ExpandOperation can invoke an entry config as
// is: the adapter expands it on first use (introspecting if need be) and
// calls the tool named like the operation, or the only one.
//
// # Performance
//
// Parsed configs are cached by their directory and raw bytes (bounded:
// the least recently used go first); a call builds its body from a
// precomputed prefix and the coerced variables; all calls share one HTTP
// client with keep-alive connection pools.
package graphql
