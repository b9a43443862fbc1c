package httpadapter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/crankmcp/crank/plugins/sdk"
)

// Call describes one HTTP request an adapter makes, for classifying
// its failures (Call.Failure).
type Call struct {
	// Upstream is UpstreamError.Upstream, e.g. "GET http://billing" (the
	// scheme and host: never a path, query or userinfo).
	Upstream string
	// Host is the host:port messages name (never the whole URL: its query
	// may carry secrets).
	Host string
	// AddressField names the config field of the upstream's address
	// ("url", "endpoint"), for the hint given when a plain-HTTP upstream
	// is called with https.
	AddressField string
	// Idempotent: repeating the request is safe (it may have been
	// processed when it failed).
	Idempotent bool
	// Timeout is the adapter's own per-call timeout.
	Timeout time.Duration
}

// Failure classifies an error of sending the request (reading false) or of
// reading the answer: the host's cancellation or deadline (parent), the
// adapter's own timeout (timedOut: the call's context ended by Timeout),
// or a transport failure explained without quoting the URL.
func (c Call) Failure(parent context.Context, timedOut bool, err error, reading bool) *sdk.UpstreamError {
	ue := &sdk.UpstreamError{Upstream: c.Upstream}
	when := "before the upstream answered"
	if reading {
		when = "while reading the upstream's answer"
	}
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		ue.Kind = sdk.KindCancelled
		ue.Message = "the call was cancelled " + when
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		ue.Kind = sdk.KindTimeout
		ue.Message = "the call's deadline expired " + when
		ue.Retryable = c.Idempotent
	case timedOut:
		ue.Kind = sdk.KindTimeout
		ue.Message = "timeout: the upstream did not answer within " + c.Timeout.String()
		if reading {
			ue.Message = "timeout: the upstream's answer was not complete within " + c.Timeout.String()
		}
		ue.Retryable = c.Idempotent
	default:
		ue.Kind = sdk.KindTransport
		msg, retry := c.describeTransport(err, reading)
		ue.Message = msg
		ue.Retryable = retry == retryAlways || retry == retryIdempotent && c.Idempotent
	}
	return ue
}

// retryClass says whether a transport failure may go away on a retry.
type retryClass int

const (
	retryNever      retryClass = iota
	retryIdempotent            // only if the request is idempotent: it may have been processed
	retryAlways                // the request never reached the upstream
)

// describeTransport explains a transport error without quoting the request
// URL (its query string may carry secrets).
func (c Call) describeTransport(err error, reading bool) (string, retryClass) {
	host := c.Host
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		hostErr x509.HostnameError
		authErr x509.UnknownAuthorityError
		recErr  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case Refused(err):
		return ErrorText(err), retryNever
	case errors.As(err, &dnsErr):
		retry := retryNever
		if dnsErr.IsTemporary || dnsErr.IsTimeout {
			retry = retryAlways
		}
		return fmt.Sprintf("cannot resolve the upstream host %s: DNS lookup failed: %s", dnsErr.Name, dnsErr.Err), retry
	case errors.Is(err, syscall.ECONNREFUSED):
		return "cannot connect to " + host + ": connection refused", retryAlways
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &authErr):
		return "TLS handshake with " + host + " failed: " + err.Error(), retryNever
	case errors.As(err, &recErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS handshake with " + host + " failed: the upstream does not speak TLS (is the " + c.AddressField + " http rather than https?)", retryNever
	case errors.Is(err, syscall.ECONNRESET):
		if reading {
			return "the connection to " + host + " was reset while reading the answer", retryIdempotent
		}
		return "the connection to " + host + " was reset by the upstream", retryIdempotent
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		if reading {
			return "the upstream " + host + " closed the connection before the answer was complete", retryIdempotent
		}
		return "the upstream " + host + " closed the connection without answering", retryIdempotent
	case errors.As(err, &netErr) && netErr.Timeout():
		return "the connection to " + host + " timed out", retryIdempotent
	}
	if reading {
		return "reading the answer from " + host + " failed: " + err.Error(), retryIdempotent
	}
	return "request to " + host + " failed: " + err.Error(), retryNever
}

// RejectedStatus reports whether an HTTP status code refuses the request
// as such (UpstreamError.Rejected): a 4xx other than 408 Request Timeout
// and 429 Too Many Requests.
func RejectedStatus(code int) bool {
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}

// ReadBounded reads r up to limit bytes. over reports a longer body; hint
// is the announced length (-1 if unknown) used to size the buffer.
func ReadBounded(r io.Reader, limit, hint int64) (b []byte, over bool, err error) {
	size := int64(512)
	if hint >= 0 {
		size = hint + 1 // room to see EOF without growing
	}
	size = min(size, limit+1)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf[:limit], true, nil
			}
			n := min(max(2*int64(cap(buf)), 512), limit+1)
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf[:limit], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// CancelUnanswered bounds the wait for an answer's headers, not the
// stream that follows: unless the returned answered is called within
// timeout, cancel is called with cause. Call answered once the headers
// are in (or the request failed), and again when done (it is idempotent).
func CancelUnanswered(timeout time.Duration, cancel context.CancelCauseFunc, cause error) (answered func()) {
	t := time.AfterFunc(timeout, func() { cancel(cause) })
	return func() { t.Stop() }
}

// DrainAndClose reads a little of what is left of an answer body so the
// connection can be reused, then closes it.
func DrainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}
