// Command crank-adapter-graphql is the GraphQL adapter of Crank as a
// standalone plugin executable. The Crank host launches it through
// hashicorp/go-plugin; it is not meant to be run by hand.
package main

import (
	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
)

func main() { sdk.Serve(graphql.New()) }
