// Package proto holds Crank's versioned adapter protocol. The Go code under
// crank/adapter/v1 is generated from adapter.proto and committed; regenerate
// it with `go generate ./proto` (or `make proto`) after editing the .proto.
package proto

//go:generate go run ./internal/protogen
