// Command crank-adapter-grpc is the gRPC adapter of Crank as a standalone
// plugin executable. The Crank host launches it through hashicorp/go-plugin;
// it is not meant to be run by hand.
package main

import (
	grpcadapter "github.com/crankmcp/crank/plugins/grpc"
	"github.com/crankmcp/crank/plugins/sdk"
)

func main() { sdk.Serve(grpcadapter.New()) }
