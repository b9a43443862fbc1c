// Command crank is Caddy with the Crank MCP gateway compiled in — what
// `xcaddy build --with github.com/crankmcp/crank/caddymodule` produces — plus
// the demo upstream used by `make run`. The same executable runs Crank's
// built-in adapters as child processes (`crank crank-adapter <name>`).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/crankmcp/crank/caddymodule"
	_ "github.com/crankmcp/crank/demo"
)

func main() {
	caddycmd.Main()
}
