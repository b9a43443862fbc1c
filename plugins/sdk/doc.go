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
// Helpers every adapter needs for its configs live here too: [Suggest]
// (did-you-mean hints for unknown fields) and [ConfigCache] (parse a config
// once, not on every call).
//
// Package httpadapter holds what adapters of HTTP upstreams share. Package
// sdktest runs an adapter in-process over real gRPC for its own unit tests.
package sdk
