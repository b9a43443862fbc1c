// Package mcp is Crank's MCP upstream adapter: it federates existing MCP
// servers behind Crank's endpoint, so that their tools are served beside
// the REST, GraphQL, gRPC, SOAP and WebSocket ones, under the same
// identity, isolation, redaction and limits. It runs as an adapter plugin
// (the built-in "mcp", or cmd/crank-adapter-mcp) and is built on the
// adapter SDK and the MCP go-sdk client only.
//
// # Upstreams
//
// An entry's config names one upstream MCP server, either
//
//   - url: a Streamable HTTP endpoint (http:// or https://), with optional
//     headers (credentials from placeholders, e.g. "Bearer {env.TOKEN}")
//     and tls; stateful and stateless servers alike, at the protocol
//     version the go-sdk client and the server agree on. Redirects are
//     followed (at most 5) only within the url's origin: one to another
//     origin fails the call naming both origins (never a path or query),
//     so the configured headers never reach another host; or
//   - command (with args and env): a server the adapter starts as a child
//     process and speaks to over stdio. A command with a slash is relative
//     to the operations file; a bare name is found on PATH. The child gets
//     a minimal environment (PATH, HOME, TMPDIR, TZ and the locale) plus
//     env, taken literally, as adapters themselves do: tokens in the
//     gateway's or the adapter's environment never reach it. On Linux the
//     child gets SIGKILL when the adapter dies (Pdeathsig), so it never
//     outlives it; a session that closes ends its child by closing its
//     input, then SIGTERM after 2s, then SIGKILL.
//
// An upstream that is not an MCP server the adapter can speak to fails
// the handshake at once, with an error naming it (a KindBadResponse
// failure, not retryable, and a load error at expansion): one that answers
// initialize with a protocol version the adapter does not speak (it asks
// for 2025-11-25 after trying sessionless server/discover) or refuses the
// adapter's (naming the versions it supports, when it says), or answers
// with something other than JSON-RPC 2.0, such as an HTML page or a
// response to a request the adapter never sent (which the go-sdk client
// would otherwise ignore, waiting for the call's timeout). An upstream
// that does not answer at all fails when the timeout passes.
//
// max_message_bytes (default 8 MiB, at most 48 MiB) bounds one message
// from the upstream: a line over stdio, an SSE event or a JSON body over
// HTTP. The adapter stops reading at the bound, so memory stays bounded,
// and the call fails with a clear error naming the bound; the session is
// closed and the next call opens a new one.
//
// # Tools
//
// At load (ExpandOperation) the adapter connects to the upstream, lists
// its tools (every page) and makes each one a Crank tool with the
// upstream's input and output schemas, title, description and
// annotations. prefix is put before every name; include and exclude are
// glob patterns (path.Match) over the upstream names, exclude winning;
// rename maps an upstream name to the Crank name (before prefix). Two
// upstream tools that end up with one name fail the load naming both. An
// entry with tool set stands for that one upstream tool alone, under the
// entry's own name. Each derived tool's config is the entry's connection
// fields plus tool, so a call needs no listing.
//
// # Changed tools
//
// The adapter watches its expansions (sdk.OperationWatcher): it remembers
// which entries it expanded against which upstream connection and, when
// the upstream sends notifications/tools/list_changed or a session is
// opened again after a lost one (the upstream may have restarted with
// other tools), names those entries to the gateway, which expands them
// again and tells its clients (notifications/tools/list_changed) when
// their tools changed. Changes are heard while the adapter holds the
// upstream's session: opened at expansion and kept; after a loss, from
// the next call on.
//
// # Resources and prompts
//
// An entry may also serve the upstream's resources and prompts: with
// resources true its resources and resource templates, with prompts true
// its prompts. Both are off by default (publishing them is the operator's
// choice) and are a load error with tool (an entry for one tool publishes
// nothing else); they are not connection fields, so an entry with them
// shares the upstream session of one without. At load and at each
// re-expansion the adapter lists every page of resources/list,
// resources/templates/list and prompts/list (sdk.Publisher) and publishes
// each as the upstream's object, with prefix before its name; URIs and URI
// templates are kept, so a client reads a resource under the upstream's
// own URI. include, exclude and rename select and name tools only. An
// upstream that does not have the resources or prompts capability gets a
// warning naming the field; an upstream that cannot be reached fails the
// load as for its tools. An entry that publishes what its upstream offers
// expands without error even when it serves no tools (the upstream has
// none, or include selects none).
//
// A read is one resources/read of the client's URI (a published
// resource's, or one a published template matches) on the shared session,
// answering the result's contents (text or blob) as they came, with the
// upstream's caching hints (ttlMs, cacheScope) when the session speaks
// 2026-07-28 and the upstream gave them; rendering
// a prompt is one prompts/get of the upstream prompt (each published
// prompt's config names it in prompt, beside the connection fields) with
// the client's arguments, answering the whole result. Both are retried on
// a new session like a listing, and fail like calls: a JSON-RPC error
// (such as resource not found) keeps its code as the status and its
// message. An input-required result of either (SEP-2322) is answered,
// when the host takes it (sdk.PromptRequest.ClientCapabilities), as
// *sdk.InputRequired with the upstream's requests and state, and the
// host's retry (Input) sends the client's answers with that state; the
// upstream's own requests during a read are refused (ask.go, readInput).
// The upstream's notifications/resources/list_changed and
// notifications/prompts/list_changed name the entries that publish them
// to the gateway, which expands them again (see Changed tools). Where
// the upstream offers them, completions of the published prompts' and
// templates' arguments (completion/complete) and subscriptions to the
// published resources (resources/subscribe, its
// notifications/resources/updated) are relayed too (complete.go).
//
// # Calls
//
// A call is a tools/call on the upstream with the client's arguments as
// they came. The result's content blocks, of every type, are passed on
// unchanged (sdk.Result.Content: the gateway serves them as the tool
// result's content), its structuredContent becomes the tool's structured
// result, and the text blocks joined are the readable rendering (logs,
// jobs). An isError result (its text as the message, its
// structuredContent as the detail, its content blocks as the Content the
// gateway serves unchanged), a JSON-RPC error (its code kept as the
// status, its message as the message, the whole error as the Protocol
// error the gateway answers its client with), a timeout or a broken
// connection become an UpstreamError; a failure that is not the
// upstream's own answer is the usual isError result naming the upstream
// ("mcp host:port" or "mcp stdio <command>", never a URL's path, query or
// userinfo). An application/json answer with more than one JSON value is
// such a failure at once (bounds.go), not a call that waits for its
// timeout.
//
// # Progress
//
// When the client asked for the progress of a call (the gateway calls
// through InvokeWithProgress; sdk.WantsProgress), the tools/call carries
// a progress token of the adapter's own, never the client's, and each
// notifications/progress the upstream sends for it is relayed
// (sdk.ReportProgress) with its progress, total and message; the gateway
// sends it to the client with the client's token. Without that request
// the upstream is not asked for progress. The notifications of all calls
// on a shared session are routed by token; those of one call wait in a
// buffer of 256, beyond which a flood is dropped (bounded memory, and the
// shared session's reading never waits on a slow client).
//
// # Log messages
//
// When the client has set a logging level (the gateway asks through
// InvokeWithProgress; sdk.WantsLog), the adapter lowers the upstream
// session's level to it (logging/setLevel, only ever down, when the
// upstream has the logging capability; also the call's _meta
// io.modelcontextprotocol/logLevel, for 2026-07-28 upstreams) and relays
// the upstream's notifications/message for the call at that level and
// above (sdk.ReportLog). Since a log message names no request and the
// session is shared, the adapter attributes messages itself: the call gets
// a random tag, never sent upstream, and the messages read from the
// call's own Streamable HTTP response stream (where go-sdk and TypeScript
// servers send a request's log messages) are tagged with it as they are
// read; a message read elsewhere (over stdio, or on the standalone stream)
// is tagged for the one call in flight on the session, and dropped when
// several or none are, so a caller never gets a message that may be
// another's. The call waits after its result until the session has handed
// over the messages read for it (at most 5s). 256 wait per call; beyond,
// they are dropped. A window relays no log messages.
//
// # Windows over upstream progress
//
// With mode: window (on an entry with tool), a call is a window over the
// upstream tool's progress (Stream): the tools/call carries a progress
// token of the adapter's own, and each notifications/progress the upstream
// sends for it is one item: its message when that is JSON, else the
// message as a string, or {"progress": n, "total": t} without a message.
// The gateway collects, aggregates and relays the items under the
// window's limits like any stream's (each to the client as progress with
// the client's own token), and ends the upstream call when it stops the
// window. The call's result ends the stream; an isError result or a
// failure ends it with that error. Notifications dropped from the call's
// buffer are reported as a gap. Since the go-sdk client hands
// notifications over apart from responses, a call with a progress token
// (window or relayed) waits after the result for stragglers until one
// reports the total, none came for 200ms (100ms when none came at all), or
// 5s passed; later ones are not passed on.
//
// # Jobs
//
// With mode: async_job (on an entry with tool) the gateway runs the
// upstream call in the background as a job (x_start, x_status, x_result,
// x_cancel, and MCP Tasks for clients that speak them), like any unary
// operation; cancelling the job cancels the upstream call
// (notifications/cancelled for a plain call, tasks/cancel for a task).
//
// # Upstream MCP Tasks
//
// A tool whose config has task: true is called as an MCP Task (protocol
// 2025-11-25): a task-augmented tools/call creates the task; tasks/get
// follows it every pollInterval the upstream suggests (clamped to
// 100ms..5s; 1s without one), its statusMessage relayed as progress when
// the client asked for progress; once the task has ended (completed,
// failed, cancelled) or needs input (input_required), tasks/result gives
// the tools/call result, which becomes the tool's result as a plain
// call's does (a failed task is an UpstreamError with the task's status
// message). A cancelled call (a cancelled job, the operation's timeout)
// sends tasks/cancel for the task. Log messages are not relayed for a
// task. Expansion sets task: true on the tools whose
// execution.taskSupport is "required" (which refuse a plain call), except
// in a window, which follows a plain call's progress; task: true set in
// an entry on a tool whose taskSupport is absent or "forbidden", or on an
// upstream without capabilities.tasks.requests.tools.call, is a load
// error naming the field task and the tool, and task is refused with
// mode: window.
//
// The go-sdk client has no Tasks API, so the adapter sends these requests
// on the session itself (raw.go), with ids of its own; it reads the tools'
// execution and the upstream's capabilities, which the go-sdk types drop,
// from the raw tools/list and handshake. An async_job entry over such a
// tool is a Crank job over the task call, so a client that cannot do
// Tasks gets the job tools, and one that can gets MCP Tasks from the
// gateway. A job's task over Streamable HTTP survives the replica that
// started it (resume.go): the call reports the task, its upstream session
// and a fingerprint of the url as its resume state (sdk.ReportResume),
// and the replica that adopts the job calls the tool again with it
// (sdk.Request.Resume), following the same task on the same session
// (tasks/get, tasks/result, tasks/cancel) without a session of its own;
// the dying replica's adapter does not cancel the task (sdk.HostGone). A
// task of an upstream started as a command dies with the adapter that
// started it: it reports no resume state, and its job fails with
// owner_lost (retryable) when its replica dies, as a job over a plain call
// does. An input_required task gets no
// elicitation through the gateway: the adapter offers none (a conforming
// upstream does not ask, as server-everything's research query does not,
// and one that asks is refused), so the upstream goes on without the
// input or fails the task.
//
// # Sessions
//
// Upstream sessions are the adapter's business. One upstream session is
// shared by every call of every agent to the same upstream (same url,
// headers and tls, or same command, args and env): an upstream sees the
// gateway as one client, authenticated by the configured headers only.
// The client's own token is never passed on — the adapter never receives
// it. A session opens at the first use and is kept; when the upstream
// forgets it (HTTP 404, a restarted server) or the connection breaks (a
// child process that exited), the call in flight fails with a clear,
// retryable error unless it had not reached the upstream (a 404 on
// sending), in which case it is sent again on a new session; the next
// call opens a new session either way. A request the transport could not
// send at all (a pooled connection the upstream had closed) is sent again
// once on the same session. A session that ends by itself (its stream
// closed, its child process exited) is forgotten at once, and a child
// process that exits is started again at the next call. At most 64 upstream connections are
// kept; beyond that the least recently used is closed (headers that differ
// per caller, such as an exchanged token, make a connection each).
//
// Sampling, elicitation and roots requests an upstream makes during a
// unary call go to the call's client through the gateway
// (sdk.AskClient), and its answer back: see ask.go for how a request
// finds its call and what a client that lacks a capability answers. Such
// a call goes on a session that declares its client's capabilities and
// MCP Apps extension (callConn), shared by the clients that declare the
// same, so the upstream asks as it would that client; the shared session
// above declares all the gateway relays. A tool's _meta (an MCP App's
// ui.resourceUri) is passed on with it (sdk.Tool.Meta). Log
// messages an upstream sends outside any call are not relayed; resources
// and prompts are served on request, and resource subscriptions relayed
// (see Resources and prompts).
package mcp
