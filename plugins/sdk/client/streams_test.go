package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	"github.com/crankmcp/crank/plugins/sdk/client"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// feed streams the items its arguments ask for: n items (0: until
// cancelled) of pad bytes of padding, every ms apart, then ends, or fails
// as fail says ("upstream", "adapter", "panic"). Each item says which
// call carried it and which mode the adapter saw. It counts the items it
// sent per stream name, and the streams whose context ended.
type feed struct {
	echo
	sent      *sync.Map // name → *atomic.Int64
	cancelled chan string
}

type feedArgs struct {
	Name  string `json:"name"`
	N     int    `json:"n"`
	Pad   int    `json:"pad"`
	Every int    `json:"every"`
	Fail  string `json:"fail"`
}

type feedItem struct {
	Name   string `json:"name"`
	I      int    `json:"i"`
	Method string `json:"method"`
	Mode   string `json:"mode"`
	Pad    string `json:"pad,omitempty"`
}

func newFeed() feed { return feed{sent: &sync.Map{}, cancelled: make(chan string, 100)} }

func (feed) Describe(context.Context) (*sdk.Description, error) {
	return &sdk.Description{Name: "feed", Version: "1", Modes: []sdk.Mode{sdk.ModeUnary, sdk.ModeWindow}}, nil
}

func (f feed) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	var a feedArgs
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return err
	}
	method, _ := grpc.Method(ctx)
	c, _ := f.sent.LoadOrStore(a.Name, new(atomic.Int64))
	count := c.(*atomic.Int64)
	for i := 0; a.N == 0 || i < a.N; i++ {
		data, _ := json.Marshal(feedItem{Name: a.Name, I: i, Method: method[strings.LastIndex(method, "/")+1:],
			Mode: req.Operation.Mode.String(), Pad: strings.Repeat("x", a.Pad)})
		if err := send.Item(sdk.Item{Data: data, Cursor: fmt.Sprint(i)}); err != nil {
			if ctx.Err() != nil {
				f.cancelled <- a.Name
			}
			return err
		}
		count.Add(1)
		if a.Every > 0 {
			select {
			case <-time.After(time.Duration(a.Every) * time.Millisecond):
			case <-ctx.Done():
				f.cancelled <- a.Name
				return ctx.Err()
			}
		}
	}
	switch a.Fail {
	case "upstream":
		return &sdk.UpstreamError{Kind: sdk.KindTransport, Message: "reset " + a.Name}
	case "adapter":
		return errors.New("broken " + a.Name)
	case "panic":
		panic("boom " + a.Name)
	}
	return nil
}

func (f feed) count(name string) int64 {
	c, ok := f.sent.Load(name)
	if !ok {
		return 0
	}
	return c.(*atomic.Int64).Load()
}

// openFeed opens a stream of the feed in mode.
func openFeed(ctx context.Context, t *testing.T, c *client.Client, mode sdk.Mode, a feedArgs) *client.Stream {
	t.Helper()
	args, _ := json.Marshal(a)
	st, err := c.Stream(ctx, &sdk.Request{Operation: sdk.Operation{Name: "feed", Mode: mode}, Arguments: args})
	if err != nil {
		t.Fatalf("open %s: %v", a.Name, err)
	}
	return st
}

// readItems reads n items of a stream, checking they come in order.
func readItems(st *client.Stream, name string, from, n int) ([]feedItem, error) {
	var out []feedItem
	for i := from; i < from+n; i++ {
		ev, err := st.Recv()
		if err != nil {
			return out, err
		}
		var it feedItem
		if ev.Kind != client.EventItem || json.Unmarshal(ev.Item.Data, &it) != nil || it.Name != name || it.I != i || ev.Item.Cursor != fmt.Sprint(i) {
			return out, fmt.Errorf("%s: event %d is %s", name, i, ev)
		}
		out = append(out, it)
	}
	return out, nil
}

