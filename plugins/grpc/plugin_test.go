package grpcadapter_test

import (
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// TestExecutable builds cmd/crank-adapter-grpc and drives it the way the
// host does: launched by go-plugin, over gRPC.
func TestExecutable(t *testing.T) {
	t.Parallel()
	h := adaptertest.Build(t, "./cmd/crank-adapter-grpc").Start(t)
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})
	d, err := h.Describe(ctxT(t))
	if err != nil || d.Name != "grpc" {
		t.Fatalf("describe: %v %v", d, err)
	}
	res, ue, err := h.Invoke(ctxT(t), adaptertest.Call{Config: ts.cfg("Echo"), Args: `{"text":"from a plugin process"}`})
	if err != nil || ue != nil || !strings.Contains(string(res.Structured), "from a plugin process") {
		t.Fatalf("invoke: %v %v %v", res, ue, err)
	}
}
