// Package sdktest runs a Crank adapter in-process, over real gRPC on an
// in-memory connection, so an adapter's unit tests exercise the same
// protocol path the host uses without building a binary.
package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Harness is an adapter served in-process.
type Harness struct {
	// Client speaks the adapter protocol to the adapter under test.
	Client adapterv1.AdapterClient
}

// New serves a over gRPC in-process and returns a harness whose server and
// connection stop when the test ends.
func New(t testing.TB, a sdk.Adapter) *Harness {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(sdk.ServerOptions()...)
	adapterv1.RegisterAdapterServer(srv, sdk.NewServer(a))
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///sdktest",
		append(sdk.DialOptions(),
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return &Harness{Client: adapterv1.NewAdapterClient(conn)}
}

// Call describes one operation call.
type Call struct {
	Operation string
	// Config is the adapter config; a Go value is marshalled to JSON.
	Config  any
	Args    any
	Timeout time.Duration
	Cursor  string
	// BaseDir is sent as Operation.BaseDir, the operations file's
	// directory that relative paths in Config resolve against.
	BaseDir string
}

func (c Call) request() (*adapterv1.InvokeRequest, error) {
	cfg, err := toJSON(c.Config)
	if err != nil {
		return nil, err
	}
	args, err := toJSON(c.Args)
	if err != nil {
		return nil, err
	}
	name := c.Operation
	if name == "" {
		name = "test_operation"
	}
	return &adapterv1.InvokeRequest{
		Context:       &adapterv1.RequestContext{RequestId: "sdktest"},
		Operation:     &adapterv1.Operation{Name: name, ConfigJson: cfg, TimeoutMs: c.Timeout.Milliseconds(), BaseDir: c.BaseDir},
		ArgumentsJson: args,
		Cursor:        c.Cursor,
	}, nil
}

// Invoke calls the operation. Exactly one of result and upstream error is
// non-nil when err is nil.
func (h *Harness) Invoke(ctx context.Context, c Call) (*adapterv1.Result, *adapterv1.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	resp, err := h.Client.Invoke(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return resp.GetResult(), resp.GetError(), nil
}

// Validate returns the adapter's diagnostics for an operation config.
func (h *Harness) Validate(ctx context.Context, c Call) ([]*adapterv1.Diagnostic, error) {
	req, err := c.request()
	if err != nil {
		return nil, err
	}
	resp, err := h.Client.ValidateOperation(ctx, &adapterv1.ValidateOperationRequest{Operation: req.Operation})
	if err != nil {
		return nil, err
	}
	return resp.GetDiagnostics(), nil
}

// Expand returns the tools and diagnostics the adapter expands an entry
// to, asked as the current host asks (with its host capabilities).
func (h *Harness) Expand(ctx context.Context, c Call) (*adapterv1.ExpandOperationResponse, error) {
	req, err := c.request()
	if err != nil {
		return nil, err
	}
	return h.Client.ExpandOperation(ctx, &adapterv1.ExpandOperationRequest{Operation: req.Operation,
		HostCapabilities: []string{sdk.HostToolExecution}})
}

// Stream opens a stream and collects events until it ends, max events
// arrive (0 = no limit) or ctx is done.
func (h *Harness) Stream(ctx context.Context, c Call, max int) ([]*adapterv1.StreamEvent, error) {
	req, err := c.request()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := h.Client.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	var events []*adapterv1.StreamEvent
	for max == 0 || len(events) < max {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

func toJSON(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	}
	return json.Marshal(v)
}
