package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// pump streams n items of pad bytes (0: until cancelled), then fails as
// its arguments say; it reports each stream whose context ended.
type pump struct {
	unaryOnly
	ended chan string
}

func (p pump) Stream(ctx context.Context, req *sdk.Request, send sdk.StreamSender) error {
	var a struct {
		Name, Fail string
		N, Pad     int
	}
	_ = json.Unmarshal(req.Arguments, &a)
	defer func() {
		if ctx.Err() != nil {
			p.ended <- a.Name
		}
	}()
	for i := 0; a.N == 0 || i < a.N; i++ {
		if err := send.Item(sdk.Item{Data: json.RawMessage(`"` + strings.Repeat("x", a.Pad) + `"`)}); err != nil {
			return err
		}
	}
	switch a.Fail {
	case "bug":
		return errors.New("nil map")
	case "panic":
		panic("boom")
	case "upstream":
		return &sdk.UpstreamError{Kind: sdk.KindTimeout, Message: "slow"}
	}
	return nil
}

// streamsCall opens a Streams call on an adapter served in this process,
// its messages read into a channel.
func streamsCall(t *testing.T, a sdk.Adapter) (adapterv1.Adapter_StreamsClient, <-chan *adapterv1.StreamsEvent, context.CancelFunc) {
	t.Helper()
	rc := adaptertest.Serve(t, a)
	conn, err := grpc.NewClient("unix://"+rc.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	call, err := adapterv1.NewAdapterClient(conn).Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *adapterv1.StreamsEvent, 1000)
	go func() {
		defer close(events)
		for {
			ev, err := call.Recv()
			if err != nil {
				if status.Code(err) != codes.Canceled {
					events <- &adapterv1.StreamsEvent{Message: &adapterv1.StreamsEvent_Failed{Failed: &adapterv1.StreamFailed{
						Code: int32(status.Code(err)), Message: status.Convert(err).Message()}}}
				}
				return
			}
			events <- ev
		}
	}()
	return call, events, cancel
}

func open(t *testing.T, call adapterv1.Adapter_StreamsClient, id uint64, args string) {
	t.Helper()
	err := call.Send(&adapterv1.StreamsRequest{Id: id, Message: &adapterv1.StreamsRequest_Open{Open: &adapterv1.InvokeRequest{
		Operation: &adapterv1.Operation{Name: "op", Mode: adapterv1.ExecutionMode_EXECUTION_MODE_WINDOW}, ArgumentsJson: []byte(args)}}})
	if err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, events <-chan *adapterv1.StreamsEvent) *adapterv1.StreamsEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the call ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return nil
}

// The adapter sends a logical stream's events within its credit, as the
// host grants more; each stream has its own, and its own end.
func TestStreamsCredit(t *testing.T) {
	t.Parallel()
	call, events, _ := streamsCall(t, pump{ended: make(chan string, 10)})
	open(t, call, 1, `{"Name":"slow","N":40,"Pad":30000}`)
	// Nothing is granted back: the slow stream stops at its credit while
	// the other one runs to its end.
	bytes, items := 0, 0
	for {
		ev := next(t, events)
		if ev.GetId() != 1 || ev.GetEvent().GetItem() == nil {
			t.Fatalf("event %v", ev)
		}
		bytes += proto.Size(ev.GetEvent())
		if items++; bytes >= 256<<10 {
			break
		}
	}
	open(t, call, 2, `{"Name":"quick","N":5,"Pad":1000,"Fail":"upstream"}`)
	for i := range 6 {
		ev := next(t, events)
		if ev.GetId() != 2 || (i < 5) != (ev.GetEvent().GetItem() != nil) || i == 5 && ev.GetEvent().GetError().GetMessage() != "slow" {
			t.Fatalf("quick event %d: %v", i, ev)
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("beyond the credit: %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
	for items < 40 {
		if err := call.Send(&adapterv1.StreamsRequest{Id: 1, Message: &adapterv1.StreamsRequest_Credit{Credit: uint64(bytes)}}); err != nil {
			t.Fatal(err)
		}
		bytes = 0
		for bytes < 200<<10 && items < 40 {
			ev := next(t, events)
			if ev.GetId() != 1 || ev.GetEvent().GetItem() == nil {
				t.Fatalf("event %v", ev)
			}
			bytes += proto.Size(ev.GetEvent())
			items++
		}
	}
	if err := call.Send(&adapterv1.StreamsRequest{Id: 1, Message: &adapterv1.StreamsRequest_Credit{Credit: uint64(bytes)}}); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); ev.GetId() != 1 || ev.GetEvent().GetEnd() == nil {
		t.Fatalf("end: %v", ev)
	}
}

// A logical stream fails with the status a Stream call would fail with:
// an adapter failure, a panic, the host's cancel. The call's end cancels
// the streams still running.
func TestStreamsFailures(t *testing.T) {
	t.Parallel()
	p := pump{ended: make(chan string, 10)}
	call, events, cancelCall := streamsCall(t, p)
	open(t, call, 7, `{"Name":"bug","N":1,"Fail":"bug"}`)
	open(t, call, 8, `{"Name":"panic","Fail":"panic","N":1}`)
	open(t, call, 9, `{"Name":"cancelled","Pad":10}`)
	failed := map[uint64]*adapterv1.StreamFailed{}
	for len(failed) < 2 {
		if ev := next(t, events); ev.GetFailed() != nil {
			failed[ev.GetId()] = ev.GetFailed()
		}
	}
	if f := failed[7]; codes.Code(f.GetCode()) != codes.Internal || f.GetMessage() != "stream: nil map" {
		t.Errorf("adapter failure: %v", f)
	}
	if f := failed[8]; codes.Code(f.GetCode()) != codes.Internal || f.GetMessage() != "stream: internal error (panic), see the adapter log" {
		t.Errorf("panic: %v", f)
	}
	if err := call.Send(&adapterv1.StreamsRequest{Id: 9, Message: &adapterv1.StreamsRequest_Cancel{Cancel: &adapterv1.CancelStream{}}}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, events)
		if f := ev.GetFailed(); f != nil {
			if ev.GetId() != 9 || codes.Code(f.GetCode()) != codes.Canceled {
				t.Errorf("cancelled: %v", ev)
			}
			break
		}
	}
	if name := <-p.ended; name != "cancelled" {
		t.Errorf("ended %s", name)
	}

	open(t, call, 10, `{"Name":"orphan","Pad":10}`)
	next(t, events)
	cancelCall()
	select {
	case name := <-p.ended:
		if name != "orphan" {
			t.Errorf("ended %s", name)
		}
	case <-time.After(10 * time.Second):
		t.Error("the call's end did not cancel its stream")
	}
}

// An adapter that does not stream answers Streams UNIMPLEMENTED.
func TestStreamsUnimplemented(t *testing.T) {
	t.Parallel()
	call, events, _ := streamsCall(t, unaryOnly{})
	open(t, call, 1, `{}`)
	if ev := next(t, events); codes.Code(ev.GetFailed().GetCode()) != codes.Unimplemented {
		t.Errorf("got %v", ev)
	}
}
