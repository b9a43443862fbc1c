// Package proto is the home of Crank's versioned adapter protocol, its own
// Go module (github.com/crankmcp/crank/proto) that depends on protobuf and
// gRPC only. The Go code under crank/adapter/v1 is generated from
// adapter.proto and committed; regenerate it with `make proto` from the
// repository root after editing the .proto.
//
// Adapter authors do not import the generated code: the SDK
// (github.com/crankmcp/crank/plugins/sdk) hides it behind its own types.
package proto
