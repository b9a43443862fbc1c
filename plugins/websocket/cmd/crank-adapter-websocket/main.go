// Command crank-adapter-websocket is the WebSocket adapter of Crank as a
// standalone plugin executable. The Crank host launches it through
// hashicorp/go-plugin; it is not meant to be run by hand.
package main

import (
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/websocket"
)

func main() { sdk.Serve(websocket.New()) }
