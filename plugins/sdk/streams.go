package sdk

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/crankmcp/crank/plugins/sdk/internal/wire"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Streams serves many logical streams and unary calls on one call: each
// open runs the adapter's Stream in a goroutine of its own, as a Stream
// call would, its events sent on the call within the stream's credit;
// each invoke runs the adapter's Invoke in a goroutine of its own (an
// idle one of the call's, else a new one), as an Invoke call would, and
// sends its answer. It ends when the host ends the call, cancelling every
// stream and call still running. An adapter that does not stream serves
// it for its unary calls, and fails each open UNIMPLEMENTED.
func (s *server) Streams(call adapterv1.Adapter_StreamsServer) error {
	ctx, cancel := context.WithCancel(call.Context())
	m := &streamsCall{call: call, open: map[uint64]*logicalStream{}}
	idle := make(chan func())
	defer func() {
		close(idle) // the idle goroutines end
		cancel()
		// Streams still running send nothing more: a handler's stream
		// must not be written to once the handler returned.
		m.sendMu.Lock()
		m.closed = true
		m.sendMu.Unlock()
	}()
	for {
		req, err := call.Recv()
		if err != nil {
			// The host ended the call (io.EOF) or is gone.
			return nil
		}
		id := req.GetId()
		switch msg := req.GetMessage().(type) {
		case *adapterv1.StreamsRequest_Open:
			l, err := m.add(ctx, id, true)
			if err != nil {
				return err
			}
			go s.serveLogical(m, l, msg.Open)
		case *adapterv1.StreamsRequest_Invoke:
			l, err := m.add(ctx, id, false)
			if err != nil {
				return err
			}
			if d := msg.Invoke.GetContext().GetDeadline(); d != nil {
				l.deadline = d.AsTime()
			}
			run(idle, func() { s.serveInvocation(m, l, msg.Invoke) })
		case *adapterv1.StreamsRequest_Cancel:
			// A call past its deadline ends by it, as an Invoke call
			// does, whether its deadline or the host's cancel (sent when
			// the host's context ended at that deadline) comes first.
			if l := m.get(id); l != nil && (l.deadline.IsZero() || time.Now().Before(l.deadline)) {
				l.cancel()
			}
		case *adapterv1.StreamsRequest_Credit:
			if l := m.get(id); l != nil {
				l.grant(msg.Credit)
			}
		}
		// A message of a newer protocol revision: skip it.
	}
}

// serveLogical runs one logical stream to its end and sends how it
// failed, if it did.
func (s *server) serveLogical(m *streamsCall, l *logicalStream, req *adapterv1.InvokeRequest) {
	defer m.remove(l)
	err := s.serveStream(l.ctx, req, l.send)
	if err == nil {
		return
	}
	st := status.Convert(err)
	_ = m.send(nil, &adapterv1.StreamsEvent{Id: l.id, Message: &adapterv1.StreamsEvent_Failed{
		Failed: &adapterv1.StreamFailed{Code: int32(st.Code()), Message: st.Message()}}})
}

// run runs f in an idle goroutine waiting on idle, or else in a new one
// that waits there once f returned, until idle is closed: a unary call
// then costs no new goroutine, nor the growth of its stack, while the
// call's goroutines are as many as its unary calls at once.
func run(idle chan func(), f func()) {
	select {
	case idle <- f:
	default:
		go func() {
			for ; f != nil; f = <-idle {
				f()
			}
		}()
	}
}

// serveInvocation runs one unary call of the Streams call, as the Invoke
// call would (server.go), bounded by the request's deadline, and sends its
// answer, or how it failed.
func (s *server) serveInvocation(m *streamsCall, l *logicalStream, req *adapterv1.InvokeRequest) {
	defer m.remove(l)
	ctx := l.ctx
	if !l.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, l.deadline)
		defer cancel()
	}
	resp, err := s.Invoke(ctx, req)
	if err != nil {
		st := status.Convert(err)
		_ = m.send(l, &adapterv1.StreamsEvent{Id: l.id, Message: &adapterv1.StreamsEvent_Failed{
			Failed: &adapterv1.StreamFailed{Code: int32(st.Code()), Message: st.Message()}}})
		return
	}
	_ = m.send(l, &adapterv1.StreamsEvent{Id: l.id, Message: &adapterv1.StreamsEvent_Invoked{Invoked: resp}})
}

// send sends ev on the call unless the handler returned, or l (when not
// nil) was cancelled meanwhile.
func (m *streamsCall) send(l *logicalStream, ev *adapterv1.StreamsEvent) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	if m.closed || l != nil && l.ctx.Err() != nil {
		return status.FromContextError(context.Canceled).Err()
	}
	return m.call.Send(ev)
}

// streamsCall is one Streams call: its logical streams and the sending
// side they share.
type streamsCall struct {
	call adapterv1.Adapter_StreamsServer

	mu   sync.Mutex
	open map[uint64]*logicalStream

	// sendMu serializes sends; closed is set when the handler returns.
	sendMu sync.Mutex
	closed bool
}

// add registers the logical stream (stream) or unary call id.
func (m *streamsCall) add(ctx context.Context, id uint64, stream bool) (*logicalStream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.open[id]; ok {
		return nil, status.Errorf(codes.InvalidArgument, "logical stream %d opened twice", id)
	}
	l := &logicalStream{m: m, id: id}
	if stream {
		l.credit = make(chan struct{}, 1)
	}
	l.ctx, l.cancel = context.WithCancel(ctx)
	m.open[id] = l
	return l, nil
}

func (m *streamsCall) get(id uint64) *logicalStream {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open[id]
}

func (m *streamsCall) remove(l *logicalStream) {
	l.cancel()
	m.mu.Lock()
	delete(m.open, l.id)
	m.mu.Unlock()
}

// logicalStream is one stream, or unary call, of a Streams call.
type logicalStream struct {
	m      *streamsCall
	id     uint64
	ctx    context.Context
	cancel context.CancelFunc
	// deadline is a unary call's, if it has one.
	deadline time.Time

	mu sync.Mutex
	// outstanding are the bytes sent that the host has not granted back.
	outstanding int64
	// credit is signalled when the host grants more; nil for a unary
	// call.
	credit chan struct{}
}

// grant takes the host's grant of n more bytes.
func (l *logicalStream) grant(n uint64) {
	l.mu.Lock()
	l.outstanding -= int64(min(n, 1<<62))
	l.mu.Unlock()
	select {
	case l.credit <- struct{}{}:
	default:
	}
}

// send sends one event of the stream once its credit allows, on the
// stream's goroutine.
func (l *logicalStream) send(ev *adapterv1.StreamEvent) error {
	n := int64(proto.Size(ev))
	for {
		l.mu.Lock()
		if l.outstanding < wire.StreamCreditBytes {
			l.outstanding += n
			l.mu.Unlock()
			break
		}
		l.mu.Unlock()
		select {
		case <-l.credit:
		case <-l.ctx.Done():
			return status.FromContextError(l.ctx.Err()).Err()
		}
	}
	return l.m.send(l, &adapterv1.StreamsEvent{Id: l.id, Message: &adapterv1.StreamsEvent_Event{Event: ev}})
}
