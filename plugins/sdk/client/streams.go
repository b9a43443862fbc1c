package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// A client carries the streams of sessions and jobs, which it may read
// for hours, as logical streams of one Streams call per client (opened at
// the first, opened again after it broke) rather than as a Stream call
// each: a logical stream costs the host no goroutine, and the adapter no
// call, while it lives. One goroutine reads the call and hands each event
// to its stream's queue, which the stream's credit bounds.
//
// Its unary calls, to an adapter that takes them there
// (Capabilities.StreamsInvoke), travel on a second Streams call of the
// same kind: each an invoke and its answer, which the call's reader hands
// to the waiting caller. The two calls are apart so that a large answer
// never holds up a stream's events, nor a busy stream an answer.

// eventSource is what a Stream reads its events from: a Stream call, or a
// logical stream of the Streams call.
type eventSource interface {
	Recv() (*adapterv1.StreamEvent, error)
}

// callSlot is where a client keeps one of its Streams calls: the one of
// its streams, or the one of its unary calls.
type callSlot struct {
	mu sync.Mutex
	sh *sharedStreams // nil until the first, or once it broke
	// unimplemented: the adapter answered the call UNIMPLEMENTED all the
	// same; the client does without it from then on.
	unimplemented atomic.Bool
}

// member is what a Streams call's reader hands the events of one id to:
// a logical stream, or a unary call waiting for its answer.
type member interface {
	// take takes an event of the member's id, from the call's reader.
	take(ev *adapterv1.StreamsEvent)
	// end ends the member with the call's error, when the call broke.
	end(err error)
}

// sharedStreams is one Streams call and the logical streams, or unary
// calls, open on it.
type sharedStreams struct {
	c    *Client
	slot *callSlot
	// opened is closed once the call is open (call, cancel) or failed to
	// open (openErr).
	opened  chan struct{}
	openErr error
	call    adapterv1.Adapter_StreamsClient
	cancel  context.CancelFunc

	sendMu sync.Mutex

	mu   sync.Mutex
	open map[uint64]member
	next uint64
	// err is why the call broke; no stream is opened on it then.
	err error
}

// openLogical opens a logical stream of req on the client's Streams call.
func (c *Client) openLogical(ctx context.Context, req *adapterv1.InvokeRequest) (*logicalStream, error) {
	for {
		sh, err := c.sharedCall(ctx, &c.streamsCall)
		if err != nil {
			return nil, err
		}
		m, ok := sh.add(func(id uint64) member {
			return &logicalStream{sh: sh, id: id, ctx: ctx, ready: make(chan struct{}, 1)}
		})
		if !ok {
			continue // it broke meanwhile
		}
		s := m.(*logicalStream)
		// A failed send broke the call: its reader ends the stream with
		// the call's error.
		_ = sh.send(&adapterv1.StreamsRequest{Id: s.id, Message: &adapterv1.StreamsRequest_Open{Open: req}})
		stop := context.AfterFunc(ctx, s.abandon)
		s.mu.Lock()
		if s.ended {
			stop()
		} else {
			s.stop = stop
		}
		s.mu.Unlock()
		return s, nil
	}
}

