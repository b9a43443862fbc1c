package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// waiter answers which call carried its Invoke and the deadline it saw,
// or fails as its arguments say, or waits until its context ends
// ("wait"), reporting its start on started and its end on ended.
type waiter struct {
	started, ended chan string
}

func newWaiter() waiter {
	return waiter{started: make(chan string, 100), ended: make(chan string, 100)}
}

type waiterArgs struct {
	Name string `json:"name"`
	Do   string `json:"do"` // "", "wait", "upstream", "adapter", "panic"
}

type waiterAnswer struct {
	Name     string    `json:"name"`
	Method   string    `json:"method"`
	Deadline time.Time `json:"deadline"`
	Seen     time.Time `json:"seen"` // RequestContext.Deadline
}

func (waiter) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "waiter", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary}}, nil
}

func (w waiter) Invoke(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var a waiterArgs
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return nil, err
	}
	switch a.Do {
	case "wait":
		w.started <- a.Name
		<-ctx.Done()
		w.ended <- a.Name + ": " + ctx.Err().Error()
		return nil, ctx.Err()
	case "upstream":
		return nil, &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: "503", Message: "busy " + a.Name, Retryable: true}
	case "adapter":
		return nil, errors.New("broken " + a.Name)
	case "panic":
		panic("boom " + a.Name)
	}
	method, _ := grpc.Method(ctx)
	deadline, _ := ctx.Deadline()
	b, _ := json.Marshal(waiterAnswer{Name: a.Name, Method: method, Deadline: deadline, Seen: req.Context.Deadline})
	return &sdk.Result{Structured: b}, nil
}

// invokeWaiter calls the waiter with a.
func invokeWaiter(ctx context.Context, c *client.Client, a waiterArgs) (waiterAnswer, error) {
	args, _ := json.Marshal(a)
	res, err := c.Invoke(ctx, &sdk.Request{Operation: sdk.Operation{Name: "w", Mode: sdk.ModeUnary}, Arguments: args})
	if err != nil {
		return waiterAnswer{}, err
	}
	var w waiterAnswer
	err = json.Unmarshal(res.Structured, &w)
	return w, err
}

