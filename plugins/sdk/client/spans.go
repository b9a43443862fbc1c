package client

import (
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
	adapterv1 "github.com/crankmcp/crank/proto/crank/adapter/v1"
)

// Span is a span an adapter recorded for a call and sent back (when the
// request asked for it: sdk.RequestContext.RecordSpans), for the host to
// export as the adapter's.
type Span struct {
	TraceID      [16]byte
	SpanID       [8]byte
	ParentSpanID [8]byte
	TraceState   string
	Name         string
	Kind         sdk.SpanKind
	Start, End   time.Time
	Attributes   []sdk.Attribute
	// Failed: the work failed; Message says why.
	Failed  bool
	Message string
}

// spansFromProto converts the spans of an answer; malformed ones (IDs of
// the wrong length) are skipped.
func spansFromProto(in []*adapterv1.Span) []Span {
	out := make([]Span, 0, len(in))
	for _, p := range in {
		var s Span
		if copy(s.TraceID[:], p.GetTraceId()) != 16 || copy(s.SpanID[:], p.GetSpanId()) != 8 || len(p.GetTraceId()) != 16 || len(p.GetSpanId()) != 8 {
			continue
		}
		copy(s.ParentSpanID[:], p.GetParentSpanId())
		s.TraceState, s.Name, s.Kind = p.GetTraceState(), p.GetName(), sdk.SpanKind(p.GetKind())
		s.Start = time.Unix(0, int64(p.GetStartTimeUnixNano()))
		s.End = time.Unix(0, int64(p.GetEndTimeUnixNano()))
		s.Failed, s.Message = p.GetFailed(), p.GetStatusMessage()
		for _, a := range p.GetAttributes() {
			var v any
			switch x := a.GetValue().(type) {
			case *adapterv1.Attribute_StringValue:
				v = x.StringValue
			case *adapterv1.Attribute_BoolValue:
				v = x.BoolValue
			case *adapterv1.Attribute_IntValue:
				v = x.IntValue
			case *adapterv1.Attribute_DoubleValue:
				v = x.DoubleValue
			default:
				continue
			}
			s.Attributes = append(s.Attributes, sdk.Attribute{Key: a.GetKey(), Value: v})
		}
		out = append(out, s)
	}
	return out
}

// OnSpans makes f receive the spans the adapter sends back (see
// Config.OnSpans); set it before the first call.
func (c *Client) OnSpans(f func([]Span)) { c.onSpans = f }

// spans hands the spans of an answer to the client's span handler.
func (c *Client) spans(in []*adapterv1.Span) {
	if len(in) == 0 || c.onSpans == nil {
		return
	}
	if s := spansFromProto(in); len(s) > 0 {
		c.onSpans(s)
	}
}
