// Command crank-adapter-soap is the SOAP adapter of Crank as a standalone
// plugin executable. The Crank host launches it through hashicorp/go-plugin;
// it is not meant to be run by hand.
package main

import (
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/soap"
)

func main() { sdk.Serve(soap.New()) }