// invokeShared makes a unary call on the client's Streams call of unary
// calls, answering as the Invoke call would: the adapter's answer, or the
// gRPC status the call failed with, the context's when it ended first.
func (c *Client) invokeShared(ctx context.Context, req *adapterv1.InvokeRequest) (*adapterv1.InvokeResponse, error) {
	if req.Context.Deadline == nil {
		// The adapter bounds the call by it: there is no gRPC deadline.
		if d, ok := ctx.Deadline(); ok {
			req.Context.Deadline = timestamppb.New(d)
		}
	}
	for {
		sh, err := c.sharedCall(ctx, &c.invokeCall)
		if err != nil {
			return nil, err
		}
		m, ok := sh.add(func(id uint64) member {
			return &invocation{id: id, answer: make(chan invokeAnswer, 1)}
		})
		if !ok {
			continue // it broke meanwhile
		}
		inv := m.(*invocation)
		// A failed send broke the call: its reader ends the call with the
		// call's error.
		_ = sh.send(&adapterv1.StreamsRequest{Id: inv.id, Message: &adapterv1.StreamsRequest_Invoke{Invoke: req}})
		select {
		case a := <-inv.answer:
			if d, ok := ctx.Deadline(); ok && a.err != nil && !time.Now().Before(d) {
				// The adapter's context ended at the same deadline, and
				// its failure came first: the call is past its deadline,
				// as an Invoke call would say.
				return nil, status.FromContextError(context.DeadlineExceeded).Err()
			}
			return a.resp, a.err
		case <-ctx.Done():
			if sh.forget(inv.id, inv) {
				// A failed send broke the call, which ends it too.
				_ = sh.send(&adapterv1.StreamsRequest{Id: inv.id, Message: &adapterv1.StreamsRequest_Cancel{Cancel: &adapterv1.CancelStream{}}})
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// invocation is a unary call on a Streams call, waiting for its answer.
type invocation struct {
	id uint64
	// answer gets the one answer: the call's reader sends it, once.
	answer chan invokeAnswer
}

type invokeAnswer struct {
	resp *adapterv1.InvokeResponse
	err  error
}

func (inv *invocation) take(ev *adapterv1.StreamsEvent) {
	switch m := ev.GetMessage().(type) {
	case *adapterv1.StreamsEvent_Invoked:
		inv.answer <- invokeAnswer{resp: m.Invoked}
	case *adapterv1.StreamsEvent_Failed:
		inv.end(status.Error(codes.Code(m.Failed.GetCode()), m.Failed.GetMessage()))
	default:
		// Not an answer (an adapter bug): fail the call rather than wait.
		inv.end(status.Error(codes.Internal, "adapter protocol violation: the answer to a unary call is not one"))
	}
}

func (inv *invocation) end(err error) { inv.answer <- invokeAnswer{err: err} }

// sharedCall returns the client's Streams call kept in slot, opening it
// if there is none; ctx bounds the wait for it to open.
func (c *Client) sharedCall(ctx context.Context, slot *callSlot) (*sharedStreams, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	slot.mu.Lock()
	sh := slot.sh
	if sh == nil {
		sh = &sharedStreams{c: c, slot: slot, opened: make(chan struct{}), open: map[uint64]member{}}
		slot.sh = sh
		go sh.run()
	}
	slot.mu.Unlock()
	select {
	case <-sh.opened:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return sh, sh.openErr
}

// run opens the call and reads it until it breaks.
func (sh *sharedStreams) run() {
	// The call lives as long as it has streams to carry, or longer: no
	// caller's context bounds it.
	ctx, cancel := context.WithCancel(context.Background())
	call, err := sh.c.rpc.Streams(ctx)
	if err != nil {
		cancel()
		sh.openErr = err
		sh.drop()
		close(sh.opened)
		return
	}
	sh.call, sh.cancel = call, cancel
	close(sh.opened)
	sh.demux()
}

// drop makes the next stream open a new call.
func (sh *sharedStreams) drop() {
	sh.slot.mu.Lock()
	defer sh.slot.mu.Unlock()
	if sh.slot.sh == sh {
		sh.slot.sh = nil
	}
}

// add registers the member newMember makes of the next id; false when
// the call broke.
func (sh *sharedStreams) add(newMember func(id uint64) member) (member, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.err != nil {
		return nil, false
	}
	sh.next++
	m := newMember(sh.next)
	sh.open[sh.next] = m
	return m, true
}

// forget removes the member of id; false when it was not open any more.
func (sh *sharedStreams) forget(id uint64, m member) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.open[id] != m {
		return false
	}
	delete(sh.open, id)
	return true
}

func (sh *sharedStreams) send(req *adapterv1.StreamsRequest) error {
	sh.sendMu.Lock()
	defer sh.sendMu.Unlock()
	return sh.call.Send(req)
}

// demux reads the call, handing each event to its member, until the
// call breaks. A unary call is answered once: its member is forgotten
// before it takes its answer.
func (sh *sharedStreams) demux() {
	for {
		ev, err := sh.call.Recv()
		if err != nil {
			sh.broke(err)
			return
		}
		id := ev.GetId()
		sh.mu.Lock()
		m := sh.open[id]
		if _, unary := m.(*invocation); unary {
			delete(sh.open, id)
		}
		sh.mu.Unlock()
		if m == nil {
			continue // cancelled: what the adapter sent meanwhile is dropped
		}
		m.take(ev)
	}
}

// take hands an event of the call to the stream.
func (s *logicalStream) take(ev *adapterv1.StreamsEvent) {
	switch m := ev.GetMessage().(type) {
	case *adapterv1.StreamsEvent_Event:
		s.deliver(m.Event)
	case *adapterv1.StreamsEvent_Failed:
		s.sh.forget(s.id, s)
		s.end(status.Error(codes.Code(m.Failed.GetCode()), m.Failed.GetMessage()))
	}
	// A message of a newer protocol revision: skip it.
}

// broke fails every stream of a broken call as a broken Stream call
// fails, and makes the next stream open a new call.
func (sh *sharedStreams) broke(err error) {
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unavailable, "the adapter ended the streams call")
	}
	if status.Code(err) == codes.Unimplemented {
		sh.slot.unimplemented.Store(true) // Stream, or Invoke, from now on
	}
	sh.drop()
	sh.mu.Lock()
	sh.err = err
	open := sh.open
	sh.open = nil
	sh.mu.Unlock()
	for _, m := range open {
		m.end(err)
	}
	sh.cancel()
}

// logicalStream is one stream of a Streams call, as its Stream reads it.
type logicalStream struct {
	sh  *sharedStreams
	id  uint64
	ctx context.Context

	mu    sync.Mutex
	queue []queuedEvent
	// outstanding are the bytes received and not granted back; taken
	// those of them the reader took.
	outstanding, taken int
	// ended: nothing more comes; the reader gets err after the queue.
	ended bool
	err   error
	// stop stops the cancellation of the stream when its context ends.
	stop  func() bool
	ready chan struct{}
}

type queuedEvent struct {
	ev   *adapterv1.StreamEvent
	size int
}

// deliver queues an event from the adapter, within the stream's credit.
func (s *logicalStream) deliver(ev *adapterv1.StreamEvent) {
	n := proto.Size(ev)
	if n == 0 {
		return // nothing in it
	}
	s.mu.Lock()
	if s.outstanding >= wire.StreamCreditBytes {
		s.mu.Unlock()
		if s.sh.forget(s.id, s) {
			go s.cancelAtAdapter()
		}
		s.end(status.Errorf(codes.Internal, "adapter protocol violation: the adapter sent more than the credit of %d bytes of its stream allows", wire.StreamCreditBytes))
		return
	}
	s.outstanding += n
	s.queue = append(s.queue, queuedEvent{ev, n})
	var last bool
	switch ev.GetEvent().(type) {
	case *adapterv1.StreamEvent_End, *adapterv1.StreamEvent_Error:
		last = true
	}
	s.mu.Unlock()
	if last {
		s.sh.forget(s.id, s)
		s.end(io.EOF)
	} else {
		s.signal()
	}
}

// end ends the stream with err, which its reader gets after the events
// queued.
func (s *logicalStream) end(err error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.err = true, err
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.signal()
}

func (s *logicalStream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// abandon cancels the stream at the adapter when its context ended
// first.
func (s *logicalStream) abandon() {
	if s.sh.forget(s.id, s) {
		s.cancelAtAdapter()
	}
	s.signal()
}

// cancelAtAdapter asks the adapter to stop the stream; what it sends
// meanwhile is dropped. A failed send broke the call, which ends it too.
func (s *logicalStream) cancelAtAdapter() {
	_ = s.sh.send(&adapterv1.StreamsRequest{Id: s.id, Message: &adapterv1.StreamsRequest_Cancel{Cancel: &adapterv1.CancelStream{}}})
}

// Recv returns the stream's next event, as a Stream call's Recv does: its
// error is the gRPC status the stream ended with, io.EOF after its last
// event, or its context's.
func (s *logicalStream) Recv() (*adapterv1.StreamEvent, error) {
	for {
		if err := s.ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			q := s.queue[0]
			s.queue[0] = queuedEvent{}
			s.queue = s.queue[1:]
			grant := 0
			if s.taken += q.size; s.taken >= wire.StreamCreditBytes/2 && !s.ended {
				grant, s.outstanding, s.taken = s.taken, s.outstanding-s.taken, 0
			}
			s.mu.Unlock()
			if grant > 0 {
				_ = s.sh.send(&adapterv1.StreamsRequest{Id: s.id, Message: &adapterv1.StreamsRequest_Credit{Credit: uint64(grant)}})
			}
			return q.ev, nil
		}
		if s.ended {
			err := s.err
			s.mu.Unlock()
			return nil, err
		}
		s.mu.Unlock()
		select {
		case <-s.ready:
		case <-s.ctx.Done():
		}
	}
}
