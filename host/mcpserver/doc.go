// Package mcpserver is Crank's MCP server: an [Endpoint] serves MCP
// Streamable HTTP (through the official go-sdk) for the tools of a
// [host.Host], with what Crank adds to the SDK. It knows nothing of Caddy:
// the Caddy module (package caddymodule) builds an endpoint from its
// config with [New], routes requests to [Endpoint.ServeHTTP] and attaches
// the host of each config it starts. A request that arrives before the
// first host is attached waits for it, bounded by its own context; one
// still waiting when the endpoint is closed gets 503 with Retry-After.
//
//	ep, err := mcpserver.New(mcpserver.Options{Workspace: "default", Resumable: true, ...})
//	http.Handle("/mcp", ep)   // requests wait for the first Attach
//	ep.Attach(h, st)          // h serves the calls; st (a *store.Etcd) keeps sessions and events
//	...
//	ep.Attach(h2, nil)        // h2's tools replace h's; clients get tools/list_changed
//	                          // (and again when an entry of h2 expands to other tools: host.Watch)
//	ep.Detach(h)
//	ep.Close()
//
// What the package adds to go-sdk, by file:
//
//   - endpoint.go: the endpoint, its tool publication and the translation
//     of tools/call into [host.Host.Call] (a window's chunks become
//     progress notifications).
//   - plan.go: the call plan, what the outermost middleware resolves once
//     per request (the attached host, its view, the caller and, for a
//     tools/call, the [host.Tool] called and the policy's decision) and
//     everything inside reads.
//   - origin.go: the Host check (403 for a non-loopback Host on a loopback
//     address) and the Origin check (403 for a browser origin not allowed).
//   - peek.go: the one bounded read of a POST's body before the SDK reads
//     it, for the checks below.
//   - transport.go: request checks the SDK gets wrong, SSE keep-alives and
//     the priming event's retry field.
//   - generation.go: both protocol generations on a stateful endpoint:
//     server/discover and 2026-07-28 requests are served sessionlessly,
//     beside the sessions of the older protocol.
//   - events.go: the SDK's EventStore over the store's event logs, so a
//     client resumes a dropped SSE stream with Last-Event-ID on any
//     replica; primeflush.go: the priming event's flush held back, and a
//     POST stream's events kept only once it outlives its first write
//     (a fast unary call writes nothing to etcd).
//   - sessions.go: MCP sessions across replicas: each session is recorded
//     in the store, and a replica serves a session it does not hold by
//     rebuilding it from its record.
//   - caller.go: the caller's identity (workspace and agent), which scopes
//     stream sessions, jobs and tasks and counts against quotas.
//   - tasks.go, taskwire.go, taskheader.go, taskext.go, results.go: MCP
//     Tasks for async_job operations (protocol 2025-11-25, and the
//     2026-07-28 tasks extension), which the SDK lacks.
package mcpserver
