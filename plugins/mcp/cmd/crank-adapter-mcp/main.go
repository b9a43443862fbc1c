// Command crank-adapter-mcp is the MCP upstream adapter of Crank as a
// standalone plugin executable. The Crank host launches it through
// hashicorp/go-plugin; it is not meant to be run by hand.
package main

import (
	mcpadapter "github.com/crankmcp/crank/plugins/mcp"
	"github.com/crankmcp/crank/plugins/sdk"
)

func main() { sdk.Serve(mcpadapter.New()) }
