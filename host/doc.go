// Package host is Crank's runtime: it binds a loaded operations file
// (package host/opsfile) to its adapters, expands entries into the tools
// they stand for and serves them: argument validation, adapter process
// supervision, the dispatch of tool calls to adapters, windows (the
// window engine, package host/window, fed from the upstream), session and
// async_job families on the shared store, and the redaction (package
// host/redact) of everything that leaves it.
//
// It never imports Caddy and knows nothing of HTTP or MCP framing: the MCP
// server (package host/mcpserver) translates MCP requests into [Host.Call]
// and results back, so host can be used and tested on its own.
//
// The path of a call:
//
//	Host.Call(CallRequest{Tool: h.Tool(name), Arguments: …})
//	  → the Tool, resolved once by the caller (one the host does not
//	    serve → ErrUnknownTool)
//	  → input-schema validation (isError result naming the field)
//	  → Supervisor.Client (starts or restarts the adapter process)
//	  → adapter Invoke over go-plugin gRPC, bounded by the operation timeout
//	    (mode window: Stream or repeated Invoke, bounded by the window)
//	  → Result (structured content + text, or isError), secrets redacted
//
// # Window mode
//
// An operation with mode: window turns an endless upstream (an SSE stream,
// a long-poll endpoint) into one bounded tool result. [Host.Call] opens the
// upstream — the adapter's Stream RPC for transport_behavior server_stream,
// repeated Invoke calls for request_response — collects until a limit ends
// the window, cancels the upstream call at once (early cut-off: the adapter
// stops reading and closes the connection) and answers one result. While
// it collects, each counted item (or, for aggregation_mode text, the text
// as it grows) goes to CallRequest.Progress, which the MCP endpoint turns
// into progress notifications when the client sent a progress token.
//
// An entry's fields, their defaults and bounds are the operations file's
// ([opsfile.OperationDecl]); a window's blocks, transport_behavior,
// limits, aggregation and safety, become a [window.Config].
//
// A document is one stream event's data or one poll answer. Without
// items_path a JSON array is split into its elements and anything else is
// one item. Each item passes the safety layer where it leaves the adapter
// boundary, in this order: redacted_paths (applied to the document and to
// each item, before anything is extracted, counted, sent as progress or
// logged), max_field_length, drop_duplicates, sampling_rate. Secrets
// expanded from placeholders are redacted from results, progress, stored
// records and logs too, in their encoded forms as well ([redact.Redactor]); a
// string max_field_length cuts has them redacted before the cut, so a
// cut through a secret never leaves a part of it. A text window's
// progress messages carry its joined text as it grows, redacted as a
// whole: an end of the text that may begin a secret is held back until
// the next chunk shows whether it does (or the window ends), so a secret
// the upstream split between two chunks is not shown half in each.
//
// A window tool's input schema gains an optional "cursor" argument (the
// name is reserved) and its output schema is fixed (an operator-written
// output_schema is refused):
//
//	items            the kept items (raw_items: all; summary_plus_samples: samples)
//	summary          per mode: {count, counts, upstream} | stats | {count, keys, state} | {text, finish_reason, usage, chunks}
//	stats            received, counted, returned, dropped_duplicates, sampled_out,
//	                 skipped_oversize, fields_truncated, redacted, bytes, duration_ms, polls, retries
//	truncated        data was left out: max_items or max_bytes cut the window, or
//	                 items or fields were cut or skipped, or the upstream reported a gap
//	window_complete  the window ran its course (window_duration, done, upstream_end)
//	has_more         the upstream may have more (false after done or upstream_end)
//	cursor           pass it back as the cursor argument to continue (sealed:
//	                 only a cursor a window of the tool returned is taken, cursor.go)
//	end_reason       window_duration | max_items | max_bytes | upstream_timeout |
//	                 idle_timeout | done | upstream_end | upstream_error | cancelled
//	status, gaps, error
//
// When the adapter derived the schema of one upstream item
// (ExpandOperation's Tool.item_schema_json, e.g. an SSE event's data),
// items of raw_items and summary_plus_samples windows are described by it,
// widened to what the safety layer makes of items: its $defs move to the
// output schema's root, a member a redacted path ends in may also be
// "[REDACTED]", and a string whose form or length the schema constrains
// may also end in the truncation mark; a redacted path ending in an index,
// a wildcard or a filter leaves items undescribed.
//
// An entry's tools can change while the host serves them: an adapter
// that watches its expansions (Capabilities.Watch, e.g. the mcp adapter
// when an upstream's tools change) names the entries to expand again, and
// [Host.Reexpand] checks the new tools as a load does and replaces the
// table of tools served in one step; a failed expansion keeps the last
// good tools. [Host.Watch] listens while the host is served (the MCP
// endpoint starts it on Attach and ends it on Detach).
//
// A tool an entry expands to may carry its own mode and window config
// (Tool.mode, Tool.execution_json: an OpenAPI operation that answers a
// stream, with its override's limits). It is checked as an entry's, each
// problem naming the entry, the tool and the field; it replaces the
// entry's window config, and the tool's call timeout is its
// window_duration_ms plus 5s. The entry itself keeps a window config its
// operator wrote.
//
// Limits are not failures: a window cut by a limit or a timeout is a normal
// result with its flags. An upstream failure (an error status, a broken
// connection that cannot be reopened, an adapter crash) is an isError
// result whose structuredContent still holds the partial window and its
// error. When a limit stops a window inside a document (a poll page of many
// items), the cursor points inside it, so the next window starts at the
// first item left out. An item larger than max_bytes is skipped (a gap),
// so one huge item cannot block a stream.
//
// Preset openai_chat makes an OpenAI-compatible chat completions stream
// (vLLM, Ollama, llama.cpp server) a streaming text tool: mode window,
// server_stream, aggregation_mode text over $.choices[0].delta.content,
// finish reason and usage, limits of 120s / 100000 chunks / 8 MiB (60s for
// the server to answer), and a {messages, temperature, max_tokens} input
// schema.
// What the entry writes wins field by field. The adapter config sends the
// request, e.g. the REST adapter's body_fields: {model: ..., stream: true}.
//
// # Session and async_job modes: tool families
//
// A session or async_job operation is published as a family of tools
// (see [opsfile.Family]) whose state lives in the shared store of Options.Store
// ([Store]), so any replica serves any of them: follow_logs_start,
// follow_logs_poll and follow_logs_stop for a session named follow_logs;
// build_report_start, _status, _result and _cancel for an async_job (the
// family block renames them; [opsfile.FamilyNames]). A session reads its upstream
// as a window does, bounded by idle_timeout_ms and max_session_lifetime_ms
// instead of a window's duration, into a buffer in the store of at most
// max_items and max_bytes. An async_job runs the operation itself (one
// request, or the window its transport_behavior and limits describe), or,
// with job.status_operation, follows the upstream's own job ([opsfile.JobConfig]).
//
// The start tool takes the operation's arguments and answers at once with
// the session or job ID; the work runs in the background on the replica
// that started it, until it ends, is stopped or cancelled (from any
// replica: the runner watches its record), idles out or reaches its
// lifetime or timeout. A client disconnect stops nothing. Polls return the
// items after a cursor (the same cursor returns the same first items, plus
// any that arrived since), with
// has_more, status, gaps and end_reason; result returns ready: false until
// the job is final. Every family call is audited (Options.Audit) and starts
// are bounded by Options.Quotas: open sessions and jobs per workspace and
// per agent (zero: none; the crank handler's defaults are
// DefaultStreamSessionsPerWorkspace and its siblings), and the sessions and
// jobs running on the replica ([ReplicaLimits]). [Host.StartTask] and its siblings serve
// the same jobs as MCP tasks.
//
// Adapter processes are managed by [Supervisor]: one per adapter
// executable, started through hashicorp/go-plugin with AutoMTLS, health-
// pinged in the background and restarted with backoff on the call after a
// crash. Supervisors are shared and reference counted by the caller (the
// Caddy module keeps them in a caddy.UsagePool across config reloads).
package host