// readToEnd reads n items of a stream, then its end and io.EOF.
func readToEnd(st *client.Stream, name string, n int) error {
	if _, err := readItems(st, name, 0, n); err != nil {
		return err
	}
	if ev, err := st.Recv(); err != nil || ev.Kind != client.EventEnd || ev.Cursor != fmt.Sprint(n-1) {
		return fmt.Errorf("%s: end: %v %v", name, ev, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: after the end: %v", name, err)
	}
	return nil
}

// newFeedHarness serves a feed in this process, described to its client.
func newFeedHarness(t *testing.T) (feed, *client.Client, context.Context) {
	t.Helper()
	t.Parallel()
	f := newFeed()
	h := adaptertest.New(t, f)
	describe(t, h.Client)
	return f, h.Client, ctxT(t)
}

func describe(t *testing.T, c *client.Client) {
	t.Helper()
	info, err := c.Describe(ctxT(t), "test")
	if err != nil || !info.Capabilities.Streams {
		t.Fatalf("describe: %+v %v", info, err)
	}
}

// openRunning opens a stream of the feed, until cancelled, in each mode
// and reads its first items.
func openRunning(ctx context.Context, t *testing.T, c *client.Client, modes ...sdk.Mode) []*client.Stream {
	t.Helper()
	var open []*client.Stream
	for i, mode := range modes {
		name := fmt.Sprint("s", i)
		st := openFeed(ctx, t, c, mode, feedArgs{Name: name, Every: 2})
		if _, err := readItems(st, name, 0, 2); err != nil {
			t.Fatal(err)
		}
		open = append(open, st)
	}
	return open
}

// failsWith checks that each stream ends with a failure of code.
func failsWith(t *testing.T, code client.Code, streams []*client.Stream) {
	t.Helper()
	for i, st := range streams {
		var err error
		for err == nil {
			_, err = st.Recv()
		}
		if client.CodeOf(err) != code {
			t.Errorf("s%d: %v", i, err)
		}
	}
}

// The streams of sessions and jobs share one Streams call, each getting
// its own items in order while they interleave; the adapter serves them
// as windows. A window has a Stream call of its own.
func TestSharedStreams(t *testing.T) {
	_, c, ctx := newFeedHarness(t)
	const streams, items = 40, 25
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		mode := []sdk.Mode{sdk.ModeSession, sdk.ModeAsyncJob}[i%2]
		name := fmt.Sprint("s", i)
		st := openFeed(ctx, t, c, mode, feedArgs{Name: name, N: items, Every: 1})
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := readItems(st, name, 0, 1)
			if err == nil && (got[0].Method != "Streams" || got[0].Mode != "window") {
				err = fmt.Errorf("%s: carried by %s in mode %s", name, got[0].Method, got[0].Mode)
			}
			if err == nil {
				_, err = readItems(st, name, 1, items-1)
			}
			if err == nil {
				ev, rerr := st.Recv()
				if rerr != nil || ev.Kind != client.EventEnd {
					err = fmt.Errorf("%s: end: %v %v", name, ev, rerr)
				}
			}
			errs <- err
		}()
	}
	w := openFeed(ctx, t, c, sdk.ModeWindow, feedArgs{Name: "w", N: 1})
	if got, err := readItems(w, "w", 0, 1); err != nil || got[0].Method != "Stream" || got[0].Mode != "window" {
		t.Errorf("window: %+v %v", got, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// Cancelling one logical stream cancels it at the adapter and leaves the
// others running.
func TestSharedStreamCancel(t *testing.T) {
	f, c, ctx := newFeedHarness(t)
	actx, cancelA := context.WithCancel(ctx)
	a := openFeed(actx, t, c, sdk.ModeSession, feedArgs{Name: "a", Every: 2})
	b := openFeed(ctx, t, c, sdk.ModeSession, feedArgs{Name: "b", N: 30, Every: 2})
	if _, err := readItems(a, "a", 0, 3); err != nil {
		t.Fatal(err)
	}
	cancelA()
	if _, err := a.Recv(); client.CodeOf(err) != client.Cancelled {
		t.Errorf("a cancelled: %v", err)
	}
	select {
	case name := <-f.cancelled:
		if name != "a" {
			t.Errorf("the adapter cancelled %s", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the adapter did not see the cancel")
	}
	if err := readToEnd(b, "b", 30); err != nil {
		t.Error(err)
	}
}

// A stream whose reader does not read holds up no other: the adapter
// stops sending it once its credit is used, and it resumes as it is
// read. An item larger than the credit passes.
func TestSharedStreamCredit(t *testing.T) {
	f, c, ctx := newFeedHarness(t)
	const pad, n = 32 << 10, 100
	slow := openFeed(ctx, t, c, sdk.ModeSession, feedArgs{Name: "slow", N: n, Pad: pad})
	big := openFeed(ctx, t, c, sdk.ModeSession, feedArgs{Name: "big", N: 3, Pad: 1 << 20})
	if err := readToEnd(big, "big", 3); err != nil {
		t.Error(err)
	}
	for i := range 5 {
		name := fmt.Sprint("quick", i)
		if err := readToEnd(openFeed(ctx, t, c, sdk.ModeAsyncJob, feedArgs{Name: name, N: 50}), name, 50); err != nil {
			t.Error(err)
		}
	}
	// 256 KiB of credit, and the item sent when below it.
	time.Sleep(100 * time.Millisecond)
	if sent := f.count("slow"); sent > 256/32+1 || sent == 0 {
		t.Errorf("the unread stream got %d items of %d KiB", sent, pad>>10)
	}
	if err := readToEnd(slow, "slow", n); err != nil {
		t.Error(err)
	}
}

// failure reads a stream's n items, then returns the error that ends it.
func failure(st *client.Stream, name string, n int) error {
	_, err := readItems(st, name, 0, n)
	if err == nil {
		_, err = st.Recv()
	}
	return err
}

// A stream's upstream error, the adapter's own failure and its panic end
// that stream alone, as they end a Stream call.
func TestSharedStreamFailures(t *testing.T) {
	_, c, ctx := newFeedHarness(t)
	other := openFeed(ctx, t, c, sdk.ModeSession, feedArgs{Name: "other", N: 20, Every: 5})
	for _, mode := range []sdk.Mode{sdk.ModeSession, sdk.ModeWindow} {
		err := failure(openFeed(ctx, t, c, mode, feedArgs{Name: "up", N: 2, Fail: "upstream"}), "up", 2)
		var ue *sdk.UpstreamError
		if !errors.As(err, &ue) || ue.Kind != sdk.KindTransport || ue.Message != "reset up" {
			t.Errorf("%s: upstream failure: %v", mode, err)
		}
		for fail, want := range map[string]string{"adapter": "stream: broken bad", "panic": "stream: internal error (panic), see the adapter log"} {
			err := failure(openFeed(ctx, t, c, mode, feedArgs{Name: "bad", N: 1, Fail: fail}), "bad", 1)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != client.Internal || ce.Message != want {
				t.Errorf("%s: %s: %v", mode, fail, err)
			}
		}
	}
	if err := readToEnd(other, "other", 20); err != nil {
		t.Error(err)
	}
}

// An adapter that sends more than a stream's credit fails that stream,
// naming the violation, and the host cancels it.
func TestSharedStreamOverrun(t *testing.T) {
	t.Parallel()
	o := &overrunner{cancelled: make(chan uint64, 1)}
	c := serveRaw(t, o)
	describe(t, c)
	st, err := c.Stream(ctxT(t), &sdk.Request{Operation: sdk.Operation{Mode: sdk.ModeSession}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // all of it arrives before the reader grants any back
	n := 0
	for {
		_, err := st.Recv()
		if err != nil {
			if client.CodeOf(err) != client.Internal || !strings.Contains(err.Error(), "protocol violation") {
				t.Errorf("after %d items: %v", n, err)
			}
			break
		}
		n++
	}
	if n != 4 { // four items of 64 KiB and a few bytes use up the credit
		t.Errorf("%d items before the violation", n)
	}
	select {
	case <-o.cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the host did not cancel the stream")
	}
}

// serveRaw serves an adapter written on the generated code, as a test
// makes one break the protocol, and returns a client of it.
func serveRaw(t *testing.T, a adapterv1.AdapterServer) *client.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	adapterv1.RegisterAdapterServer(srv, a)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return client.New(conn)
}

// overrunner is an adapter that ignores the credit of its streams.
type overrunner struct {
	adapterv1.UnimplementedAdapterServer
	cancelled chan uint64
}

func (*overrunner) Describe(context.Context, *adapterv1.DescribeRequest) (*adapterv1.DescribeResponse, error) {
	return &adapterv1.DescribeResponse{Name: "overrun", Capabilities: []string{"stream", "streams"}}, nil
}

func (o *overrunner) Streams(call adapterv1.Adapter_StreamsServer) error {
	for {
		req, err := call.Recv()
		if err != nil {
			return nil
		}
		switch req.GetMessage().(type) {
		case *adapterv1.StreamsRequest_Open:
			item := &adapterv1.StreamEvent{Event: &adapterv1.StreamEvent_Item{Item: &adapterv1.Item{DataJson: []byte(`"` + strings.Repeat("x", 64<<10-8) + `"`)}}}
			for range 10 {
				if err := call.Send(&adapterv1.StreamsEvent{Id: req.GetId(), Message: &adapterv1.StreamsEvent_Event{Event: item}}); err != nil {
					return err
				}
			}
		case *adapterv1.StreamsRequest_Cancel:
			o.cancelled <- req.GetId()
		}
	}
}

// When the Streams call breaks, every stream on it fails as a broken
// Stream call does, and the next stream opens a new call.
func TestSharedStreamsBreak(t *testing.T) {
	t.Parallel()
	rc := adaptertest.Serve(t, newFeed())
	conn, err := grpc.NewClient("unix://"+rc.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b := &breakable{ClientConnInterface: conn}
	c := client.New(b)
	describe(t, c)
	ctx := ctxT(t)
	open := openRunning(ctx, t, c, sdk.ModeSession, sdk.ModeSession, sdk.ModeAsyncJob)
	b.breakCalls()
	failsWith(t, client.Cancelled, open)
	if err := readToEnd(openFeed(ctx, t, c, sdk.ModeSession, feedArgs{Name: "again", N: 3}), "again", 3); err != nil {
		t.Error(err)
	}
	if n := b.calls.Load(); n != 2 {
		t.Errorf("%d Streams calls", n)
	}
	// A call that cannot open fails the stream as a Stream call fails:
	// a logical stream, when its call breaks as the open is sent, at its
	// first Recv.
	_ = conn.Close()
	for _, mode := range []sdk.Mode{sdk.ModeWindow, sdk.ModeSession} {
		st, err := c.Stream(ctx, &sdk.Request{Operation: sdk.Operation{Mode: mode}})
		for err == nil {
			_, err = st.Recv()
		}
		if client.CodeOf(err) != client.Cancelled || !strings.Contains(err.Error(), "closing") {
			t.Errorf("%s on a closed connection: %v", mode, err)
		}
	}
}

// breakable is a connection whose Streams calls the test can break.
type breakable struct {
	grpc.ClientConnInterface
	calls  atomic.Int64
	mu     sync.Mutex
	cancel []context.CancelFunc
}

func (b *breakable) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == adapterv1.Adapter_Streams_FullMethodName {
		b.calls.Add(1)
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		b.mu.Lock()
		b.cancel = append(b.cancel, cancel)
		b.mu.Unlock()
	}
	return b.ClientConnInterface.NewStream(ctx, desc, method, opts...)
}

func (b *breakable) breakCalls() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.cancel {
		c()
	}
}

// When the adapter process dies, every stream on its Streams call fails
// as a Stream call of a dead adapter fails: Unavailable.
func TestSharedStreamsAdapterKilled(t *testing.T) {
	p := startSelfAdapter(t, "CRANK_CLIENT_TEST_FEED=1")
	describe(t, p.Client)
	open := openRunning(ctxT(t), t, p.Client, sdk.ModeSession, sdk.ModeAsyncJob, sdk.ModeSession, sdk.ModeWindow)
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	failsWith(t, client.Unavailable, open)
}

// startSelfAdapter starts this test binary as an adapter process, as env
// makes TestMain serve one (client_test.go), the way the host starts
// adapters, for a parallel test; it is killed when the test ends.
func startSelfAdapter(t *testing.T, env string) *client.Process {
	t.Helper()
	if testing.Short() {
		t.Skip("runs an adapter process")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{env}
	p, err := client.Start(client.Config{Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}
