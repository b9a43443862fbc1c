// Package sdk is what a Crank adapter imports.
//
// An adapter turns one family of upstream APIs into operations the Crank
// host can call. It runs as its own process, launched by the host through
// hashicorp/go-plugin, and speaks the versioned gRPC protocol
// crank.adapter.v1. This package hides that protocol behind its own Go
// types: an adapter never handles generated code.
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
//	func main() {
//		if err := sdk.Serve(myAdapter{}); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Optional behaviour is discovered through interfaces: an adapter that
// implements [OperationValidator] checks operation configs at load time; one
// that implements [OperationExpander] derives tools and their schemas from an
// operations-file entry (an OpenAPI document, a gRPC service, a GraphQL
// document); one that implements [Streamer] serves upstream streams. The
// host learns these capabilities from Describe's answer, which the SDK
// fills in.
//
// A call that follows work living upstream (an MCP upstream's task) can
// outlive the gateway replica that makes it: with [Description].Resume an
// adapter reports what another call needs to follow that work
// ([ReportResume]), and a replica that takes the call's job over calls
// the operation again with it ([Request].Resume); a call whose host died
// ends with [ErrHostGone] ([HostGone]), and the adapter leaves the work
// running.
//
// Failures of the upstream are returned as *[UpstreamError]; the host turns
// them into tool results with isError set. Its Kind says what failed,
// Retryable whether repeating the call may succeed. Any other error (and a
// panic) fails the one call as a bug in the adapter; a panic is logged by
// its type and stack, never its value. A goroutine the adapter starts
// itself defers [Recover], so that its panic fails its call too instead of
// ending the process.
//
// [Serve] runs the adapter as the host's child process. [WithManagedDebug]
// runs it in the foreground instead, under a debugger, and prints the
// [ReattachEnv] line that makes a gateway attach to it rather than launch
// it; [WithDebug] serves it inside a test.
//
// An adapter declares its operation config once, as a Go struct: [Config]
// decodes it (every unknown field reported with a did-you-mean hint),
// derives the JSON Schema that Describe publishes and caches its prepared
// form, so a call does not parse the config again. [Diagnostics] collects
// problems by field, [Suggest] gives did-you-mean hints and
// [Operation.ResolvePath] resolves paths against the operations file.
//
// The module's README is the author guide, from the interfaces to
// shipping the binary; examples/filetail is a complete adapter in a module
// of its own, to start from.
//
// The other packages of this module, by audience:
//
//   - sdk/adaptertest, for an adapter's tests: runs it in-process or as
//     its built executable, the way the host does, with results in this
//     package's types.
//   - sdk/httpadapter, for adapters of HTTP upstreams: failure
//     classification, bounded reads, configured headers.
//   - sdk/client, for hosts: launches adapters (or attaches to one served
//     in debug mode) and calls them in this package's types.
package sdk
