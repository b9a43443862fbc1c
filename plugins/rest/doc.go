// Package rest is Crank's REST adapter: it turns an operation into one HTTP
// request to an upstream JSON (or text) API and its answer into a tool
// result, serves upstream SSE streams, and imports OpenAPI documents as sets
// of tools (package openapi, the importer). It runs as an adapter plugin
// (see cmd/crank-adapter-rest) and is built on the adapter SDK (never the
// host), with go-sse and oapi-codegen/runtime.
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
//	body_format:                     # a body that is not JSON (see Bodies)
//	  media_type: application/x-www-form-urlencoded
//	  encoding: {metadata: {style: deepObject}}
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
//     argument, a list or object, or a value that is or holds a dot
//     segment ("." or "..", as it is or percent-decoded up to three
//     times, split at '/' and '\' and read up to a ';': "..", "%2e%2e",
//     "a/../b", "..;x") is an invalid-argument error naming the argument,
//     so that an upstream or proxy that decodes or normalises the path
//     stays in the configured one. Braces are only allowed as parameters and
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
//   - body: the request body, JSON unless body_format says otherwise. "auto" (the default): POST, PUT
//     and PATCH send the tool arguments not used by path, query or
//     header_args as an object ({} when none remain; the arguments as
//     received when none are used), other methods send no body. "none":
//     never a body. "arguments": the remaining arguments as an object, for
//     every method. An argument name: that argument's value (any JSON
//     value) as the body, no body when it is absent or null (an argument
//     named auto, none or arguments cannot be used this way). The host
//     refuses arguments the tool's input schema does not declare before
//     the adapter sees them, so "auto" and "arguments" forward declared
//     arguments only, unless the schema opts in to more with
//     additionalProperties.
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
//   - param_styles: {argument: {style, explode, allow_reserved}}: the
//     argument filling a path parameter, query parameter or header_args
//     header is serialized by OpenAPI's style and explode rules (with
//     github.com/oapi-codegen/runtime) instead of the plain rules above.
//     Styles: path simple, label, matrix; query form, spaceDelimited,
//     pipeDelimited, deepObject; header simple; and json anywhere (the
//     compact JSON text, for parameters declared with content). explode
//     defaults to true for form and deepObject, false otherwise;
//     allow_reserved (query only) leaves the reserved characters of RFC
//     3986 unescaped, except '&', '=', '#' and '+', which stay escaped so
//     that a value cannot add a parameter, start a fragment or turn into
//     a space. A styled path argument may not serialize to a dot segment
//     either.
//     A styled value may be a scalar, a list of scalars (nulls skipped) or
//     an object of scalars (deepObject: any object); anything else is an
//     invalid-argument error naming the argument. deepObject takes any
//     value, written in the bracket convention of Bodies: an object
//     a[b][c]=v, a list a[]=v (Stripe's expand[]=x; stripe-mock, qs,
//     Rails and PHP read it), a scalar a=v. The OpenAPI import writes it;
//     see below.
//   - body_format: {media_type, encoding, base64}: how the body is sent
//     when it is not JSON; see Bodies.
//
// # Bodies
//
// The body built from the arguments (as body says) is sent in
// body_format.media_type, and Content-Type says it:
//
//	media type                          | the body                      | written as
//	------------------------------------+-------------------------------+---------------------------------------------
//	JSON (default; +json types)         | any JSON value                | as is
//	application/x-www-form-urlencoded   | an object of fields           | a=1&b=x; nested: a[b][c]=v, a[]=v, a[0][k]=v
//	multipart/form-data                 | an object of fields           | a part per field; files from base64
//	any other type (text/*, binary)     | one string argument (body)    | the text as is, or its bytes (base64: true)
//
// Form fields follow encoding.<field> as OpenAPI's encoding object does:
// style form (the default: a list repeats the name, a=1&a=2; explode
// false joins it, a=1,2), spaceDelimited, pipeDelimited, deepObject (the
// bracket convention: an object a[b]=v, deeper a[b][c]=v, a list of
// scalars a[]=v, a list of objects a[0][k]=v); content_type a JSON type
// sends the value as JSON text. An object or nested list without a style
// uses brackets too (OpenAPI's form style would drop its name). Nulls
// are left out. Multipart: a field with file: true is a file, given as
// its bytes in base64 (standard encoding) and sent with filename and
// content_type (default application/octet-stream); a string that is not
// base64 is an invalid-argument error (a URI is not read); a field with a
// style is written as the form fields above, one part each; an object
// or a JSON content_type is a JSON part; a scalar a text part, a list of
// scalars one part per element. body_fields only apply to JSON bodies.
//
// Unknown fields are errors (field names are case-sensitive), reported all
// at once by ValidateOperation with the field's name, e.g. "headers.X-Key"
// or "query[1]". Invoke refuses an invalid config with a KindInvalidArgument
// error carrying the same diagnostics.
//
// Input schema: an entry that writes no input_schema gets one derived from
// its config (ExpandOperation): its path parameters (required; a string,
// number or boolean unless styled), query arguments, header_args arguments
// and body argument, and no other argument (additionalProperties false).
// The host refuses arguments a tool's schema does not declare, so the
// fields an auto or arguments body sends are declared in the entry's
// input_schema (or allowed with additionalProperties: true there).
//
// Every request carries the call's W3C trace context (traceparent,
// tracestate: the span of the upstream request when the host traces the
// call, else the host's) unless headers sets it, and is recorded as a
// client span for the host (httpadapter.TraceTransport). Redirects are followed (at most 5) only within
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
//   - a binary body (image, audio, video, font, an application type
//     other than JSON, XML, JavaScript, YAML or a form: PDF, tar,
//     octet-stream...; or any body that is not UTF-8) becomes MCP content
//     with its media type: an image or audio block, else an embedded
//     resource with its blob, named by the URL without query string; Text
//     is a one-line note of its size and type. max_response_bytes bounds
//     it as any answer.
//   - any other body becomes Text.
//
// # Errors
//
// Failures are *sdk.UpstreamError. Upstream names the call as the method
// and the URL's scheme and host, never its query string or userinfo (which
// may carry credentials), e.g. "GET http://127.0.0.1:8081"; for a status
// error it adds the path that was called, with its path arguments
// ("GET http://127.0.0.1:8081/users/0"). Keep a capability URL's secret in
// a placeholder: the host redacts it wherever it appears.
//
//   - KindUpstreamStatus: a non-2xx answer. Status is the code ("404"),
//     Message "upstream answered 404 Not Found", Body the first 2 KiB of the
//     answer (with a note when truncated), Detail
//     {"status_code","content_type","retry_after","location"}: a redirect
//     not followed says its Location in Message and Detail (the target,
//     often a download URL, is what the caller wanted). Retryable for 429, 502,
//     503 and 504; Rejected for the other 4xx but 408.
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
// # OpenAPI import
//
// An entry whose config is {"openapi": {...}} imports an OpenAPI document
// (Swagger 2.0, converted; 3.0; 3.1; 3.2 as far as kin-openapi reads it):
// at load, ExpandOperation turns it into one tool per operation (package
// openapi's Import), each with its own ordinary rest config, so a call
// needs no OpenAPI. A plain rest
// entry is its own tool. openapi is the config's only field:
//
//	openapi:
//	  document: petstore.yaml        # required: file (relative to the operations file) or http(s) URL
//	  base_url: https://api.example.com/v1   # default: the document's first server URL
//	  allow_external_refs: false     # $refs to other files or URLs; default off
//	  tool_prefix: pets_             # prefix of the derived tool names
//	  include: {tags: [pets], operation_ids: ["list*", getPet], methods: [GET], paths: [/pets]}
//	  exclude: {tags: [admin], methods: [DELETE]}
//	  overrides:                     # by operationId or "METHOD /path"
//	    getPet: {name: get_pet, title: Get a pet, description: ..., mode: unary,
//	             annotations: {read_only: true, destructive: false, idempotent: true, open_world: false}}
//	    watchEvents:                 # a window tool of its own (as an operations entry writes it)
//	      mode: window
//	      transport_behavior: server_stream
//	      limits: {window_duration_ms: 3000, max_items: 500}
//	      aggregation: {aggregation_mode: summary_plus_samples, group_by: $.kind}
//	      safety: {redacted_paths: [$.owner.email]}
//	  credentials:                   # by security scheme name
//	    api_key: "{env.PETS_KEY}"    # apiKey (header, query or cookie); a token for http bearer, oauth2, openIdConnect
//	    basic: {username: u, password: "{env.PETS_PASSWORD}"}   # http basic
//	  headers: {X-Tenant: acme}      # static headers of every tool
//	  timeout: 10s                   # rest timeout of every tool
//	  max_response_bytes: 1048576    # rest max_response_bytes of every tool
//	  output_schemas: true           # derive output schemas (default true)
//
// The document is read from the file or fetched (30s or the entry's
// timeout, at most 32 MiB, no redirect to another origin) at every load;
// a reload refreshes it. A demo upstream served by the same Caddy must be
// read from a file: Caddy provisions handlers before listeners start.
//
// Selection. include keeps an operation when every list it gives matches
// (a list matches when any entry does); exclude drops an operation when
// any list it gives matches. tags match exactly, operation_ids are globs
// (path.Match: * ? [a-z]), methods any case, paths are prefixes matched by
// whole segments (/pets matches /pets and /pets/{id}, not /petstore).
//
// Each tool gets:
//
//   - a name: the override's, else the operationId, else the method and
//     path ("get_pets_petId"), with characters MCP does not allow replaced
//     by '_', tool_prefix prepended, cut to 128 characters, made unique
//     with _2, _3...
//   - a title (the summary) and a description (summary and description;
//     "Deprecated." first for a deprecated operation).
//   - annotations from the method: GET, HEAD and OPTIONS read-only and
//     idempotent; DELETE destructive and idempotent; PUT idempotent; POST
//     not idempotent; overrides win field by field.
//   - an input schema (JSON Schema 2020-12, checked with
//     google/jsonschema-go as the host resolves it): path, query and header
//     parameters (path item and operation, the operation's winning), each
//     under its own name unless two clash (then "name_query",
//     "name_header"); a JSON request body's properties as arguments of
//     their own when it is a plain object schema whose properties clash
//     with no parameter, else one argument "body". The body's media type:
//     JSON first, else a form, multipart, then a raw type
//     (application/octet-stream first): a form or multipart object's
//     properties are arguments as a JSON body's (its encoding object
//     becomes body_format.encoding; a multipart property of format
//     binary, or with contentMediaType or contentEncoding, is a file
//     argument in base64), a raw body one "body" string (base64 unless
//     the type is text). An operation whose body cannot be sent (a raw
//     type with a non-string schema) is skipped, never published without
//     it; a form body that admits no property (Stripe's GETs) is no
//     body. Path parameters are required, and may not be empty
//     (minLength 1 when a string may fill them); so are required
//     parameters and the body's required properties: a body whose schema
//     requires properties is published required even when
//     requestBody.required is false (its default), since the API refuses
//     a call without them. Unknown arguments are refused unless the body's
//     schema allows more properties explicitly (additionalProperties true
//     or a schema): the host refuses arguments a tool's input schema does
//     not declare. Header parameters Accept,
//     Content-Type and Authorization are ignored (as OpenAPI says), and so
//     are parameters a credential sets.
//   - an output schema from the 2xx answers when they are all JSON with
//     one schema: an object schema as is; an array or scalar as
//     {"result": ...}, as the host wraps it; none when an answer may be
//     empty (204) or is not JSON, or with output_schemas: false.
//   - a rest config: method, url (base_url + path, path parameters
//     renamed to their arguments), query, header_args, param_styles where
//     the document's style/explode rules differ from the plain rules,
//     body (none, arguments or the body argument), body_format (a form,
//     multipart or raw body), headers (static ones, credentials, the
//     body's Content-Type when another JSON type, Accept when a 2xx answer
//     is not JSON: the answers' media types, so an image or tar operation
//     is not refused with a 406),
//     timeout, max_response_bytes. It is checked as any rest config.
//
// Schemas: OpenAPI 3.0's nullable becomes a type array with "null" (and
// null in an enum), or anyOf with {"type": "null"} without a type; boolean
// exclusiveMinimum/exclusiveMaximum become the numeric bounds of 2020-12;
// readOnly properties are left out of input schemas and writeOnly ones of
// output schemas; example becomes examples; discriminator, xml,
// externalDocs and x- extensions are left out; Swagger's type file is a
// string. $refs are written inline, except schemas on a reference cycle,
// which go to $defs ("#/$defs/Node"); a schema past 20000 nodes puts every
// $ref in $defs. A pattern Go's regexp cannot compile (lookarounds) is left
// out with a warning. 3.1 schemas are 2020-12 already; $refs into a
// schema's own $defs or to $anchors are not followed.
//
// Security: the operation's security requirements (or the document's) are
// tried in order; the first whose schemes all have credentials is used:
// apiKey as a header, a query parameter (in the url) or a Cookie header;
// http bearer, oauth2 and openIdConnect as "Authorization: Bearer token";
// http basic from username and password. An empty requirement ({}) makes
// security optional. An operation no credentials satisfy is skipped with
// a warning naming the schemes. Credentials are in the tools' rest
// configs only, never in schemas, descriptions or diagnostics; the host
// redacts the values placeholders expand to from results and logs.
//
// Streams: an operation whose 2xx answer is text/event-stream (and none is
// JSON), or that an override sets to mode window, is a window tool; every
// operation a window entry imports is one too (a JSON one is polled with
// transport_behavior request_response, or read as one item), except those
// overridden to unary. Each tool tells the host its own mode when it
// differs from the entry's (Tool.mode), and its own window config when
// its override gives one (transport_behavior, limits, aggregation,
// safety: Tool.execution_json, replacing the entry's; the host checks it
// as an entry's, naming the tool and the field); without one a window
// tool gets its entry's window config, or the host's defaults in a unary
// entry. A window tool's item schema (Tool.item_schema_json), which the
// host's window output schema gives its items, is the schema of one
// event's data: from the response's itemSchema (OpenAPI 3.2: the data
// property's contentSchema when it describes whole events, else the
// itemSchema), else from the text/event-stream content's schema when that
// is an object (or an array of them) rather than the stream's text.
//
// A host that predates tools' own modes (it does not send the
// tool_execution host capability) gives every tool its entry's mode and
// window: the adapter then skips a tool whose mode differs from its
// entry's, with a warning saying to serve it from an entry with mode:
// window whose include.operation_ids names it, and an override's window
// config is an error.
//
// Errors: a document that cannot be used at all — unreadable, not YAML or
// JSON, not OpenAPI, an unsupported version, no paths, no operation left —
// is an error on openapi.document with the JSON pointer of the bad part
// ("#/openapi: unsupported OpenAPI version"); a missing base URL is an
// error on openapi.base_url. An operation that cannot be served is skipped
// with a warning naming it and the pointer of the part at fault: a $ref
// that resolves to nothing or points outside the document while external
// $refs are off (found before kin-openapi loads the document, in what the
// operation reaches, so that one bad operation or component does not sink
// the others), a malformed or invalid operation, an unsupported method
// (TRACE, QUERY), a required cookie parameter, a body that cannot be sent,
// a parameter style the location does not allow, missing credentials.
// Components no imported operation reaches are not loaded at all.
//
// # Performance
//
// Parsed configs are cached by their raw bytes (bounded: the least
// recently used go first), and all calls of an adapter share one HTTP
// client with keep-alive connection pools.
package rest
