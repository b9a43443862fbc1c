package sdk

import (
	"context"
	"errors"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// ProtocolVersion is the adapter protocol version this SDK speaks
// (crank.adapter.v1). It is negotiated through go-plugin's VersionedPlugins.
const ProtocolVersion = 1

// PluginName is the go-plugin plugin name under which the adapter service is
// dispensed.
const PluginName = "adapter"

// Handshake is the go-plugin handshake shared by the host and adapters. The
// magic cookie only guards against running an adapter binary by hand; it is
// not a security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "CRANK_ADAPTER_PLUGIN",
	MagicCookieValue: "5b0e1f53c4d14a8f9a7e2c3d6b8f0a17",
}

// GRPCPlugin is the go-plugin glue for the adapter service. The host uses it
// with a nil Impl to obtain an adapterv1.AdapterClient; Serve uses it with
// the adapter to register the server.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Adapter
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the adapter service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("sdk: GRPCPlugin has no adapter to serve")
	}
	adapterv1.RegisterAdapterServer(s, NewServer(p.Impl))
	return nil
}

// GRPCClient returns an adapterv1.AdapterClient.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return adapterv1.NewAdapterClient(c), nil
}

// PluginSets returns the versioned plugin sets for go-plugin, keyed by
// protocol version. impl may be nil on the host side.
func PluginSets(impl Adapter) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Impl: impl}},
	}
}

// MaxMessageBytes bounds one protocol message (arguments, a result, a
// stream event) in both directions. gRPC's default of 4 MiB is too small
// for results the host accepts.
const MaxMessageBytes = 64 << 20

// ServerOptions are the gRPC server options an adapter process uses.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// DialOptions are the gRPC dial options the host uses towards adapters.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
}

// Serve runs the adapter as a go-plugin process and returns when the host
// ends it. Call it from main. Logs written through hclog's default logger
// (or to stderr) reach the host's log. The process also exits when the host
// process is gone (killed without a chance to stop its adapters).
func Serve(a Adapter) {
	defer exitWhenOrphaned()()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(a),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, ServerOptions()...)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Output:     os.Stderr,
			Level:      hclog.Info,
			JSONFormat: true,
		}),
	})
}
