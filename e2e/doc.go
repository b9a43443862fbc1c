// Package e2e holds Crank's end-to-end tests and benchmarks. They build the
// crank executable (Caddy with the Crank module), start it on free loopback
// ports with a temporary Caddyfile and an embedded etcd, and drive it with
// real MCP clients — the go-sdk client and the official TypeScript SDK
// (e2e/ts) — against real loopback HTTP upstreams.
package e2e
