package httpadapter

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/crankmcp/crank/plugins/sdk/egress"
	"github.com/crankmcp/crank/plugins/sdk/lru"
)

// ClientOptions are what the HTTP clients of adapters differ in. The zero
// value verifies servers with the system roots, follows redirects within
// the first request's origin only and may connect anywhere.
type ClientOptions struct {
	// TLS is the client TLS of the upstream's connections, as
	// sdk.ClientTLS.Load makes it; nil: the system roots verify servers.
	TLS *tls.Config
	// CheckRedirect is the client's redirect rule (http.Client's); nil is
	// [SameOriginRedirects], the one rule of every client: a redirect to
	// another origin is never followed (a request's credentials and body
	// never reach another host). An adapter that wants such a redirect as
	// the answer returns http.ErrUseLastResponse for it.
	CheckRedirect func(req *http.Request, via []*http.Request) error
	// Egress are the rules every connection of the client is held to,
	// checked on the address dialled (sdk.Operation.Egress); nil: none.
	Egress *egress.Rules
}

// NewClient returns an adapter's HTTP client: a keep-alive connection
// pool per upstream (host and port: up to 128 idle connections each, 512
// in all, where Go's default keeps 2 per host), HTTP/2 where the server
// offers it (a WebSocket handshake stays HTTP/1.1), the proxy from the
// environment, at most 10s to connect and 10s for the TLS handshake,
// answer headers up to 1 MiB, and every request traced
// ([TraceTransport]). With Egress, every connection (redirects and
// reconnects included) is checked where it is dialled, and a request's
// Host header must name its URL's host. Make one per TLS config and rules
// ([Clients] keeps them) and share it between calls; send each request
// with the call's context, which bounds it.
func NewClient(o ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	redirect := o.CheckRedirect
	if redirect == nil {
		redirect = SameOriginRedirects
	}
	t := &http.Transport{
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
	}
	var rt http.RoundTripper = t
	if rs := o.Egress; rs != nil {
		restricted, proxies := rs.DialContext(dialer), environmentProxies()
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if proxies[addr] {
				return dialer.DialContext(ctx, network, addr) // the operator's proxy: checked in Proxy
			}
			return restricted(ctx, network, addr)
		}
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			u, err := http.ProxyFromEnvironment(req)
			if u == nil || err != nil {
				return u, err
			}
			// The proxy resolves the name and connects: check them now.
			return u, rs.Resolve(req.Context(), req.URL.Hostname(), portOf(req.URL))
		}
		rt = hostHeaderCheck{t}
	}
	return &http.Client{Transport: TraceTransport(rt), CheckRedirect: redirect}
}

// hostHeaderCheck refuses a request whose Host header names another host
// than its URL: under egress rules, the host a request is for is the one
// the rules allowed.
type hostHeaderCheck struct{ base http.RoundTripper }

func (h hostHeaderCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Host != "" && !sameHost(req.Host, req.URL) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &egress.Error{Host: req.URL.Hostname(), Address: req.URL.Host,
			Reason: "asked for with the Host header " + strconv.Quote(req.Host), Rules: "a Host header must name the URL's host"}
	}
	return h.base.RoundTrip(req)
}

// sameHost reports whether a Host header names u's host and port (the
// scheme's default port written or not).
func sameHost(host string, u *url.URL) bool {
	h := &url.URL{Scheme: u.Scheme, Host: host}
	return strings.EqualFold(strings.TrimSuffix(h.Hostname(), "."), strings.TrimSuffix(u.Hostname(), ".")) && portOf(h) == portOf(u)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" || u.Scheme == "wss" {
		return "443"
	}
	return "80"
}

// environmentProxies are the host:port addresses of the proxies the
// environment names (HTTP_PROXY, HTTPS_PROXY in either case), which
// net/http dials in place of the upstream.
func environmentProxies() map[string]bool {
	out := map[string]bool{}
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		s := os.Getenv(v)
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			if u, err = url.Parse("http://" + s); err != nil {
				continue
			}
		}
		out[net.JoinHostPort(u.Hostname(), portOf(u))] = true
	}
	return out
}

// Clients are an adapter's HTTP clients for one ClientOptions (its
// Egress aside), one per egress rules: connections dialled under one
// entry's rules are never pooled for another's.
type Clients struct {
	opts ClientOptions
	m    *lru.Cache[string, *http.Client]
}

// maxClients bounds the clients of a Clients: one per distinct rules (a
// catalog's), few in practice.
const maxClients = 64

// NewClients returns the clients of o, made on first use.
func NewClients(o ClientOptions) *Clients {
	return &Clients{opts: o, m: lru.New[string, *http.Client](maxClients, func(_ string, cl *http.Client) { cl.CloseIdleConnections() })}
}

// For returns the client whose connections are held to rs.
func (c *Clients) For(rs *egress.Rules) *http.Client {
	cl, _ := c.m.GetOrPut(rs.Key(), func() *http.Client {
		o := c.opts
		o.Egress = rs
		return NewClient(o)
	})
	return cl
}

// Refused reports whether err is a connection the egress rules refused.
func Refused(err error) bool { return errors.Is(err, egress.ErrRefused) }
