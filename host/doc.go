// Package host is Crank's runtime: the operation catalog, argument
// validation, secret redaction, adapter process supervision and the
// dispatch of tool calls to adapters.
//
// It never imports Caddy and knows nothing of HTTP or MCP framing: the Caddy
// module (package caddymodule) translates MCP requests into [Host.Call] and
// results back, so host can be used and tested on its own.
//
// The path of a call:
//
//	Host.Call(tool, arguments)
//	  → catalog lookup (unknown tool → ErrUnknownTool)
//	  → input-schema validation (isError result naming the field)
//	  → Supervisor.Client (starts or restarts the adapter process)
//	  → adapter Invoke over go-plugin gRPC, bounded by the operation timeout
//	  → Result (structured content + text, or isError), secrets redacted
//
// Adapter processes are managed by [Supervisor]: one per adapter
// executable, started through hashicorp/go-plugin with AutoMTLS, health-
// pinged in the background and restarted with backoff on the call after a
// crash. Supervisors are shared and reference counted by the caller (the
// Caddy module keeps them in a caddy.UsagePool across config reloads).
package host
