package httpadapter

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// ClientOptions are what the HTTP clients of adapters differ in. The zero
// value verifies servers with the system roots and follows no redirect.
type ClientOptions struct {
	// TLS is the client TLS of the upstream's connections, as
	// sdk.ClientTLS.Load makes it; nil: the system roots verify servers.
	TLS *tls.Config
	// CheckRedirect is the client's redirect rule (http.Client's):
	// [SameOriginRedirects] follows redirects within the first request's
	// origin; nil follows none, the 3xx being the answer (a request whose
	// body or headers carry credentials must not be resent elsewhere).
	CheckRedirect func(req *http.Request, via []*http.Request) error
}

// NewClient returns an adapter's HTTP client: a keep-alive connection
// pool per upstream (host and port: up to 128 idle connections each, 512
// in all, where Go's default keeps 2 per host), HTTP/2 where the server
// offers it (a WebSocket handshake stays HTTP/1.1), the proxy from the
// environment, at most 10s to connect and 10s for the TLS handshake,
// answer headers up to 1 MiB, and every request traced
// ([TraceTransport]). Make one per TLS config and share it between calls;
// send each request with the call's context, which bounds it.
func NewClient(o ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	redirect := o.CheckRedirect
	if redirect == nil {
		redirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return &http.Client{
		Transport: TraceTransport(&http.Transport{
			Proxy:                  http.ProxyFromEnvironment,
			DialContext:            dialer.DialContext,
			TLSClientConfig:        o.TLS,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           512,
			MaxIdleConnsPerHost:    128,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  1 * time.Second,
			MaxResponseHeaderBytes: 1 << 20,
		}),
		CheckRedirect: redirect,
	}
}
