package sdk

import (
	"context"
	"net/http"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
		{"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-future", true}, // a later version may add fields
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", false}, // version 00 may not
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false}, // upper case
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01", false},
		{"", false},
		{"garbage", false},
	} {
		tc, ok := parseTraceparent(c.in)
		if ok != c.ok {
			t.Errorf("%q: ok = %v", c.in, ok)
			continue
		}
		if ok && c.in[:2] == "00" && tc.traceparent() != c.in {
			t.Errorf("%q formats back as %q", c.in, tc.traceparent())
		}
	}
}

func TestSpansOnlyWhenAsked(t *testing.T) {
	finished.take()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, rc := range []RequestContext{
		{},                // no trace context
		{TraceParent: tp}, // the host does not collect spans
		{TraceParent: tp[:53] + "00", RecordSpans: true}, // not sampled
		{TraceParent: "bad", RecordSpans: true},
	} {
		ctx, span := withCall(context.Background(), &rc, &Operation{}, "call")
		_, child := StartSpan(ctx, "upstream", SpanClient, Attr("k", "v"))
		if span != nil || child != nil {
			t.Errorf("%+v: recorded spans", rc)
		}
		// A nil span is valid.
		child.SetAttributes(Attr("a", 1))
		child.Fail("x")
		child.End()
		h := http.Header{}
		SetTraceHeaders(ctx, h)
		if rc.TraceParent == tp && h.Get("Traceparent") != tp {
			t.Errorf("%+v: traceparent %q, want the host's", rc, h.Get("Traceparent"))
		}
	}
	if s := finished.take(); len(s) != 0 {
		t.Errorf("spans queued: %d", len(s))
	}

	ctx, span := withCall(context.Background(), &RequestContext{TraceParent: tp, TraceState: "k=v", RecordSpans: true}, &Operation{}, "call")
	cctx, child := StartSpan(ctx, "upstream", SpanClient)
	h := http.Header{"Traceparent": {"configured"}}
	SetTraceHeaders(cctx, h)
	if h.Get("Traceparent") != "configured" {
		t.Error("a configured traceparent was replaced")
	}
	h = http.Header{}
	SetTraceHeaders(cctx, h)
	if want := child.traceContext(); h.Get("Traceparent") != want || h.Get("Tracestate") != "k=v" {
		t.Errorf("headers %v, want traceparent %s", h, want)
	}
	child.End()
	child.End() // once
	span.End()
	got := finished.take()
	if len(got) != 2 || got[0] != child || got[1] != span || child.parent != span.spanID {
		t.Fatalf("finished = %+v", got)
	}
}

func (s *Span) traceContext() string {
	tc := traceContext{traceID: s.traceID, spanID: s.spanID, flags: 1}
	return tc.traceparent()
}

func TestFinishedSpansBounded(t *testing.T) {
	finished.take()
	for range maxFinishedSpans + 10 {
		finished.add(&Span{})
	}
	if n := len(finished.take()); n > maxFinishedSpans {
		t.Errorf("%d spans kept", n)
	}
}
