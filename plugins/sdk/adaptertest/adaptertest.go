// Package adaptertest runs an adapter under test the way the host runs
// it, over the real protocol, with results in the SDK's types.
//
// New serves an adapter in the test process (sdk.Serve in debug mode, gRPC
// on a local socket), for fast unit tests of everything an adapter does:
//
//	h := adaptertest.New(t, myAdapter{})
//	res, ue, err := h.Invoke(ctx, adaptertest.Call{Config: cfg, Args: `{"id": 7}`})
//
// Serve does the serving alone, for a test that attaches to the adapter
// as a host does.
//
// Build compiles the adapter's main package into an executable once per
// test process, and Executable.Start launches it the way the host does
// (go-plugin, AutoMTLS, a bare environment), for a test that the shipped
// binary starts and answers:
//
//	h := adaptertest.Build(t, "./cmd/crank-adapter-acme").Start(t)
package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/client"
	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
)

// Harness is an adapter under test.
type Harness struct {
	// Client is the host's client of the adapter.
	Client *client.Client
	// Process is the adapter's process when it runs in one of its own
	// (Executable.Start), nil in-process.
	Process *client.Process

	mu    sync.Mutex
	spans []client.Span
}

// Spans returns the spans the adapter sent back so far, for calls whose
// Context asked for them (RecordSpans, with a sampled TraceParent).
func (h *Harness) Spans() []client.Span {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.spans)
}

func (h *Harness) collect(spans []client.Span) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spans = append(h.spans, spans...)
}