// newWaiterClient serves a waiter in this process and returns a client
// on a connection whose Streams calls the test can count and break.
func newWaiterClient(t *testing.T) (waiter, *client.Client, *breakable) {
	t.Helper()
	w := newWaiter()
	rc := adaptertest.Serve(t, w)
	conn, err := grpc.NewClient("unix://"+rc.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b := &breakable{ClientConnInterface: conn}
	return w, client.New(b), b
}

// Once described, a current adapter takes unary calls on a Streams call,
// concurrent ones on the same: each gets its own answer, under the
// caller's deadline; before, and for an adapter that does not list it,
// an Invoke call each.
func TestInvokeOnStreams(t *testing.T) {
	t.Parallel()
	_, c, b := newWaiterClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	deadline, _ := ctx.Deadline()

	got, err := invokeWaiter(ctx, c, waiterArgs{Name: "first"})
	if err != nil || got.Method != adapterv1.Adapter_Invoke_FullMethodName {
		t.Fatalf("before Describe: %+v %v", got, err)
	}
	info, err := c.Describe(ctx, "test")
	if err != nil || !info.Capabilities.StreamsInvoke || info.Capabilities.Streams {
		t.Fatalf("describe: %+v %v", info, err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("c", i)
			got, err := invokeWaiter(ctx, c, waiterArgs{Name: name})
			if err != nil || got.Name != name || got.Method != adapterv1.Adapter_Streams_FullMethodName ||
				!got.Deadline.Equal(deadline) || !got.Seen.Equal(deadline) {
				t.Errorf("%s: %+v %v (deadline %v)", name, got, err, deadline)
			}
		}()
	}
	wg.Wait()
	if n := b.calls.Load(); n != 1 {
		t.Errorf("%d Streams calls for 20 unary calls", n)
	}

	// Failures come back as from an Invoke call.
	var ue *sdk.UpstreamError
	if _, err := invokeWaiter(ctx, c, waiterArgs{Name: "u", Do: "upstream"}); !errors.As(err, &ue) ||
		ue.Status != "503" || ue.Message != "busy u" || !ue.Retryable {
		t.Errorf("upstream failure: %v", err)
	}
	for _, do := range []string{"adapter", "panic"} {
		if _, err := invokeWaiter(ctx, c, waiterArgs{Name: do, Do: do}); client.CodeOf(err) != client.Internal {
			t.Errorf("%s failure: %v", do, err)
		}
	}
	// The host's client is still good after them.
	if got, err := invokeWaiter(ctx, c, waiterArgs{Name: "after"}); err != nil || got.Name != "after" {
		t.Errorf("after the failures: %+v %v", got, err)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("%d Streams calls", n)
	}
}

// A unary call on the Streams call ends with its context, as an Invoke
// call does, and the adapter sees its context end: cancelled, or past
// its deadline (which the adapter has from the request alone).
func TestInvokeOnStreamsCancel(t *testing.T) {
	t.Parallel()
	w, c, _ := newWaiterClient(t)
	if _, err := c.Describe(ctxT(t), "test"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	failed := make(chan error, 1)
	go func() {
		_, err := invokeWaiter(ctx, c, waiterArgs{Name: "cancelled", Do: "wait"})
		failed <- err
	}()
	<-w.started
	cancel()
	if err := <-failed; client.CodeOf(err) != client.Cancelled {
		t.Errorf("cancelled: %v", err)
	}
	if got := <-w.ended; got != "cancelled: context canceled" {
		t.Errorf("the adapter saw %q", got)
	}

	dctx, dcancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer dcancel()
	if _, err := invokeWaiter(dctx, c, waiterArgs{Name: "late", Do: "wait"}); client.CodeOf(err) != client.DeadlineExceeded {
		t.Errorf("past its deadline: %v", err)
	}
	if got := <-w.ended; got != "late: context deadline exceeded" {
		t.Errorf("the adapter saw %q", got)
	}
	if got, err := invokeWaiter(ctxT(t), c, waiterArgs{Name: "next"}); err != nil || got.Name != "next" {
		t.Errorf("next call: %+v %v", got, err)
	}
}

// When the Streams call of unary calls breaks, the calls on it fail as
// Invoke calls on a broken connection fail, and the next call opens a
// new one.
func TestInvokeOnStreamsBreak(t *testing.T) {
	t.Parallel()
	w, c, b := newWaiterClient(t)
	ctx := ctxT(t)
	if _, err := c.Describe(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	// The call is open once an answer came on it.
	if _, err := invokeWaiter(ctx, c, waiterArgs{Name: "open"}); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := invokeWaiter(ctx, c, waiterArgs{Name: "waiting", Do: "wait"})
		failed <- err
	}()
	<-w.started // it was sent on the call
	b.breakCalls()
	if err := <-failed; client.CodeOf(err) != client.Cancelled {
		t.Errorf("on a broken call: %v", err)
	}
	if got := <-w.ended; got != "waiting: context canceled" {
		t.Errorf("the adapter saw %q", got)
	}
	if got, err := invokeWaiter(ctx, c, waiterArgs{Name: "again"}); err != nil || got.Method != adapterv1.Adapter_Streams_FullMethodName {
		t.Errorf("after the break: %+v %v", got, err)
	}
	if n := b.calls.Load(); n < 2 {
		t.Errorf("%d Streams calls", n)
	}
}

// When the adapter process dies, a unary call in flight on its Streams
// call fails as an Invoke call of a dead adapter fails: Unavailable.
func TestInvokeOnStreamsAdapterKilled(t *testing.T) {
	p := startSelfAdapter(t, "CRANK_CLIENT_TEST_WAITER=1")
	ctx := ctxT(t)
	if _, err := p.Describe(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if got, err := invokeWaiter(ctx, p.Client, waiterArgs{Name: "a"}); err != nil || got.Method != adapterv1.Adapter_Streams_FullMethodName {
		t.Fatalf("invoke: %+v %v", got, err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := invokeWaiter(ctx, p.Client, waiterArgs{Name: "waiting", Do: "wait"})
		failed <- err
	}()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; client.CodeOf(err) != client.Unavailable {
		t.Errorf("in flight: %v", err)
	}
}

// An adapter that lists streams_invoke but answers its Streams call
// UNIMPLEMENTED all the same gets its unary calls as Invoke calls, the
// first one included.
func TestInvokeOnStreamsUnimplemented(t *testing.T) {
	t.Parallel()
	a := &noStreams{}
	c := serveRaw(t, a)
	ctx := ctxT(t)
	info, err := c.Describe(ctx, "test")
	if err != nil || !info.Capabilities.StreamsInvoke {
		t.Fatalf("describe: %+v %v", info, err)
	}
	for i := range 3 {
		args := fmt.Sprintf(`{"n":%d}`, i)
		res, err := c.Invoke(ctx, &sdk.Request{Arguments: json.RawMessage(args)})
		if err != nil || string(res.Structured) != args {
			t.Errorf("invoke %d: %+v %v", i, res, err)
		}
	}
	if n := a.streams.Load(); n != 1 {
		t.Errorf("%d Streams calls", n)
	}
}

// noStreams lists streams_invoke and serves no Streams call.
type noStreams struct {
	adapterv1.UnimplementedAdapterServer
	streams atomic.Int64
}

func (*noStreams) Describe(context.Context, *adapterv1.DescribeRequest) (*adapterv1.DescribeResponse, error) {
	return &adapterv1.DescribeResponse{Name: "nostreams", Capabilities: []string{"streams_invoke"}}, nil
}

func (n *noStreams) Streams(adapterv1.Adapter_StreamsServer) error {
	n.streams.Add(1)
	return status.Error(codes.Unimplemented, "no streams here")
}

func (*noStreams) Invoke(_ context.Context, req *adapterv1.InvokeRequest) (*adapterv1.InvokeResponse, error) {
	return &adapterv1.InvokeResponse{Outcome: &adapterv1.InvokeResponse_Result{Result: &adapterv1.Result{StructuredJson: req.GetArgumentsJson()}}}, nil
}
