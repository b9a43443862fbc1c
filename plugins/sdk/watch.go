package sdk

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// OperationWatcher is implemented by adapters whose expansions can change
// while they run (an MCP upstream that adds a tool): the host then expands
// the named entries again and publishes their new tools to its clients.
type OperationWatcher interface {
	// WatchOperations runs until ctx ends (the host stopped watching or
	// went away), calling changed with the names of operations-file
	// entries (Operation.Name as ExpandOperation received it) whose
	// expansion may have changed. changed returns an error once the host
	// has gone; WatchOperations should then return. A host that has no
	// such entry, or whose entry expands as before, changes nothing, so
	// naming an entry too often costs an expansion, not a change.
	WatchOperations(ctx context.Context, changed func(operations []string) error) error
}

func (s *server) WatchOperations(req *adapterv1.WatchOperationsRequest, stream adapterv1.Adapter_WatchOperationsServer) (err error) {
	defer recoverPanic("watch", &err)
	w, ok := s.impl.(OperationWatcher)
	if !ok {
		return status.Error(codes.Unimplemented, "adapter does not watch operations")
	}
	err = w.WatchOperations(stream.Context(), func(ops []string) error {
		return stream.Send(&adapterv1.OperationsChanged{Operations: ops})
	})
	if ctx := stream.Context(); ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		return status.Errorf(codes.Internal, "watch: %v", err)
	}
	return nil
}
