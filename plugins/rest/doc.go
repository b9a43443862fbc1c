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
// # Performance
//
// Parsed configs are cached by their raw bytes (bounded, lock-free reads),
// and all calls of an adapter share one HTTP client with keep-alive
// connection pools.
package rest
