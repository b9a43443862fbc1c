// Package wire holds what the adapter server (package sdk) and the host's
// client (package client) agree on besides the generated protocol: the
// go-plugin handshake and plugin sets, the message size limit, and the
// strings that capabilities travel as.
package wire

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// ProtocolVersion is the adapter protocol version spoken here
// (crank.adapter.v1), negotiated through go-plugin's VersionedPlugins.
const ProtocolVersion = 1

// PluginName is the go-plugin plugin name of the adapter service.
const PluginName = "adapter"

// Handshake is the go-plugin handshake of host and adapters. The magic
// cookie only guards against running an adapter binary by hand; it is not
// a security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "CRANK_ADAPTER_PLUGIN",
	MagicCookieValue: "5b0e1f53c4d14a8f9a7e2c3d6b8f0a17",
}

// MaxMessageBytes bounds one protocol message (arguments, a result, a
// stream event) in both directions. gRPC's default of 4 MiB is too small
// for results the host accepts.
const MaxMessageBytes = 64 << 20

// Optional RPCs an adapter implements, as DescribeResponse.capabilities
// lists them.
const (
	CapabilityValidate = "validate"
	CapabilityExpand   = "expand"
	CapabilityStream   = "stream"
	// CapabilityStreams: Streams, many streams on one call (sdk.Streamer).
	CapabilityStreams = "streams"
	// CapabilityStreamsInvoke: unary calls on Streams
	// (StreamsRequest.invoke), which every adapter of this SDK serves.
	CapabilityStreamsInvoke = "streams_invoke"
	// CapabilityProgress: InvokeWithProgress (Description.Progress).
	CapabilityProgress = "progress"
	// CapabilityLog: log messages in InvokeWithProgress (Description.Log).
	CapabilityLog = "log"
	// CapabilityWatch: WatchOperations (sdk.OperationWatcher).
	CapabilityWatch = "watch"
	// CapabilityResources and CapabilityPrompts: ReadResource and
	// GetPrompt (sdk.Publisher).
	CapabilityResources = "resources"
	CapabilityPrompts   = "prompts"
	// CapabilityCompletions: Complete (sdk.Completer).
	CapabilityCompletions = "completions"
	// CapabilitySubscribe: WatchResource (sdk.ResourceWatcher).
	CapabilitySubscribe = "subscribe"
	// CapabilityClientRequests: client requests in InvokeWithProgress
	// and AnswerClientRequest (Description.ClientRequests).
	CapabilityClientRequests = "client_requests"
	// CapabilityResume: resume states in InvokeWithProgress and calls
	// resumed from one (Description.Resume).
	CapabilityResume = "resume"
	// CapabilityEgress: every connection of an operation is held to its
	// Operation.egress rules where it is dialled (Description.Egress).
	CapabilityEgress = "egress"
)

// StreamCreditBytes is a logical stream's credit on a Streams call: the
// bytes of events (their encoded size) the adapter may have sent on it
// that the host has not granted back; an event may follow while fewer
// are outstanding. The host grants back what its reader took once it took
// StreamCreditBytes/2 or more.
const StreamCreditBytes = 256 << 10

// HostToolExecution is the host capability, listed in
// ExpandOperationRequest.host_capabilities, of reading Tool.mode,
// execution_json and item_schema_json.
const HostToolExecution = "tool_execution"

// HostResources and HostPrompts are the host capabilities of reading the
// resources and resource templates, and the prompts, an expansion
// publishes (ExpandOperationResponse.resources, resource_templates,
// prompts).
const (
	HostResources = "resources"
	HostPrompts   = "prompts"
)

// Plugin is the go-plugin glue of the adapter service: the adapter side
// registers Impl, the host side gets the connection to build its client
// on.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl adapterv1.AdapterServer
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the adapter service.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("no adapter to serve")
	}
	adapterv1.RegisterAdapterServer(s, p.Impl)
	return nil
}

// GRPCClient returns the *grpc.ClientConn to the adapter.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// PluginSets are the go-plugin plugin sets by protocol version; srv is nil
// on the host side.
func PluginSets(srv adapterv1.AdapterServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &Plugin{Impl: srv}},
	}
}

// StreamWindowBytes and ConnWindowBytes are gRPC's flow-control windows
// of one call and of the connection, in both directions. Fixed windows
// turn off gRPC's bandwidth estimation, which otherwise answers data with
// a ping and its acknowledgement: two more writes and reads on each side
// for every call between processes that sit on one machine, where the
// estimate has nothing to find. A call buffers at most StreamWindowBytes
// its reader has not taken; larger messages flow in window-sized steps.
const (
	StreamWindowBytes = 1 << 20
	ConnWindowBytes   = 16 << 20
)

// ServerOptions are the gRPC server options of an adapter process.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.InitialWindowSize(StreamWindowBytes), grpc.InitialConnWindowSize(ConnWindowBytes)}
}

// DialOptions are the gRPC dial options of the host towards adapters.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithInitialWindowSize(StreamWindowBytes), grpc.WithInitialConnWindowSize(ConnWindowBytes)}
}
