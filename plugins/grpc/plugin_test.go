package grpcadapter_test

import (
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/crankmcp/crank/plugins/grpc/grpctest"
	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// TestExecutable builds cmd/crank-adapter-grpc and drives it the way the
// host does: launched by go-plugin, over gRPC.
func TestExecutable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the adapter")
	}
	bin := filepath.Join(t.TempDir(), "crank-adapter-grpc")
	if out, err := exec.Command(goTool, "build", "-o", bin, "./cmd/crank-adapter-grpc").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ts := startTestServer(t, grpctest.Options{Reflection: grpctest.ReflectionBoth})

	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.PluginSets(nil),
		Cmd:              exec.Command(bin),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Output: io.Discard}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	c := raw.(adapterv1.AdapterClient)
	d, err := c.Describe(ctxT(t), &adapterv1.DescribeRequest{HostVersion: "test"})
	if err != nil || d.GetName() != "grpc" {
		t.Fatalf("describe: %v %v", d, err)
	}
	resp, err := c.Invoke(ctxT(t), &adapterv1.InvokeRequest{
		Operation:     &adapterv1.Operation{ConfigJson: mustJSON(t, ts.cfg("Echo"))},
		ArgumentsJson: []byte(`{"text":"from a plugin process"}`),
	})
	if err != nil || !strings.Contains(string(resp.GetResult().GetStructuredJson()), "from a plugin process") {
		t.Fatalf("invoke: %v %v", resp, err)
	}
}
