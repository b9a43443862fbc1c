// Package mcptest holds test helpers shared by the MCP server
// (host/mcpserver), caddymodule and e2e tests: a raw JSON-RPC client for
// MCP Streamable HTTP (for what no SDK client speaks, such as MCP Tasks),
// loopback upstreams (users, and a slow report endpoint whose requests a
// test releases or watches being cancelled), and the check of an Origin
// refusal. It is for tests only.
package mcptest
