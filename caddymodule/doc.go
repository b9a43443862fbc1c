// Package caddymodule is Crank's face in Caddy: module registration,
// Caddyfile and JSON config, the MCP Streamable HTTP transport and the
// built-in adapter subcommand. It translates between Caddy/MCP and the
// runtime in package host; it decides nothing itself.
//
// Two modules are registered:
//
//   - crank (an app): process-wide things, the state store (an embedded
//     etcd by default, or an external etcd cluster), shared by every
//     handler and kept across config reloads in a caddy.UsagePool.
//   - http.handlers.crank: serves MCP Streamable HTTP (through the official
//     go-sdk) for the operations of one operations file. Adapter processes
//     and MCP endpoints are kept in UsagePools too, so a reload neither
//     restarts healthy adapters nor drops MCP sessions. MCP sessions are
//     recorded in the store, and a replica serves a session it does not
//     hold from that record (package host/mcpserver).
//
// Importing this package also registers the `crank-adapter` subcommand,
// which runs a built-in adapter (rest, ...) as a child process of the same
// executable: one binary ships the gateway and its adapters while adapters
// stay out of process.
package caddymodule
