package sdk

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Tracing: a call carries the host's W3C trace context (traceparent,
// tracestate). An adapter passes it on to its upstream, from the span it
// records for the upstream request:
//
//	ctx, span := sdk.StartSpan(ctx, "GET api.example.com", sdk.SpanClient,
//		sdk.Attr("http.request.method", "GET"), sdk.Attr("server.address", "api.example.com"))
//	defer span.End()
//	sdk.SetTraceHeaders(ctx, req.Header) // traceparent, tracestate
//
// (httpadapter.TraceTransport does this for every request of an
// http.Client.) When the host traces the call (RequestContext.RecordSpans),
// the SDK records the span and sends it back with the adapter's next
// answer; the host exports it as the adapter's, so an adapter needs no
// exporter, collector address or credentials of its own. Otherwise
// StartSpan records nothing and returns a nil *Span, whose methods do
// nothing, and the upstream gets the host's trace context as it came.

// SpanKind says what a span stands for.
type SpanKind int

// Span kinds.
const (
	// SpanInternal is work inside the adapter.
	SpanInternal SpanKind = 1
	// SpanServer is the adapter serving the host's call; the SDK records
	// it for every traced call.
	SpanServer SpanKind = 2
	// SpanClient is a request to the upstream.
	SpanClient SpanKind = 3
)

// Attribute is a span attribute; Value is a string, bool, int, int64 or
// float64 (anything else is recorded as its fmt %v text). Never record a
// secret, an argument value or a URL's path or query (they may carry
// capability tokens): record the upstream's method, host and status.
type Attribute struct {
	Key   string
	Value any
}

// Attr returns an Attribute.
func Attr(key string, value any) Attribute { return Attribute{Key: key, Value: value} }

// Span is a timed piece of an adapter's work for one call. A nil *Span is
// valid and records nothing. A Span is not safe for concurrent use.
type Span struct {
	traceID        [16]byte
	spanID, parent [8]byte
	traceState     string
	name           string
	kind           SpanKind
	start, end     time.Time
	attrs          []Attribute
	failed         bool
	message        string
	ended          bool
}

// SetAttributes adds attributes to the span.
func (s *Span) SetAttributes(attrs ...Attribute) {
	if s != nil {
		s.attrs = append(s.attrs, attrs...)
	}
}

// Fail marks the span's work as failed, with a message that must not
// carry a secret or a URL's query.
func (s *Span) Fail(message string) {
	if s != nil {
		s.failed, s.message = true, message
	}
}

// End ends the span; the SDK sends it to the host with its next answer.
// Ending it again does nothing.
func (s *Span) End() {
	if s == nil || s.ended {
		return
	}
	s.ended, s.end = true, time.Now()
	finished.add(s)
}

// traceContext is a call's W3C trace context as it stands at a point of
// the adapter's work: the IDs a request made there propagates.
type traceContext struct {
	traceID [16]byte
	spanID  [8]byte
	flags   byte
	state   string
	// record: the host collects this call's spans.
	record bool
}

type traceKey struct{}

// StartSpan starts a span as a child of ctx's (the call's, or a span
// started under it) and returns a context carrying it, to pass on to
// requests made for it. It returns a nil *Span and ctx itself when the
// host does not trace the call.
func StartSpan(ctx context.Context, name string, kind SpanKind, attrs ...Attribute) (context.Context, *Span) {
	if !Recording(ctx) {
		return ctx, nil
	}
	tc := ctx.Value(traceKey{}).(*traceContext)
	s := &Span{traceID: tc.traceID, parent: tc.spanID, traceState: tc.state, name: name, kind: kind,
		start: time.Now(), attrs: attrs}
	s.spanID = newSpanID()
	child := *tc
	child.spanID = s.spanID
	return context.WithValue(ctx, traceKey{}, &child), s
}

