package mcpserver

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/plugins/rest"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/store"
)

// adapterEnv makes this test binary serve the REST adapter instead of
// running tests: the adapter process of the hosts under test.
const adapterEnv = "CRANK_MCPSERVER_TEST_ADAPTER"

func TestMain(m *testing.M) {
	switch os.Getenv(adapterEnv) {
	case "rest":
		sdk.Serve(rest.New())
		os.Exit(0)
	case "publish": // published_test.go
		sdk.Serve(publishAdapter{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newTestHost is a host for the operations file text ops, its adapter
// process this test binary, its jobs and stream sessions in st (nil for
// none) and its audit records in audit (nil for none).
func newTestHost(t testing.TB, ops string, st host.Store, audit *zap.Logger) *host.Host {
	t.Helper()
	return newTestHostOf(t, "rest", ops, st, audit)
}

// newTestHostOf is newTestHost with the adapter this test binary serves
// as adapter (adapterEnv).
func newTestHostOf(t testing.TB, adapter, ops string, st host.Store, audit *zap.Logger, options ...func(*host.Options)) *host.Host {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ops.yaml")
	if err := os.WriteFile(path, []byte(ops), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := opsfile.LoadFile(path, opsfile.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sup := host.NewSupervisor(host.AdapterSpec{Name: "rest", Command: exe, Env: []string{adapterEnv + "=" + adapter}},
		host.SupervisorOptions{Logger: zap.NewNop(), HostVersion: "test"})
	t.Cleanup(func() { _ = sup.Close() })
	opts := host.Options{File: cat, Store: st, Audit: audit,
		Adapter: func(string) (*host.Supervisor, error) { return sup, nil }}
	for _, o := range options {
		o(&opts)
	}
	hst, err := host.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return hst
}

// testOptions are the options of a gateway replica's endpoint in workspace,
// as the crank handler's defaults make them, with an hour's session
// timeout: long enough that no background touch happens during a test.
func testOptions(workspace string) Options {
	return Options{
		Version: "test", Workspace: workspace, AgentHeader: "X-Agent", SessionTimeout: time.Hour,
		KeepaliveInterval: 15 * time.Second, Resumable: true, EventLimits: store.EventLimits{TTL: 5 * time.Minute},
	}
}

// serveEndpoint is an endpoint of opts serving hst with st, through its
// ServeHTTP on a test server, closed when the test ends; it returns the
// endpoint and its URL.
func serveEndpoint(t testing.TB, hst *host.Host, st Store, opts Options) (*Endpoint, string) {
	t.Helper()
	ep, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(hst, st)
	srv := httptest.NewServer(ep)
	t.Cleanup(func() { srv.Close(); _ = ep.Close() })
	return ep, srv.URL + "/mcp"
}