// New serves a in this process and returns a harness calling it. The
// server and the connection stop when the test ends.
func New(t testing.TB, a sdk.Adapter) *Harness {
	t.Helper()
	rc := Serve(t, a)
	conn, err := grpc.NewClient("passthrough:///adaptertest", append(wire.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, rc.Network, rc.Address)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatalf("adaptertest: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h := &Harness{Client: client.New(conn)}
	h.Client.OnSpans(h.collect)
	return h
}

// Serve serves a in this process (sdk.Serve with sdk.WithDebug) until the
// test ends and returns where it listens, for a test that connects to it
// itself, as a host attaching to it does (client.Start with Reattach).
func Serve(t testing.TB, a sdk.Adapter) sdk.ReattachConfig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan sdk.ReattachConfig, 1)
	served := make(chan error, 1)
	// go-plugin's own log says little more than that the server stopped.
	go func() {
		served <- sdk.Serve(a, sdk.WithDebug(ctx, reattach, nil), sdk.WithLogger(hclog.NewNullLogger()))
	}()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	select {
	case rc := <-reattach:
		return rc
	case err := <-served:
		served <- err // for the cleanup
		t.Fatalf("adaptertest: the adapter stopped before it listened: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("adaptertest: the adapter did not listen within 10s")
	}
	return sdk.ReattachConfig{}
}

// Call describes one call of an operation.
type Call struct {
	// Operation is the operation's name; "test_operation" when empty.
	Operation string
	// Config is the adapter config: JSON as json.RawMessage, []byte or
	// string, or a Go value marshalled to JSON; nil is {}.
	Config any
	// Args are the arguments, given like Config.
	Args    any
	Timeout time.Duration
	// Mode is the operation's mode; ModeUnary when zero.
	Mode   sdk.Mode
	Cursor string
	// BaseDir is the operations file's directory, which relative paths
	// in Config resolve against.
	BaseDir string
	// Context is the request context; its RequestID is "adaptertest"
	// when empty.
	Context sdk.RequestContext
	// OldHost makes Expand ask as a host that predates tools' own Mode,
	// Execution and ItemSchema does (Operation.ToolExecution false).
	OldHost bool
	// Resume, given like Config, is the resume state the call resumes
	// from (sdk.Request.Resume); nil for a fresh call.
	Resume any
	// Egress are the rules the operation's connections are held to, as
	// for a catalog's entry (sdk.Operation.Egress); nil: none.
	Egress []string
	// ExcerptMargin is the operation's sdk.Operation.ExcerptMargin.
	ExcerptMargin int
}

func (c Call) operation() (*sdk.Operation, error) {
	cfg, err := toJSON(c.Config)
	if err != nil {
		return nil, err
	}
	op := &sdk.Operation{Name: c.Operation, Config: cfg, Timeout: c.Timeout, Mode: c.Mode, BaseDir: c.BaseDir,
		ToolExecution: !c.OldHost, ExcerptMargin: c.ExcerptMargin}
	if c.Egress != nil {
		if op.Egress, err = egress.New(c.Egress); err != nil {
			return nil, err
		}
	}
	if op.Name == "" {
		op.Name = "test_operation"
	}
	if op.Mode == 0 {
		op.Mode = sdk.ModeUnary
	}
	return op, nil
}

func (c Call) request() (*sdk.Request, error) {
	op, err := c.operation()
	if err != nil {
		return nil, err
	}
	args, err := toJSON(c.Args)
	if err != nil {
		return nil, err
	}
	req := &sdk.Request{Context: c.Context, Operation: *op, Arguments: args, Cursor: c.Cursor}
	if c.Resume != nil {
		if req.Resume, err = toJSON(c.Resume); err != nil {
			return nil, err
		}
	}
	if req.Context.RequestID == "" {
		req.Context.RequestID = "adaptertest"
	}
	return req, nil
}

// Describe returns what the adapter says of itself.
func (h *Harness) Describe(ctx context.Context) (*client.Info, error) {
	return h.Client.Describe(ctx, "adaptertest")
}

// Invoke calls the operation. When err is nil, exactly one of the result
// and the upstream error is set.
func (h *Harness) Invoke(ctx context.Context, c Call) (*sdk.Result, *sdk.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	res, err := h.Client.Invoke(ctx, req)
	return result(res, err)
}

// Validate returns the adapter's diagnostics of the operation's config.
func (h *Harness) Validate(ctx context.Context, c Call) ([]sdk.Diagnostic, error) {
	op, err := c.operation()
	if err != nil {
		return nil, err
	}
	return h.Client.Validate(ctx, op)
}

// Expand returns the tools and diagnostics the adapter expands an entry
// to, asked as the current host asks.
func (h *Harness) Expand(ctx context.Context, c Call) ([]sdk.Tool, []sdk.Diagnostic, error) {
	op, err := c.operation()
	if err != nil {
		return nil, nil, err
	}
	return h.Client.Expand(ctx, op)
}

// ExpandPublished returns what Expand does and the resources, resource
// templates and prompts the entry publishes (sdk.Publisher), asked as the
// current host asks.
func (h *Harness) ExpandPublished(ctx context.Context, c Call) ([]sdk.Tool, *sdk.Published, []sdk.Diagnostic, error) {
	op, err := c.operation()
	if err != nil {
		return nil, nil, nil, err
	}
	return h.Client.ExpandPublished(ctx, op)
}

// ReadResource reads uri with the operation's config (a published
// resource's Config, typically). When err is nil, exactly one of the
// contents and the upstream error is set.
func (h *Harness) ReadResource(ctx context.Context, c Call, uri string) (json.RawMessage, *sdk.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	res, err := h.Client.ReadResource(ctx, &sdk.ResourceRequest{Context: req.Context, Operation: req.Operation, URI: uri})
	return upstreamSplit(res, err)
}

// GetPrompt renders the prompt name with the operation's config (a
// published prompt's Config, typically). When err is nil, exactly one of
// the result and the upstream error is set.
func (h *Harness) GetPrompt(ctx context.Context, c Call, name string, args map[string]string) (json.RawMessage, *sdk.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	res, err := h.Client.GetPrompt(ctx, &sdk.PromptRequest{Context: req.Context, Operation: req.Operation, Name: name, Arguments: args})
	return upstreamSplit(res, err)
}

// Complete completes an argument with the operation's config (a
// published prompt's or template's Config, typically); ref is
// sdk.RefPrompt with the prompt's name or sdk.RefResource with the URI
// template. When err is nil, exactly one of the completion and the
// upstream error is set.
func (h *Harness) Complete(ctx context.Context, c Call, refType, ref, argument, value string) (json.RawMessage, *sdk.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	res, err := h.Client.Complete(ctx, &sdk.CompleteRequest{Context: req.Context, Operation: req.Operation, RefType: refType, Ref: ref,
		Argument: argument, Value: value})
	return upstreamSplit(res, err)
}

// WatchResource subscribes to uri with the operation's config until ctx
// ends, as client.Client.WatchResource does.
func (h *Harness) WatchResource(ctx context.Context, c Call, uri string, updated func(uri string)) (<-chan error, error) {
	req, err := c.request()
	if err != nil {
		return nil, err
	}
	return h.Client.WatchResource(ctx, &sdk.ResourceRequest{Context: req.Context, Operation: req.Operation, URI: uri}, updated)
}

// upstreamSplit splits an upstream error from other errors.
func upstreamSplit(res json.RawMessage, err error) (json.RawMessage, *sdk.UpstreamError, error) {
	var ue *sdk.UpstreamError
	if errors.As(err, &ue) {
		return nil, ue, nil
	}
	return res, nil, err
}

// Stream opens a stream and collects its events until it ends, max events
// arrived (0: no limit) or ctx is done. An upstream failure that ended it
// is returned apart, as an Invoke returns it.
func (h *Harness) Stream(ctx context.Context, c Call, max int) ([]client.Event, *sdk.UpstreamError, error) {
	req, err := c.request()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := h.Client.Stream(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	var events []client.Event
	for max == 0 || len(events) < max {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_, ue, err := result(nil, err)
			return events, ue, err
		}
		events = append(events, ev)
	}
	return events, nil, nil
}

// result splits an upstream error from other errors.
func result(res *sdk.Result, err error) (*sdk.Result, *sdk.UpstreamError, error) {
	var ue *sdk.UpstreamError
	if errors.As(err, &ue) {
		return nil, ue, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return res, nil, nil
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
