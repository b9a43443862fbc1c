package graphql

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	sse "github.com/tmaxmax/go-sse"

	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/httpadapter"
)

// sseConnection runs one subscription over GraphQL over SSE in distinct
// connections mode: a POST of the request answered by a text/event-stream
// of next events, ended by a complete event. An answer that is a GraphQL
// response instead is the server refusing the subscription (errors) or a
// single result (data). established says the stream was opened,
// progressed that an event arrived.
func (s *subStream) sseConnection(ctx context.Context) (established, progressed bool, err error) {
	c := s.c
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The server must answer (send its headers) within the timeout; the
	// host bounds the rest of the stream.
	answered := httpadapter.CancelUnanswered(s.timeout, cancel, errCallTimeout)
	defer answered()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, c.sub.url, bytes.NewReader(s.request))
	if err != nil {
		return false, false, s.fail(sdk.KindInvalidArgument, false, "subscriptions.url does not make a valid request")
	}
	if c.host != "" {
		req.Host = c.host
	}
	req.Header = c.requestHeader("text/event-stream", true)
	req.Header["Cache-Control"] = []string{"no-cache"}
	resp, err := s.client.Do(req)
	answered()
	if err != nil {
		return false, false, s.httpFailure(ctx, cctx, err, false)
	}
	defer httpadapter.DrainAndClose(resp.Body)
	mt := httpadapter.MediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, false, s.notAStream(resp, mt)
	}
	n, err := s.readEvents(resp.Body)
	if err != nil && ctx.Err() != nil {
		return true, n > 0, nil
	}
	var ue *sdk.UpstreamError
	if err != nil && !errors.As(err, &ue) && !errors.Is(err, errHostGone) {
		err = s.httpFailure(ctx, cctx, err, true)
	}
	return true, n > 0, err
}

// readEvents reads an event stream of next events until its complete
// event (nil), its end without one (a retryable transport error: the
// connection was lost), an event larger than max_message_bytes (the
// parser cannot go on after one: a retryable bad response, so run
// subscribes again with a gap) or a read error (returned as is). n counts
// the next events.
func (s *subStream) readEvents(body io.Reader) (n int, err error) {
	max := s.c.sub.maxMessage
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: max}) {
		switch {
		case errors.Is(err, bufio.ErrTooLong):
			return n, s.fail(sdk.KindBadResponse, true,
				fmt.Sprintf("an event larger than subscriptions.max_message_bytes (%d) was skipped", max))
		case err != nil:
			return n, err
		}
		switch ev.Type {
		case "complete":
			return n, nil
		case "next":
			n++
			if err := s.event([]byte(ev.Data)); err != nil {
				return n, err
			}
		}
	}
	return n, s.fail(sdk.KindTransport, true, "the event stream ended without a complete event")
}

// notAStream classifies an answer that is not an event stream: GraphQL
// errors refuse the subscription; a result with data is its only event;
// anything else is an HTTP status error or a bad response.
func (s *subStream) notAStream(resp *http.Response, mt string) error {
	body, over, err := httpadapter.ReadBounded(resp.Body, int64(s.c.sub.maxMessage), resp.ContentLength)
	if err != nil && !over {
		return s.fail(sdk.KindTransport, true, "cannot read the answer: "+httpadapter.ErrorText(err))
	}
	if gr, ok := parseResponse(body); ok && !over {
		if gr.data == nil {
			return s.refused(gr.rawErrors, resp.StatusCode, false)
		}
		return s.event(body) // one result, and the end of the stream
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ue := s.c.statusError(s.t, resp, body)
		ue.Upstream = s.upstream
		return ue
	}
	return s.fail(sdk.KindBadResponse, false, "the answer to a subscription is not an event stream (text/event-stream) nor a GraphQL response; Content-Type "+orUnknown(mt))
}

// httpFailure classifies an error of sending the request or reading the
// stream (a subscription is read-only: it may be retried).
func (s *subStream) httpFailure(parent, call context.Context, err error, reading bool) *sdk.UpstreamError {
	hc := httpadapter.Call{Upstream: s.upstream, Host: s.c.sub.hostport, AddressField: "subscriptions.url", Idempotent: true, Timeout: s.timeout}
	ue := hc.Failure(parent, errors.Is(context.Cause(call), errCallTimeout), err, reading)
	if reading && errors.Is(err, io.ErrUnexpectedEOF) {
		ue.Retryable = true
	}
	return ue
}
