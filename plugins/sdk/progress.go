package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Progress is the progress of a call as its upstream reports it: the host
// relays it to the client that asked, with the client's own progress
// token.
type Progress struct {
	// Progress is how far the call is; it increases with each report.
	Progress float64
	// Total is what Progress will reach; 0 when unknown.
	Total float64
	// Message is readable text, possibly empty.
	Message string
}

// ErrCallEnded is returned by ReportProgress after the call answered, or
// once the host has gone.
var ErrCallEnded = errors.New("the call has ended")

type progressKey struct{}

type progressReporter struct {
	mu    sync.Mutex
	ended bool
	// progress: the host asked for progress; logLevel: for log messages
	// at this level and above (log.go), "" for none.
	progress bool
	logLevel string
	send     func(Progress) error
	sendLog  func(LogMessage) error
	// client: the call's client's capabilities, when the host answers
	// its client requests (ask.go); sendAsk sends one.
	client  json.RawMessage
	sendAsk func(*adapterv1.ClientRequest) error
	asks    *clientAsks
	// inputRequired: the host takes input-required results instead.
	inputRequired bool
	// resume: the host keeps the call's resume state (resume.go), sent
	// with sendResume.
	resume     bool
	sendResume func(json.RawMessage) error
}

// WantsProgress reports whether the host asked for the progress of the
// call whose context ctx is: its client asked for progress and the
// adapter's Description says it reports progress. An adapter asks its
// upstream for progress only then.
func WantsProgress(ctx context.Context) bool {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	return ok && r.progress
}

// ReportProgress sends the progress of the call whose context ctx is to
// the host, before the call's answer; reports are sent in order, one at a
// time (the call waits while the host reads). It does nothing (and
// returns nil) when the host did not ask for progress, and returns
// ErrCallEnded or the host's error once the call has answered or the host
// has gone: the adapter should then stop reporting.
func ReportProgress(ctx context.Context, p Progress) error {
	r, ok := ctx.Value(progressKey{}).(*progressReporter)
	if !ok || !r.progress {
		return nil
	}
	return r.report(func() error { return r.send(p) })
}

// report sends one event of the call, in order, until the call has ended
// or a send failed.
func (r *progressReporter) report(send func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return ErrCallEnded
	}
	if err := send(); err != nil {
		r.ended = true
		return err
	}
	return nil
}

// InvokeWithProgress is Invoke with the call's progress sent ahead of its
// response.
func (s *server) InvokeWithProgress(req *adapterv1.InvokeRequest, stream adapterv1.Adapter_InvokeWithProgressServer) (err error) {
	defer recoverPanic("invoke", &err)
	r := &progressReporter{progress: true, send: func(p Progress) error {
		return stream.Send(&adapterv1.InvokeEvent{Event: &adapterv1.InvokeEvent_Progress{Progress: &adapterv1.Progress{
			Progress: p.Progress, Total: p.Total, Message: p.Message}}})
	}, sendLog: func(m LogMessage) error {
		return stream.Send(&adapterv1.InvokeEvent{Event: &adapterv1.InvokeEvent_Log{Log: &adapterv1.LogMessage{
			Level: m.Level, Logger: m.Logger, DataJson: m.Data}}})
	}, sendResume: func(state json.RawMessage) error { return stream.Send(resumeEvent(state)) }}
	if rl := req.GetRelay(); rl != nil { // a host that predates it asks for progress alone
		r.progress = rl.GetProgress()
		if logLevelRank(rl.GetLogLevel()) >= 0 {
			r.logLevel = rl.GetLogLevel()
		}
		if caps := rl.GetClientCapabilitiesJson(); len(caps) > 0 && json.Valid(caps) {
			r.client, r.asks, r.inputRequired = caps, &s.asks, rl.GetInputRequired()
			r.sendAsk = func(q *adapterv1.ClientRequest) error {
				return stream.Send(&adapterv1.InvokeEvent{Event: &adapterv1.InvokeEvent_ClientRequest{ClientRequest: q}})
			}
		}
		r.resume = rl.GetResume() // sent only to adapters that list "resume"
	}
	ctx := stream.Context()
	if r.resume {
		// Its upstream work outlives a host that died (hostgone.go).
		var done func()
		ctx, done = outliveHost(ctx)
		defer done()
	}
	resp, err := s.Invoke(context.WithValue(ctx, progressKey{}, r), req)
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return stream.Send(&adapterv1.InvokeEvent{Event: &adapterv1.InvokeEvent_Response{Response: resp}})
}
