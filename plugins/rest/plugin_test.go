package rest_test

import (
	"testing"

	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestExecutable builds cmd/crank-adapter-rest and drives it the way the
// host does: launched by go-plugin, over gRPC.
func TestExecutable(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, "./cmd/crank-adapter-rest").Start(t)
	srv := newServer(t, echoHandler)
	d, err := h.Describe(ctxT(t))
	if err != nil || d.Name != "rest" {
		t.Fatalf("describe: %v %v", d, err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{
		Config: `{"method":"GET","url":"` + srv.URL + `/users/{id}"}`,
		Args:   `{"id":"a/b"}`,
	})
	if err != nil || ue != nil || res == nil {
		t.Fatalf("invoke: %v %v %v", res, ue, err)
	}
}
