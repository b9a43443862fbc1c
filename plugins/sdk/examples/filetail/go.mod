module github.com/crankmcp/crank/plugins/sdk/examples/filetail

go 1.24

require github.com/crankmcp/crank/plugins/sdk v0.0.0-00010101000000-000000000000

require (
	github.com/crankmcp/crank/proto v0.0.0-00010101000000-000000000000 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/hashicorp/go-hclog v1.6.3 // indirect
	github.com/hashicorp/go-plugin v1.8.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/oklog/run v1.1.0 // indirect
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240318140521-94a12d6c2237 // indirect
	google.golang.org/grpc v1.64.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/crankmcp/crank/plugins/sdk => ../..
	github.com/crankmcp/crank/proto => ../../../../proto
)
