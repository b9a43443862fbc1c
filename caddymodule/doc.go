// Package caddymodule is Crank's face in Caddy: module registration,
// Caddyfile and JSON config and their validation, the modules' lifecycle,
// routing into the MCP server and the built-in adapter subcommand. The MCP
// server is package host/mcpserver and the runtime package host; this
// package translates Caddy config into them and decides nothing itself.
//
// Three modules are registered:
//
//   - crank (an app): the state store (an embedded etcd by default, or an
//     external etcd cluster), shared by every handler and kept across
//     config reloads in a caddy.UsagePool. Its Start opens the store and
//     starts the handlers of its config.
//   - http.handlers.crank: serves MCP Streamable HTTP for the operations of
//     its operations files, and of an operations catalog in etcd
//     (catalog.go), through an mcpserver.Endpoint. Provision checks
//     the config and the operations files and starts nothing; the crank
//     app's Start starts the adapters (host.New) and attaches the host to
//     the endpoint — for a catalog, through a catalog.Follower that
//     builds and attaches a new host for every version. Adapter processes
//     and MCP endpoints are kept in UsagePools too, so a reload (or a new
//     catalog version) neither restarts healthy adapters nor drops MCP
//     sessions.
//   - admin.api.crank: the admin API's /crank/ routes: the adapter
//     processes this Caddy runs, and the catalog, endpoint and live-state
//     routes of package host/admin (docs/admin-api.md).
//
// So `caddy adapt` starts nothing, and no command starts an etcd or binds a
// port before Start. Caddy's validate command (`crank validate`) is the
// one exception to a Provision free of side effects: there a handler runs
// the load Start would run, short of serving, with adapters of its own
// that it stops before Provision returns (load.go). Caddy starts apps in no fixed order: a
// request that reaches a handler before the crank app has started it waits
// for that, bounded by the request's context.
//
// Importing this package also registers the `crank-adapter` subcommand,
// which runs a built-in adapter (rest, ...) as a child process of the same
// executable: one binary ships the gateway and its adapters while adapters
// stay out of process.
// It registers the `ops` subcommand too (opscmd.go): a client of the
// admin API's catalog routes for operators and CI.
package caddymodule
