package websocket_test

import (
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// TestExecutable builds cmd/crank-adapter-websocket and drives it the way
// the host does: launched by go-plugin, a stream over gRPC.
func TestExecutable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the adapter")
	}
	bin := filepath.Join(t.TempDir(), "crank-adapter-websocket")
	if out, err := exec.Command(goTool, "build", "-o", bin, "./cmd/crank-adapter-websocket").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	f := newFeed(t, func(p *peer) {
		p.send(map[string]any{"n": 1})
		p.hold()
	}, nil)
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
	if err != nil || d.GetName() != "websocket" {
		t.Fatalf("describe: %v %v", d, err)
	}
	st, err := c.Stream(ctxT(t), &adapterv1.InvokeRequest{
		Operation: &adapterv1.Operation{ConfigJson: []byte(`{"url":"` + f.url + `"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || string(ev.GetItem().GetDataJson()) != `{"n":1}` {
		t.Fatalf("stream: %v %v", ev, err)
	}
}
