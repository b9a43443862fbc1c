// Package sdk is what a Crank adapter plugin imports.
//
// An adapter turns one family of upstream APIs into operations the Crank
// host can call. It runs as its own process, launched by the host through
// hashicorp/go-plugin, and speaks the versioned gRPC protocol in
// github.com/crankmcp/crank/proto/crank/adapter/v1. This package hides that
// protocol behind plain Go types:
//
//	type myAdapter struct{}
//
//	func (myAdapter) Describe(ctx context.Context) (*sdk.Description, error) {
//		return &sdk.Description{Name: "acme", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
//	}
//
//	func (myAdapter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
//		// call the upstream with req.Operation.Config and req.Arguments
//		return &sdk.Result{Structured: json.RawMessage(`{"ok":true}`)}, nil
//	}
//
//	func main() { sdk.Serve(myAdapter{}) }
//
// Optional behaviour is discovered through interfaces: an adapter that
// implements [OperationValidator] checks operation configs at load time; one
// that implements [OperationExpander] derives tools and their schemas from an
// operations-file entry (an OpenAPI document, a gRPC service, a GraphQL
// document); one that implements [Streamer] serves upstream streams.
//
// Failures of the upstream are returned as *[UpstreamError]; the host turns
// them into tool results with isError set. Any other error is treated as a
// bug in the adapter.
//
// An adapter declares its operation config once, as a Go struct: [Config]
// decodes it (every unknown field reported with a did-you-mean hint),
// derives its JSON Schema and caches its prepared form, so a call does not
// parse the config again. [Suggest] and [ValidHeaderValue] help with the
// rest.
//
// Package sdktest runs an adapter in-process over real gRPC for its own unit
// tests.
package sdk
