// Package mcptest holds test helpers shared by the caddymodule and e2e
// tests: a raw JSON-RPC client for MCP Streamable HTTP (for what no SDK
// client speaks, such as MCP Tasks) and a loopback upstream with a slow
// report endpoint whose requests a test releases or watches being
// cancelled. It is for tests only.
package mcptest
