package mcpserver

import (
	"context"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
)

// watchHost has h expand its entries again when their adapters say their
// tools changed (host.Watch), and publishes the new tools while h is the
// active host: the SDK sends the sessions notifications/tools/list_changed.
// Detach ends the watch.
func (ep *Endpoint) watchHost(h *host.Host) {
	h.Watch(context.Background(), func() { ep.republish(h) })
}

// republish publishes the tools of h again after one of its entries was
// expanded again.
func (ep *Endpoint) republish(h *host.Host) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.view != nil {
		ep.view.forget()
	}
	if ep.active.Load() != h {
		return
	}
	if err := ep.CheckView(h); err != nil {
		ep.logger.Error("the endpoint's view does not fit the tools an entry now expands to; it serves what it can", zap.Error(err))
	}
	ep.publishLocked(h)
}

// forget drops the resolved view, for a host whose tools changed.
func (v *view) forget() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state = nil
}
