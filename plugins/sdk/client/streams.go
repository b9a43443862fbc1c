package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// A client carries the streams of sessions and jobs, which it may read
// for hours, as logical streams of one Streams call per client (opened at
// the first, opened again after it broke) rather than as a Stream call
// each: a logical stream costs the host no goroutine, and the adapter no
// call, while it lives. One goroutine reads the call and hands each event
// to its stream's queue, which the stream's credit bounds.

// eventSource is what a Stream reads its events from: a Stream call, or a
// logical stream of the Streams call.
type eventSource interface {
	Recv() (*adapterv1.StreamEvent, error)
}

// sharedStreams is one Streams call and the logical streams open on it.
type sharedStreams struct {
	c *Client
	// opened is closed once the call is open (call, cancel) or failed to
	// open (openErr).
	opened  chan struct{}
	openErr error
	call    adapterv1.Adapter_StreamsClient
	cancel  context.CancelFunc

	sendMu sync.Mutex

	mu   sync.Mutex
	open map[uint64]*logicalStream
	next uint64
	// err is why the call broke; no stream is opened on it then.
	err error
}

// openLogical opens a logical stream of req on the client's Streams call.
func (c *Client) openLogical(ctx context.Context, req *adapterv1.InvokeRequest) (*logicalStream, error) {
	for {
		sh, err := c.sharedCall(ctx)
		if err != nil {
			return nil, err
		}
		s, ok := sh.add(ctx)
		if !ok {
			continue // it broke meanwhile
		}
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

// sharedCall returns the client's Streams call, opening it if there is
// none; ctx bounds the wait for it to open.
func (c *Client) sharedCall(ctx context.Context) (*sharedStreams, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	c.sharedMu.Lock()
	sh := c.shared
	if sh == nil {
		sh = &sharedStreams{c: c, opened: make(chan struct{}), open: map[uint64]*logicalStream{}}
		c.shared = sh
		go sh.run()
	}
	c.sharedMu.Unlock()
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
	sh.c.sharedMu.Lock()
	defer sh.c.sharedMu.Unlock()
	if sh.c.shared == sh {
		sh.c.shared = nil
	}
}

// add registers a new logical stream; false when the call broke.
func (sh *sharedStreams) add(ctx context.Context) (*logicalStream, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.err != nil {
		return nil, false
	}
	sh.next++
	s := &logicalStream{sh: sh, id: sh.next, ctx: ctx, ready: make(chan struct{}, 1)}
	sh.open[s.id] = s
	return s, true
}

// forget removes a stream; false when it was not open any more.
func (sh *sharedStreams) forget(s *logicalStream) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.open[s.id] != s {
		return false
	}
	delete(sh.open, s.id)
	return true
}

func (sh *sharedStreams) send(req *adapterv1.StreamsRequest) error {
	sh.sendMu.Lock()
	defer sh.sendMu.Unlock()
	return sh.call.Send(req)
}

// demux reads the call, handing each event to its stream, until the call
// breaks.
func (sh *sharedStreams) demux() {
	for {
		ev, err := sh.call.Recv()
		if err != nil {
			sh.broke(err)
			return
		}
		sh.mu.Lock()
		s := sh.open[ev.GetId()]
		sh.mu.Unlock()
		if s == nil {
			continue // cancelled: what the adapter sent meanwhile is dropped
		}
		switch m := ev.GetMessage().(type) {
		case *adapterv1.StreamsEvent_Event:
			s.deliver(m.Event)
		case *adapterv1.StreamsEvent_Failed:
			sh.forget(s)
			s.end(status.Error(codes.Code(m.Failed.GetCode()), m.Failed.GetMessage()))
		}
		// A message of a newer protocol revision: skip it.
	}
}

// broke fails every stream of a broken call as a broken Stream call
// fails, and makes the next stream open a new call.
func (sh *sharedStreams) broke(err error) {
	if errors.Is(err, io.EOF) {
		err = status.Error(codes.Unavailable, "the adapter ended the streams call")
	}
	if status.Code(err) == codes.Unimplemented {
		sh.c.noStreams.Store(true) // Stream from now on
	}
	sh.drop()
	sh.mu.Lock()
	sh.err = err
	open := sh.open
	sh.open = nil
	sh.mu.Unlock()
	for _, s := range open {
		s.end(err)
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
		if s.sh.forget(s) {
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
		s.sh.forget(s)
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
	if s.sh.forget(s) {
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
