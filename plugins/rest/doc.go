// Package rest is Crank's REST adapter: it turns an operation into one HTTP
// request to an upstream JSON (or text) API and its answer into a tool
// result. It runs as an adapter plugin (see cmd/crank-adapter-rest) and is
// built on the adapter SDK only.
//
// # Config
//
// An operation's adapter config is a JSON object (written as YAML in
// operation files). Placeholders such as {env.API_TOKEN} are expanded by the
// host before the adapter sees the config; the adapter never logs the config
// nor quotes its values in diagnostics, errors or results.
//
//	method: GET                      # required: GET HEAD POST PUT PATCH DELETE OPTIONS (any case)
//	url: "https://api.example.com/users/{id}"   # required, absolute http or https
//	query: [verbose, limit]          # or {queryName: argName}
//	headers: {X-Api-Key: "secret"}   # static headers
//	header_args: {X-Request-Tag: tag}  # header ← tool argument
//	body: auto                       # auto | none | arguments | <argument name>
//	timeout: 10s                     # Go duration; default 30s
//	max_response_bytes: 8388608      # default 8 MiB
//	body_fields: {stream: true}      # JSON fields set in every request body
//	cursor_param: since              # mode window: query parameter carrying the cursor
//	stream:                          # mode window, server_stream: reading the stream
//	  reconnect: true                # default true for GET, false otherwise
//	  max_event_bytes: 1048576       # default 1 MiB
//	  events: [log]                  # SSE event types kept; default all
//	  end_data: "[DONE]"             # data that ends the stream; "" = none
//	  max_reconnects: 5              # consecutive failed reopenings
//
// Fields, in detail:
//
//   - method: the HTTP method, case-insensitive.
//   - url: an absolute http or https URL. A {name} in the path is a path
//     parameter filled from the tool argument of that name (a string,
//     number or boolean), escaped with url.PathEscape; a parameter may be
//     part of a segment ("/files/{name}.json"). A missing, null or empty
//     argument, a list or object, or "." / ".." is an invalid-argument
//     error naming the argument. Braces are only allowed as parameters and
//     only in the path (write a literal brace as %7B / %7D). The url may
//     carry a static query string, kept as is before the query arguments,
//     and userinfo, sent as basic auth. Parameter and argument names use
//     letters, digits, '_', '-' and '.'.
//   - query: tool arguments sent as query parameters, either a list of
//     argument names (the parameter has the argument's name) or an object
//     {query_name: argument_name} (sent in query_name order). Strings,
//     numbers and booleans are sent plainly (no JSON quotes), a list as a
//     repeated parameter (nulls skipped), an object as its compact JSON
//     text. Absent or null arguments are skipped.
//   - headers: static request headers {Name: value}; values may be strings,
//     numbers or booleans. Host sets the request's Host. Content-Length,
//     Transfer-Encoding, Connection and other hop-by-hop headers are
//     refused. Configured Accept, Content-Type and User-Agent replace the
//     adapter's defaults (Accept: application/json, Content-Type:
//     application/json when a body is sent, User-Agent: crank-rest/VERSION).
//   - header_args: headers filled from tool arguments {Name: argument_name};
//     a list sends the header once per element. An absent argument sends
//     no header, or the static header of the same name if there is one.
//     A value with a control character (line break) is refused.
//   - body: the request body, always JSON. "auto" (the default): POST, PUT
//     and PATCH send the tool arguments not used by path, query or
//     header_args as an object ({} when none remain; the arguments as
//     received when none are used), other methods send no body. "none":
//     never a body. "arguments": the remaining arguments as an object, for
//     every method. An argument name: that argument's value (any JSON
//     value) as the body, no body when it is absent or null (an argument
//     named auto, none or arguments cannot be used this way).
//   - timeout: the per-call timeout as a Go duration ("10s", "1500ms"). The
//     host's operation timeout wins when set; the default is 30s. The host's
//     gRPC deadline bounds every call too.
//   - max_response_bytes: the largest answer body accepted, after
//     decompression; default 8 MiB, 0 means the default, negative is an
//     error.
//   - body_fields: {field: JSON value} set in the JSON body object after
//     the arguments are placed, overriding an argument of the same name
//     (e.g. {"model": "llama3", "stream": true} for an LLM stream). Only
//     for operations that send a body; a body that is not an object is an
//     invalid-argument error.
//   - cursor_param: the query parameter a window's cursor is sent in: the
//     previous poll's cursor_path value (transport_behavior
//     request_response), or the last SSE event id on (re)connecting a
//     stream, which also goes in Last-Event-ID. It must not be one of the
//     query arguments.
//   - stream: how Stream reads the answer (see Streams).
//
// Unknown fields are errors (field names are case-sensitive), reported all
// at once by ValidateOperation with the field's name, e.g. "headers.X-Key"
// or "query[1]". Invoke refuses an invalid config with a KindInvalidArgument
// error carrying the same diagnostics.
//
// The caller's W3C trace context (traceparent, tracestate) is forwarded
// unless headers sets it. Redirects are followed (at most 5) only within
// the same scheme and host, so configured credentials never reach another
// origin; any other redirect is answered as a status error.
//
// # Results
//
// A 2xx answer becomes a result with the upstream's Content-Type:
//
//   - a JSON body (application/json, text/json, any +json type, or a body
//     starting with { or [ when there is no Content-Type) becomes
//     Structured, as is: an array or scalar is left for the host to wrap.
//     Text stays empty; the host renders Structured. A body declared as
//     JSON but invalid is a KindBadResponse error.
//   - an empty body (204, HEAD, Content-Length: 0, whitespace only) becomes
//     Structured {}: "succeeded, nothing to show".
//   - any other body becomes Text; a body that is not UTF-8 is replaced by
//     a one-line note of its size and type.
//
// # Errors
//
// Failures are *sdk.UpstreamError. Upstream names the call as the method
// and the URL template without query string or userinfo, e.g.
// "GET http://127.0.0.1:8081/users/{id}".
//
//   - KindUpstreamStatus: a non-2xx answer. Status is the code ("404"),
//     Message "upstream answered 404 Not Found", Body the first 2 KiB of the
//     answer (with a note when truncated), Detail
//     {"status_code","content_type","retry_after"}. Retryable for 429, 502,
//     503 and 504.
//   - KindTransport: the upstream could not be reached or the connection
//     broke; the message names the host and the reason (connection refused,
//     DNS lookup failed, TLS handshake failed, connection reset...). Retryable
//     when the request cannot have reached the upstream (connection refused,
//     temporary DNS failure), or for idempotent methods when it may have.
//   - KindTimeout: the call's timeout ("... did not answer within 10s") or the
//     host's deadline expired.
//   - KindCancelled: the host cancelled the call.
//   - KindBadResponse: the answer is larger than max_response_bytes (the
//     message names the limit) or is invalid JSON.
//   - KindInvalidArgument: an invalid config, or arguments that cannot make
//     a request (missing path argument, wrong type, header injection).
//
// # Streams
//
// For a mode window operation with transport_behavior server_stream the
// host calls Stream, and the adapter only delivers raw items: the host
// enforces the window's limits, aggregation and redaction, and cancels
// the call when a limit is hit; the adapter then stops reading and closes
// the upstream connection at once.
//
// Stream sends the request with Accept: text/event-stream (unless headers
// sets Accept), Cache-Control: no-cache and, when resuming, Last-Event-ID
// (the window's cursor, then the last event id seen). The upstream must
// answer within the operation timeout, which the host sets to the
// window's upstream_timeout_ms (a KindTimeout error otherwise); after that
// the window bounds the stream. The answer:
//
//   - text/event-stream is parsed with tmaxmax/go-sse: one item per event
//     with data, its data as JSON when it is JSON and as a JSON string
//     otherwise; Item.ID and Item.Cursor are the last event id seen.
//     Comments and events without data are skipped; stream.events keeps
//     only the named event types ("message" for events without a type);
//     an event whose data equals stream.end_data ("[DONE]" by default, as
//     OpenAI-compatible servers send) ends the stream.
//   - a JSON answer is one item, then the end of the stream.
//   - 204 No Content ends the stream; another non-2xx answer is a
//     KindUpstreamStatus error; another media type is KindBadResponse.
//
// Memory is bounded: an event larger than stream.max_event_bytes is not
// buffered — the reader skips to its end, sends a gap ("an SSE event
// larger than max_event_bytes (N) was skipped") and reads on.
//
// When the connection drops or the upstream closes the stream and
// stream.reconnect is on (GET, by default), Stream reopens it with
// Last-Event-ID after a backoff (250ms doubling to 5s); without an event
// id to resume from it first sends a gap, since events may have been
// missed. A reopened stream that closes without any event ends the
// stream. stream.max_reconnects consecutive failed reopenings end it with
// the last error; a first connection that fails fails at once. With
// reconnect off, the upstream closing the stream ends it.
//
// # Performance
//
// Parsed configs are cached by their raw bytes (bounded, lock-free reads),
// and all calls of an adapter share one HTTP client with keep-alive
// connection pools.
package rest
