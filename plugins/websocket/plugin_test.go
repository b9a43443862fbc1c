package websocket_test

import (
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
)

// TestExecutable builds cmd/crank-adapter-websocket and drives it the way
// the host does: launched by go-plugin, a stream over gRPC.
func TestExecutable(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, "./cmd/crank-adapter-websocket").Start(t)
	f := newFeed(t, func(p *peer) {
		p.send(map[string]any{"n": 1})
		p.hold()
	}, nil)
	d, err := h.Describe(ctxT(t))
	if err != nil || d.Name != "websocket" {
		t.Fatalf("describe: %v %v", d, err)
	}
	evs, ue, err := h.Stream(ctxT(t), adaptertest.Call{Config: `{"url":"` + f.url + `"}`}, 1)
	if err != nil || ue != nil || len(evs) != 1 || evs[0].Kind != client.EventItem || string(evs[0].Item.Data) != `{"n":1}` {
		t.Fatalf("stream: %v %v %v", evs, ue, err)
	}
}
