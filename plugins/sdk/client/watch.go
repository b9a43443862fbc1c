package client

import (
	"context"
	"io"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// WatchOperations watches the adapter's expansions (Capabilities.Watch):
// changed receives, in the calling goroutine, the names of the entries
// whose expansion may have changed, until ctx ends, the adapter ends the
// watch or goes away; the error says which (nil: the adapter ended it).
// hostVersion is the host's version, for the adapter's logs. An adapter
// without the capability answers with an *Error of code Unimplemented.
func (c *Client) WatchOperations(ctx context.Context, hostVersion string, changed func(operations []string)) error {
	st, err := c.rpc.WatchOperations(ctx, &adapterv1.WatchOperationsRequest{HostVersion: hostVersion})
	if err != nil {
		return callError(err)
	}
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return callError(err)
		}
		if ops := ev.GetOperations(); len(ops) > 0 {
			changed(ops)
		}
	}
}