// Recording reports whether a span started under ctx is recorded (the
// host traces the call and asked for its spans), for a caller that would
// otherwise build a span's name and attributes for nothing.
func Recording(ctx context.Context) bool {
	tc, _ := ctx.Value(traceKey{}).(*traceContext)
	return tc != nil && tc.record
}

// TraceHeaders returns the W3C trace context a request made under ctx
// carries (traceparent, tracestate): its span's, or the call's as the
// host sent it; "" when the call has none.
func TraceHeaders(ctx context.Context) (traceparent, tracestate string) {
	tc, _ := ctx.Value(traceKey{}).(*traceContext)
	if tc == nil {
		return "", ""
	}
	return tc.traceparent(), tc.state
}

// SetTraceHeaders sets traceparent and tracestate on h from ctx (see
// TraceHeaders), unless h already has a traceparent (one an operation's
// configured headers set).
func SetTraceHeaders(ctx context.Context, h http.Header) {
	if h.Get("Traceparent") != "" {
		return
	}
	tp, ts := TraceHeaders(ctx)
	if tp == "" {
		return
	}
	h.Set("Traceparent", tp)
	if ts != "" {
		h.Set("Tracestate", ts)
	}
}

func (tc *traceContext) traceparent() string {
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tc.traceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], tc.spanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{tc.flags})
	return string(b[:])
}

// parseTraceparent reads a W3C traceparent: version 00 exactly, or a later
// version with the same first fields; all-zero IDs are invalid.
func parseTraceparent(s string) (tc traceContext, ok bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || (len(s) > 55 && (s[:2] == "00" || s[55] != '-')) {
		return tc, false
	}
	var version [1]byte
	if !decodeHex(version[:], s[:2]) || version[0] == 0xff ||
		!decodeHex(tc.traceID[:], s[3:35]) || !decodeHex(tc.spanID[:], s[36:52]) {
		return tc, false
	}
	var flags [1]byte
	if !decodeHex(flags[:], s[53:55]) || tc.traceID == [16]byte{} || tc.spanID == [8]byte{} {
		return tc, false
	}
	tc.flags = flags[0]
	return tc, true
}

// decodeHex decodes lowercase hex only, as W3C trace context requires.
func decodeHex(dst []byte, s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

func newSpanID() [8]byte {
	var id [8]byte
	for id == [8]byte{} {
		v := rand.Uint64()
		for i := range id {
			id[i] = byte(v >> (8 * i))
		}
	}
	return id
}

// withCall returns ctx carrying the call's trace context, and the span of
// the adapter serving the call (nil when the host does not trace it).
func withCall(ctx context.Context, rc *RequestContext, op *Operation, name string) (context.Context, *Span) {
	ctx = withOperation(ctx, op) // excerpt.go
	tc, ok := parseTraceparent(rc.TraceParent)
	if !ok {
		return ctx, nil
	}
	tc.state = rc.TraceState
	tc.record = rc.RecordSpans && tc.flags&1 == 1
	ctx = context.WithValue(ctx, traceKey{}, &tc)
	return StartSpan(ctx, name, SpanServer)
}

// finished holds the spans ended since the last answer, process-wide:
// every answer to the host takes them, whichever call they belong to (a
// stream the host cut off cannot send its own), and the host exports each
// under its own IDs. At most maxFinishedSpans wait; beyond, the oldest are
// dropped.
var finished spanQueue

const maxFinishedSpans = 4096

type spanQueue struct {
	n     atomic.Int32
	mu    sync.Mutex
	spans []*Span
}

func (q *spanQueue) add(s *Span) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.spans) >= maxFinishedSpans {
		q.spans = append(q.spans[:0], q.spans[len(q.spans)/2:]...)
	}
	q.spans = append(q.spans, s)
	q.n.Store(int32(len(q.spans)))
}

// take returns the waiting spans and empties the queue.
func (q *spanQueue) take() []*Span {
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.spans
	q.spans = nil
	q.n.Store(0)
	return out
}
