package httpadapter

import (
	"net/http"
	"strconv"

	"github.com/crankmcp/crank/plugins/sdk"
)

// TraceTransport wraps base (http.DefaultTransport when nil) so that every
// request sent through it carries the call's W3C trace context
// (traceparent and tracestate, unless the request sets a traceparent of
// its own, e.g. from an operation's configured headers) and, when the
// host traces the call, is recorded as a client span "METHOD host" from
// the request until the answer's headers arrive. The span names the
// method, the server's address and port, the URL scheme and the answer's
// status, never the URL's path or query (they may carry capability
// tokens); a transport failure or a status of 400 and over fails it.
//
// Give an adapter's http.Client this transport once:
//
//	client := &http.Client{Transport: httpadapter.TraceTransport(&http.Transport{...})}
//
// and send its requests with the call's context (http.NewRequestWithContext).
func TraceTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return traceTransport{base}
}

type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := req.Context(), (*sdk.Span)(nil)
	if sdk.Recording(ctx) { // else the span's name and attributes are built for nothing
		ctx, span = sdk.StartSpan(ctx, req.Method+" "+req.URL.Hostname(), sdk.SpanClient,
			sdk.Attr("http.request.method", req.Method), sdk.Attr("server.address", req.URL.Hostname()),
			sdk.Attr("url.scheme", req.URL.Scheme))
	}
	if span != nil {
		if p := req.URL.Port(); p != "" {
			if n, err := strconv.Atoi(p); err == nil {
				span.SetAttributes(sdk.Attr("server.port", n))
			}
		}
	}
	if tp, ts := sdk.TraceHeaders(ctx); tp != "" && req.Header.Get("Traceparent") == "" {
		// A RoundTripper must not change the request it is given.
		req = req.Clone(ctx)
		req.Header.Set("Traceparent", tp)
		if ts != "" && req.Header.Get("Tracestate") == "" {
			req.Header.Set("Tracestate", ts)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if span != nil {
		switch {
		case err != nil:
			span.SetAttributes(sdk.Attr("error.type", "transport"))
			span.Fail("the request failed before the upstream answered")
		default:
			span.SetAttributes(sdk.Attr("http.response.status_code", resp.StatusCode))
			if resp.StatusCode >= 400 {
				span.Fail("the upstream answered " + strconv.Itoa(resp.StatusCode))
			}
		}
		span.End()
	}
	return resp, err
}
