package httpadapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/crankmcp/crank/plugins/sdk"
)

// HandshakeFailure classifies a WebSocket handshake that failed (the
// websocket adapter's feeds, the graphql adapter's subscriptions): the
// call's cancellation (ctx), an answer other than 101 (resp: its status,
// retryable for 408, 429 and 5xx, Rejected for the other 4xx, and an
// sdk.Excerpt of its body), the handshake's own timeout (dial, bounded by
// timeout), a connection the egress rules refused, or a transport
// failure. Messages never quote the URL; the caller sets Upstream.
func HandshakeFailure(ctx, dial context.Context, resp *http.Response, err error, timeout time.Duration) *sdk.UpstreamError {
	switch {
	case ctx.Err() != nil:
		return &sdk.UpstreamError{Kind: sdk.KindCancelled, Message: "cancelled"}
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
		code := resp.StatusCode
		ue := &sdk.UpstreamError{Kind: sdk.KindUpstreamStatus, Status: strconv.Itoa(code),
			Retryable: code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500,
			Rejected:  RejectedStatus(code),
			Message:   fmt.Sprintf("the WebSocket handshake was answered with HTTP %d %s instead of 101", code, http.StatusText(code))}
		if resp.Body != nil {
			if b := ReadExcerpt(resp); utf8.Valid(b) {
				ue.Body = sdk.Excerpt(ctx, b)
			}
		}
		return ue
	case errors.Is(dial.Err(), context.DeadlineExceeded):
		return &sdk.UpstreamError{Kind: sdk.KindTimeout, Retryable: true, Message: fmt.Sprintf("no WebSocket handshake within %s", timeout)}
	case Refused(err):
		return &sdk.UpstreamError{Kind: sdk.KindTransport, Message: "cannot connect: " + ErrorText(err)}
	}
	return &sdk.UpstreamError{Kind: sdk.KindTransport, Retryable: true, Message: "cannot connect: " + ErrorText(err)}
}

// ErrorText is an error's text without the URL a *url.Error quotes (its
// query may carry a credential).
func ErrorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
