// Package soap is Crank's SOAP adapter: it reads a WSDL 1.1 document at
// load, turns every operation of one SOAP port into a tool whose input
// JSON Schema comes from the XML schema, and at call time builds the SOAP
// envelope from the JSON arguments and turns the answer (or fault) back
// into JSON. It runs as an adapter plugin built on the adapter SDK (never
// the host); XML is read and written with github.com/beevik/etree, the
// WSDL and XSD model is its own (wsdl.go, xsd.go, ops.go).
//
// # Config
//
// An operation's adapter config is a JSON object (written as YAML in
// operation files). Placeholders such as {env.SOAP_PASSWORD} are expanded
// by the host; the adapter never logs the config nor quotes its values in
// diagnostics, errors or results.
//
//	wsdl: orders.wsdl            # required: WSDL 1.1 file, relative to the operations file
//	service: OrderService        # optional: the wsdl:service (default: any)
//	port: OrderServiceSoap12     # optional: the wsdl:port (default: the first SOAP 1.1 or 1.2 port)
//	endpoint: https://erp.example.com/ws/orders   # optional: overrides the port's soap:address
//	operations: [GetOrder, ListOrders]            # optional: import only these operations
//	operation: GetOrder          # optional: the entry is this one operation's tool
//	tool_prefix: erp_            # prefix of the derived tool names
//	headers: {X-Tenant: acme}    # extra HTTP headers (not Content-Length, Connection, SOAPAction...)
//	security:                    # optional WS-Security header, with every call
//	  username: svc-crank        # required with security: a UsernameToken
//	  password: "{env.ERP_PASSWORD}"
//	  password_type: digest      # digest (default: PasswordDigest) | text (PasswordText: https or loopback only)
//	  nonce: true                # text tokens: add a Nonce and Created (a digest always has them)
//	  timestamp: 5m              # add a wsu:Timestamp expiring this long after the call; default none
//	  sign:                      # optional: sign the Body and the Timestamp (XML-DSig)
//	    cert_file: certs/crank.pem   # PEM certificate, sent as the BinarySecurityToken
//	    key_file: certs/crank.key    # PEM key: RSA or ECDSA P-256
//	timeout: 10s                 # Go duration; the host's operation timeout wins; default 30s
//	max_response_bytes: 8388608  # default 8 MiB
//
// security sends a wsse:Security header (mustUnderstand) with every call,
// built fresh each time (package wsse): a UsernameToken whose password
// travels as PasswordDigest, Base64(SHA-1(nonce + created + password)),
// so the password itself never travels, or with password_type text as
// PasswordText, which the adapter refuses at load for an endpoint that is
// neither https nor http to loopback; a digest token (and a text token with nonce) carries a fresh
// 16-byte random Nonce and its Created time (UTC, milliseconds); timestamp
// adds a wsu:Timestamp whose Expires is that long after its Created (at
// most 24h). The password comes from a placeholder, is never logged and
// never appears in diagnostics, errors or results; the host redacts it
// from whatever an upstream echoes. sign adds an X.509 signature: the
// certificate goes as a wsse:BinarySecurityToken (X509v3), and a
// ds:Signature covers the Body (given wsu:Id Body-1) and the Timestamp
// (TS-1) with exclusive c14n, SHA-256 digests and RSA-SHA256 or
// ECDSA-SHA256, its KeyInfo a SecurityTokenReference to the token. The
// canonicalization is goxmldsig's Exclusive XML Canonicalization 1.0
// (wsse/c14n.go), and an envelope Crank signs verifies with xmlsec1, an
// implementation that shares nothing with it (e2e
// TestSOAPSignatureVerifiesWithXMLSec). The files are read at load (a
// reload picks up rotated ones), relative to the operations file; the key
// is never logged.
//
// Unknown fields are errors. The WSDL and every file it imports
// (wsdl:import, xsd:import, xsd:include with a schemaLocation) are read
// from local files only, at every load (a reload refreshes them; calls
// notice a changed file within a second); at most 64 files of 16 MiB
// each. Relative locations resolve against the importing file.
//
// # Tools
//
// Without operation, ExpandOperation makes one tool per operation of the
// port: named tool_prefix + the operation name (characters MCP does not
// allow become '_'), titled with the operation name humanised ("GetOrder":
// "Get order"), annotated by its name (sdk.NameAnnotations: GetOrder and
// ListOrders read, CancelBatch destroys), described by the
// portType operation's wsdl:documentation. Each tool's config is the
// entry's config with operation set, so the host sends it back on a call.
// With operation, the entry itself is that operation's tool and what the
// operator wrote (description, schemas) wins. No output schema is derived:
// SOAP services are often laxer than their schemas, and a result that did
// not match would be refused.
//
// Bindings: soap:binding (SOAP 1.1) and soap12:binding (SOAP 1.2),
// document/literal (wrapped: the body part's element is a complex type
// whose children are the arguments) and rpc/literal (one argument per
// message part, the wrapper named after the operation in the soap:body
// namespace). rpc/encoded, use="encoded", document parts with a simple
// type or several body parts, notification operations and non-SOAP ports
// are not supported.
//
// # Schemas
//
// The XSD subset: global and local elements and element refs;
// complexType with sequence, all, choice and group refs (nested);
// attributes and attributeGroups; simpleType restrictions with
// enumeration, pattern, length, minLength, maxLength, minInclusive,
// maxInclusive, minExclusive, maxExclusive; simpleContent and
// complexContent extension (the base's content first) and restriction;
// minOccurs, maxOccurs, nillable, elementFormDefault and form; lists and
// unions as strings; xsd:any as open content. Types nest at most 12 deep;
// deeper (recursive) types accept any JSON value.
//
// The JSON form of XML (arguments and results alike):
//
//   - an element of a simple type is a JSON scalar: the integer types
//     (int, long, short, byte, unsigned..., integer) are integers, decimal,
//     float and double numbers, boolean booleans, everything else strings
//     (dateTime, date, time with a format). Enumerations become enum,
//     patterns an anchored pattern both JavaScript (u) and Go compile
//     (sdk.PortablePattern: \d as \p{Nd}, \i and \c as XML's name
//     characters, ^ and $ as plain characters), or — where neither can say
//     it (class subtraction, Unicode blocks) — left out with a warning
//     naming the facet; lengths and bounds their JSON Schema keywords.
//   - an element of a complex type is an object: child elements by local
//     name, attributes as "@name", and the text of a type with simple
//     content as "_value" (a simple-content type without attributes is
//     just its value).
//   - an element that may repeat (maxOccurs > 1) is always an array, even
//     with one item; a required one (minOccurs > 0) is [] when absent.
//   - a nillable element may be null (xsi:nil="true").
//   - choice members are all optional; the schema's description names
//     them. Required fields are those with minOccurs > 0 outside a choice.
//   - an object type refuses members it does not declare
//     (additionalProperties false), except one with open content
//     (xsd:any), which takes any further member (additionalProperties
//     true).
//
// Answers are matched by local names, so a service that puts elements in
// another namespace than its schema says is still read. Elements and
// attributes the schema does not declare are kept as generic JSON
// (strings, objects, arrays when repeated). Text that does not parse as
// its declared number or boolean type is kept as a string. An answer
// whose Body element is not an object is returned as {"result": value}.
//
// # Requests
//
// SOAP 1.1 requests are text/xml with a quoted SOAPAction header; SOAP
// 1.2 requests are application/soap+xml with action="..." in the content
// type. Namespaces get ns0, ns1... prefixes declared on the envelope;
// unqualified local elements have no namespace. Arguments are checked
// against the schema as they are written: a missing required field, a
// wrong JSON type, a value outside an enumeration, an unknown field, a
// non-array for a repeated element or a control character is a
// KindInvalidArgument error naming the argument path ("shipTo.city",
// "status[0]"). Open content (xsd:anyType, xsd:any) is written as the
// JSON form says: members become unqualified child elements, "@name"
// members attributes, "_value" the text, arrays repeated elements, null
// xsi:nil. Since its names come from the arguments, only XML names
// without a prefix (NCNames, not starting with "xml") may become element
// or attribute names; any other key, such as one holding markup or a
// prefix, is a KindInvalidArgument error naming it, and so is a value
// XML cannot carry (an object where text goes, a control character).
// Carriage returns are written as character references, so the service
// reads the text as it was sent. The call's traceparent and tracestate
// are sent unless headers set them, and the request is recorded as a
// client span when the host traces the call (httpadapter.TraceTransport).
// Redirects are not followed.
//
// # Errors
//
// Failures are *sdk.UpstreamError, with Upstream "SOAP <operation>
// <the endpoint's scheme and host>" (never its path, query or userinfo):
//
//   - a SOAP fault (1.1 faultcode/faultstring/faultactor/detail or 1.2
//     Code/Subcode/Reason/Role/Detail), whatever the HTTP status:
//     KindUpstreamStatus, Status the fault code's local name ("Client",
//     "Server", "Sender", "Receiver"), Message "SOAP fault <code>:
//     <reason>", Detail {"fault": {"code", "subcodes", "reason", "actor",
//     "detail"}, "soap_version": "1.1"|"1.2", "status_code": 500}. Dotted
//     1.1 codes (Client.Authentication) are split into code and subcodes.
//     Server and Receiver faults are retryable; Client and Sender faults
//     are Rejected.
//   - a WS-Security fault (a code or subcode FailedAuthentication,
//     InvalidSecurity, InvalidSecurityToken, FailedCheck,
//     SecurityTokenUnavailable, UnsupportedSecurityToken,
//     UnsupportedAlgorithm or MessageExpired: wrong credentials, a stale
//     token or timestamp): KindUpstreamStatus, Status that code, Message
//     "SOAP security fault <code>: <reason> (the service refused the
//     WS-Security header: check the entry's security config)", Rejected
//     and never retryable: the same call fails the same way until the
//     config changes.
//   - a non-2xx answer that is not a fault: KindUpstreamStatus, Status the
//     HTTP code, Body an excerpt, Detail {"status_code","content_type"};
//     retryable for 429, 502, 503, 504; Rejected for the other 4xx but
//     408.
//   - a 2xx answer that is not a SOAP envelope (not XML, other XML,
//     empty): KindBadResponse naming what it is; an answer larger than
//     max_response_bytes: KindBadResponse naming the limit. Elements may
//     nest at most 256 levels deep (the Envelope is level 1): a deeper
//     answer is not read, a KindBadResponse saying so (a fault that deep
//     is reported as its HTTP status).
//   - KindTransport, KindTimeout, KindCancelled as for the other adapters.
//   - KindInvalidArgument: invalid config or arguments (see Requests).
//
// # Load errors
//
// A WSDL that cannot be used — unreadable, not well-formed, WSDL 2.0, a
// remote import, no SOAP port, an unknown service or port, no usable
// operation — is an error on the field at fault (wsdl, service, port)
// naming the WSDL element, e.g. `<wsdl:import>: location
// "http://..." is not a local file`. An operation that cannot be served is
// skipped with a warning naming its element and the element at fault
// (`<wsdl:operation name="Broken">: <wsdl:part name="parameters">: element
// {urn:x}Missing is not defined`); the others load. An operation named in
// operation or operations that is missing or unusable is an error.
//
// # Performance
//
// Loaded WSDLs are cached per config; one HTTP client with keep-alive
// pools serves all calls. BenchmarkSOAPInvoke against BenchmarkSOAPDirect
// (a plain POST of a prebuilt envelope to the same loopback service)
// gives the adapter's overhead as a ratio.
//
// # Deferred-status jobs
//
// A SOAP batch that answers a ticket at once and reports its status
// through a second operation is served by the host's async_job family;
// the adapter only makes unary calls. Write the start as its own entry
// with mode async_job and operation set (so the entry is exactly that
// operation's tool and its family is {name}_start, _status, _result,
// _cancel), and the status and cancel operations as unary tools, here of
// one entry with operations and tool_prefix. The job block names those
// tools and reads the normalised JSON of their answers:
//
//	operations:
//	- name: invoice_batch
//	  adapter: soap
//	  mode: async_job
//	  timeout: 5m                          # the job's whole run
//	  job:
//	    status_operation: batch_GetBatchStatus
//	    status_arguments: {ticket: $.ticket}   # from SubmitBatchResponse
//	    poll_interval_ms: 500
//	    done_path: $.done                  # xs:boolean: true or false
//	    status_path: $.state
//	    progress_path: $.percent
//	    error_path: $.error                # once done, a non-empty error fails the job
//	    result_path: $.result
//	    cancel_operation: batch_CancelBatch
//	    cancel_arguments: {ticket: $.ticket}
//	  config: {wsdl: soap.wsdl, service: BatchDesk, operation: SubmitBatch}
//	- name: batch_tickets
//	  adapter: soap
//	  config: {wsdl: soap.wsdl, service: BatchDesk, operations: [GetBatchStatus, CancelBatch], tool_prefix: batch_}
//
// Without operation, an async_job entry would expand into one job family
// per operation of the port, each polling the same status operation: name
// the start operation. A fault of the status operation counts as a failed
// poll (the host fails the job after three in a row, with the fault's
// message); a status answer that reports the failure goes through
// error_path. The demo SOAP service's batch desk (demo/soap.go, served by
// `make run` as invoice_batch) is this example.
//
// # Not yet
//
// MTOM/XOP attachments, WS-Addressing, WS-Security encryption, checking
// the signatures of answers, fetching WSDLs over HTTP, and rpc/encoded are
// not supported.
package soap
