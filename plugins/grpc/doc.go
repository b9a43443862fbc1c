// Package grpcadapter is Crank's gRPC adapter (directory plugins/grpc,
// adapter name "grpc"): it turns an operation into a call of one gRPC
// method, typed from the service's own descriptors, with no generated code.
// Unary and client-streaming methods serve mode unary (and can be polled
// by a window); server-streaming and bidirectional methods are a stream
// source for the host's window mode (and the sessions and jobs the host
// builds on it).
// It runs as an adapter plugin (see cmd/crank-adapter-grpc) and is built on
// the adapter SDK only.
//
// # Config
//
// An operation's adapter config is a JSON object (written as YAML in
// operation files). Placeholders such as {env.API_TOKEN} are expanded by the
// host before the adapter sees the config; the adapter never logs the config
// nor quotes metadata values in diagnostics, errors or results.
//
//	target: 127.0.0.1:50051            # required
//	method: acme.users.v1.Users/GetUser  # one tool: this method
//	# service: acme.users.v1.Users     # or: one tool per method of the service
//	# methods: [GetUser, ListUsers]    # with service: only these
//	# tool_prefix: users_              # with service: default "<entry name>_"
//	plaintext: false                   # default: true for loopback/unix targets without tls
//	tls:                               # TLS; without ca_file the system roots verify
//	  ca_file: certs/ca.pem
//	  cert_file: certs/client.pem      # mutual TLS, with key_file
//	  key_file: certs/client.key
//	  server_name: users.internal      # default: the target's host
//	descriptor_set: api.binpb          # or proto_files / proto_source; default: server reflection
//	# proto_files: [acme/users/v1/users.proto]
//	# proto_source: |                  # a .proto file's text, inline
//	#   syntax = "proto3"; ...
//	# import_paths: [protos]           # default: the operations file's directory
//	metadata: {authorization: "Bearer {env.USERS_TOKEN}"}
//	timeout: 10s                       # default 30s; the host's operation timeout wins
//	max_response_bytes: 8388608        # per response message; default 8 MiB
//	field_names: proto                 # proto (as in the .proto) | json (lowerCamelCase)
//	emit_defaults: true                # include zero values in results
//	cursor_field: after_seq            # windows: the request field a resumed window's cursor goes to
//	requests:                          # client-streaming and bidirectional methods
//	  max_items: 100                   # request messages a call sends at most; default 100
//	  max_bytes: 1048576               # their encoded bytes at most; default 1 MiB
//
// Fields, in detail:
//
//   - target: the server address, host:port, dns:///host:port,
//     passthrough:///host:port or unix:///path (unix:path,
//     unix-abstract:name). One HTTP/2 connection pool is shared by every
//     operation with the same target and transport settings.
//   - plaintext, tls: transport security. A loopback or unix target without
//     tls speaks plaintext; any other target speaks TLS 1.2+ verified by the
//     system roots unless tls.ca_file names PEM CA certificates. cert_file
//     and key_file (PEM) add a client certificate (mutual TLS); server_name
//     overrides the name verified. plaintext: true with tls is an error;
//     plaintext to a non-loopback target is allowed with a warning. TLS
//     files are read at load, so a reload picks up rotated ones.
//   - method: the method of a one-tool entry, "package.Service/Method"
//     ("/package.Service/Method" and "package.Service.Method" work too).
//   - service: instead of method, a service whose methods each become a
//     tool, named tool_prefix (default: the entry's name and "_") plus the
//     method name in snake_case (GetUser → users_get_user), cut to 128
//     characters with a hash and made unique with a numeric suffix.
//     methods limits the import to the named methods. Each derived tool
//     carries the entry's config with method set instead of service.
//     Methods the entry's mode cannot serve are skipped with a warning.
//   - descriptor_set, proto_files, proto_source, import_paths: where the
//     descriptors come from (at most one of the first three). By default
//     the adapter asks the server's reflection service
//     (grpc.reflection.v1, falling back to v1alpha) at load, so the server
//     must be up then; an upstream served by the same Caddy is not (Caddy
//     listens only once every handler is provisioned) and needs one of the
//     others. Any server's reflection serves: the descriptors another
//     implementation answers (grpc-js's @grpc/reflection: map entries
//     named like their fields, type names relative to their scope, files
//     without imports) are normalised as protoc would have written them
//     before they are built (reflectnorm.go). descriptor_set names a binary FileDescriptorSet (protoc
//     --include_imports --descriptor_set_out, buf build -o); imports it
//     lacks are taken from the well-known types. proto_files are .proto
//     sources compiled at load with bufbuild/protocompile, named relative
//     to import_paths (default: the operations file's directory);
//     proto_source is one .proto file's text, compiled the same way (named
//     proto_source.proto in messages; its imports come from import_paths).
//     The standard google/protobuf imports are built in. Relative paths
//     resolve against the operations file's directory. Descriptors load
//     again on every operations-file load; a call after an adapter restart
//     loads them once on first use.
//   - metadata: request metadata sent with every call, {key: value}. Keys
//     are case-insensitive (sent lower-case) of letters, digits, - _ . ;
//     keys ending in -bin take base64 values sent as bytes; other values
//     must be printable ASCII. grpc-* keys, HTTP/2 headers (content-type,
//     te, host, user-agent, ...) and the trace headers are refused. The
//     call's W3C trace context (traceparent, tracestate) is sent as
//     metadata, from the call's client span ("service/method", recorded
//     when the host traces the call).
//   - timeout: the call's deadline as a Go duration, sent to the server as
//     grpc-timeout. The host's operation timeout wins when set (for a
//     window, the host sends its upstream_timeout_ms); default 30s. For a
//     stream it bounds the wait for the server's first answer (response
//     headers or first message); after that the host bounds the stream.
//   - max_response_bytes: the largest response message accepted (each
//     message of a stream); default 8 MiB, 0 means the default.
//   - field_names: the names of argument and result fields: "proto" (the
//     default) uses the .proto names (user_id), "json" the lowerCamelCase
//     JSON names (userId). Arguments are accepted under either name.
//   - emit_defaults: results include fields at their default values (0,
//     "", false, empty lists and maps), so every scalar field is present;
//     false leaves them out, as protojson does by default. Unset message
//     fields and unset oneof members are left out either way.
//   - cursor_field: for windows that resume. A gRPC message carries no
//     resume point, so items have no id or cursor of their own; the host's
//     aggregation cursor_path can pick one from the item (e.g. "$.seq"),
//     and when a window resumes, its cursor is set as this top-level string
//     or integer field of the request (overriding the argument). Without
//     it a resumed window starts the stream afresh. It applies to unary
//     and server-streaming methods only: a streaming call's requests are
//     the caller's.
//   - requests.max_items, requests.max_bytes: the bounds of a
//     client-streaming or bidirectional call's requests argument, the
//     most messages it holds, requests.max_items (default 100, at most
//     10000; the input schema's maxItems says so), and the most bytes they
//     take encoded in all, requests.max_bytes (default 1 MiB; at
//     most 64 MiB). The count is checked first, the bytes as
//     the messages are converted, both before the call starts: a list
//     over either is refused naming the limit, and nothing reaches the
//     server.
//
// Unknown fields are errors (field names are case-sensitive), reported by
// ValidateOperation with the field's name, e.g. "tls.ca_file" or
// "metadata.authorization". ExpandOperation loads the descriptors and
// reports what it finds wrong there: an unreachable server or one without
// reflection ("target"), an unknown service or method ("service",
// "method"), a broken descriptor set or .proto file ("descriptor_set",
// "proto_files", with the file and line), a method that does not fit the
// entry's mode, a cursor_field the request lacks (or given for a method
// that streams requests). Invoke refuses an invalid config with a
// KindInvalidArgument error carrying the same messages.
//
// Modes: in mode unary, unary and client-streaming methods are called. In
// mode window (and session, which the host builds on windows) a
// server-streaming or bidirectional method is read as a stream
// (transport_behavior: server_stream, the default) and a unary or
// client-streaming method entry may be polled (transport_behavior:
// request_response); a whole-service import in mode window takes the
// server-streaming and bidirectional methods only. Invoke of a method that
// streams answers and Stream of one that answers once are refused with a
// message naming the transport_behavior to use.
//
// # Tools and schemas
//
// A method entry expands to one tool, the entry itself: what the operator
// wrote (description, schemas, annotations) wins over what is derived. The
// derived tool has a title humanised from the method and service names
// ("Get user (Directory)"), the method's .proto comment
// (when the descriptors carry source info: .proto files always, descriptor
// sets built with --include_source_info) or "Calls the gRPC method ...",
// and annotations from the method's idempotency_level (NO_SIDE_EFFECTS:
// read-only and idempotent; IDEMPOTENT: idempotent, not read-only), or,
// without one, from its name by the SDK's rule (sdk.NameAnnotations:
// WatchEvents reads). A server-streaming window resumes (its tool says
// ResumesStream) only with cursor_field.
//
// The input schema (JSON Schema 2020-12) is generated from the request
// message following the proto3 JSON mapping, as protojson reads it:
//
//   - 32-bit integers: integers with their range; 64-bit integers: decimal
//     strings (numbers accepted); floats: numbers or "NaN", "Infinity",
//     "-Infinity"; bytes: base64 strings; bools and strings as such.
//   - enums: their value names; google.protobuf.NullValue: null.
//   - repeated fields: arrays; maps: objects (integer and bool keys as
//     strings, constrained by propertyNames).
//   - messages: objects with additionalProperties: false; proto2 required
//     fields are required; a oneof allows at most one of its members (and
//     says so in each member's description); deprecated fields are marked.
//     A message used once is inlined; one used more than once or
//     recursively is a $defs entry referenced by $ref.
//   - well-known types by their JSON form: Timestamp (RFC 3339), Duration
//     ("1.5s"), FieldMask (comma-separated paths), wrappers (their value),
//     Struct (object), Value (any), ListValue (array), Any (an object with
//     "@type", required in input schemas only: an answer may hold an empty
//     Any, {}), Empty (an empty object).
//   - a request whose JSON form is not an object (a wrapper, a Timestamp)
//     is taken from the argument "value".
//   - a client-streaming or bidirectional method takes one argument,
//     "requests": an array (maxItems: requests.max_items) of request
//     messages in their JSON form as above (a wrapper's item is its bare
//     value), sent in order.
//
// .proto comments become descriptions. The output schema of a unary method
// describes its response the same way, as protojson writes it: 64-bit
// integers as strings, enums as names (or numbers the descriptor does not
// know); it does not require fields or forbid others. A response whose
// JSON form is not an object is described under "result", the key the host
// wraps it in; google.protobuf.Value responses get no output schema.
// A client-streaming method's output schema is its response's, as for a
// unary method. Server-streaming and bidirectional tools have no output
// schema: the window engine shapes their result; their description names
// the item message, and their item
// schema (Tool.item_schema_json, which the host's window output schema
// gives its items) describes that message as the items are written,
// unwrapped.
//
// # Calls and results
//
// Arguments are converted with protojson (which accepts either field
// name, but the host refuses arguments the input schema does not declare:
// use the names it lists; google.protobuf.Any resolves types from the
// loaded descriptors and the well-known and google.rpc types). A
// conversion failure is a KindInvalidArgument error naming the argument's
// path, e.g. `argument items[2].price: invalid value for int64: "12x"`, at
// most 16 messages deep (a deeper failure names the field at that depth,
// followed by "…"); a bytes value that is not base64 says that bytes are
// base64 (the standard or URL-safe alphabet, padding optional); a string
// with an unpaired UTF-16 surrogate escape (\ud800), which is no Unicode
// text, is refused as such.
//
// A unary answer becomes Structured: the response as compact protojson
// (Text empty, ContentType application/json).
//
// A server-streaming method is served by Stream: each response message is
// one item (its JSON as data); the server's OK status ends the stream
// normally, any other status with an upstream error; cancelling the call
// (the host cutting its window) cancels the upstream call, which the server
// sees at once. When the host's deadline reaches the server first, the
// stream still ends as the host's own cut.
//
// A client-streaming method is served by Invoke: its requests (converted
// and bounded first, so a refused list sends nothing) go out in order, the
// call half-closes, and the server's one answer is the result, as for a
// unary call; the call's timeout bounds the whole call.
//
// A bidirectional method is served by Stream: its requests (bounded the
// same way) go out in order while the answers come in, so a server that
// answers each request before reading the next is served too; the call
// half-closes after the last request. Each answer is one item, and the
// stream ends as a server stream does: the server's status (its details
// from the trailers, mapped as below), or the host cutting its window,
// which may come before the server is done (the cancellation reaches the
// server and stops the sends). The timeout bounds the wait for the
// server's first answer; the host bounds the rest (items, bytes,
// duration, idleness).
//
// # Errors
//
// Failures are *sdk.UpstreamError. Upstream names the call as
// "gRPC package.Service/Method at target". Status is the canonical code
// name (NOT_FOUND, UNAVAILABLE, ...); Detail is JSON
// {"code","code_number","message","details"} with the status details
// rendered by protojson (google.rpc.ErrorInfo, BadRequest, ... and the
// service's own types; unknown ones as {"@type","value_base64"}), bounded
// to 16 KiB.
//
//   - KindUpstreamStatus: the server answered a status; Message is
//     "CODE: message". Retryable for RESOURCE_EXHAUSTED and ABORTED;
//     Rejected for INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
//     PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION,
//     OUT_OF_RANGE and UNIMPLEMENTED.
//   - KindTimeout: DEADLINE_EXCEEDED, told apart: the call's timeout ("the
//     upstream did not answer within 10s"; a stream's "did not start
//     answering"), the host's deadline, or the server reporting a deadline
//     of its own exceeded. Retryable.
//   - KindTransport: UNAVAILABLE, with the reason when it is known:
//     connection refused, DNS failure, a TLS handshake failure (with a hint
//     when one side speaks plaintext), a reset. Retryable. Reflection that
//     cannot reach the server on a first call reports the same way.
//   - KindCancelled: the host cancelled the call (the cancellation reaches
//     the server).
//   - KindBadResponse: a response larger than max_response_bytes, or one
//     that is not a valid message of the response type.
//   - KindInvalidArgument: an invalid config, arguments that cannot be
//     converted, a requests list over requests.max_items or
//     requests.max_bytes, or a method that does not fit the call (Invoke
//     of a method that streams answers, Stream of one that answers once).
//
// # Performance
//
// Parsed configs and resolved methods are cached by their directory and
// raw bytes (bounded: the least recently used go first); connections are
// shared per target and transport settings. A unary call costs one
// protojson conversion each way over a plain grpc-go call: see
// BenchmarkUnary; a bidirectional round trip (requests out, answers in as
// items) beside a server stream of as many items: see
// BenchmarkStreamRoundTrip.
package grpcadapter
