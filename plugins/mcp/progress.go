package mcp

import (
	"strconv"
	"sync"
	"sync/atomic"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressBuffer is how many progress notifications of one call wait to be
// passed on; beyond it they are dropped and counted, so that an upstream
// that floods progress costs bounded memory and never stalls the shared
// session's reading (notifications are delivered in the session's read
// loop).
const progressBuffer = 256

// progressRoutes routes the progress notifications of the shared upstream
// sessions to the calls they belong to, by the progress token the adapter
// gave each call (its own, never the client's).
type progressRoutes struct {
	mu    sync.Mutex
	next  uint64
	calls map[string]*progressSink
}

// progressSink receives one call's progress notifications.
type progressSink struct {
	ch      chan *gomcp.ProgressNotificationParams
	dropped atomic.Int64
}

// open registers a call: its token, its sink, and the function that ends
// the registration.
func (r *progressRoutes) open() (string, *progressSink, func()) {
	s := &progressSink{ch: make(chan *gomcp.ProgressNotificationParams, progressBuffer)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]*progressSink{}
	}
	r.next++
	tok := "crank-" + strconv.FormatUint(r.next, 10)
	r.calls[tok] = s
	return tok, s, func() {
		r.mu.Lock()
		delete(r.calls, tok)
		r.mu.Unlock()
	}
}

// deliver hands a notification to its call without waiting: one for no
// call (a late or unknown token) is ignored, one that finds the call's
// buffer full is dropped and counted.
func (r *progressRoutes) deliver(p *gomcp.ProgressNotificationParams) {
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	r.mu.Lock()
	s := r.calls[tok]
	r.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case s.ch <- p:
	default:
		s.dropped.Add(1)
	}
}
