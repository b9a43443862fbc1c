package mcpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/crankmcp/crank/plugins/sdk/loopback"
)

// originPolicy decides which browser origins may call an endpoint. MCP
// servers must validate Origin to prevent DNS rebinding; the go-sdk does
// not by default, so Crank does it before the transport sees the request.
// Only loopback origins and the configured ones pass: matching the Origin
// against the request's own Host would not help, since a rebinding
// attacker controls both.
type originPolicy struct {
	any     bool
	allowed map[string]bool
}

func newOriginPolicy(list []string) (originPolicy, error) {
	p := originPolicy{allowed: map[string]bool{}}
	for _, o := range list {
		if o == "*" {
			p.any = true
			continue
		}
		n, err := normalizeOrigin(o)
		if err != nil {
			return p, fmt.Errorf("%q: %w", o, err)
		}
		p.allowed[n] = true
	}
	return p, nil
}

func (p originPolicy) allows(origin string) bool {
	if p.any {
		return true
	}
	n, err := normalizeOrigin(origin)
	if err != nil {
		return false // "null" and garbage
	}
	if p.allowed[n] {
		return true
	}
	u, _ := url.Parse(n)
	host := u.Hostname()
	// Browsers resolve every *.localhost name to loopback (RFC 6761), so
	// such an origin is a page served on this machine too.
	return loopback.Host(host) || strings.HasSuffix(strings.ToLower(host), ".localhost")
}

func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("an origin is scheme://host[:port]")
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("an origin has no path, query, fragment or credentials")
	}
	// As browsers serialise it: a host name (IDNs in punycode), an IPv4
	// address or a bracketed IPv6 one, no escapes or zones, which url.Parse
	// would decode into a host that serialises differently.
	if strings.ContainsAny(o, "%\\") || strings.Trim(u.Host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:[]") != "" {
		return "", fmt.Errorf("an origin's host is a name or an IP address, without escapes")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// refuseHost refuses a request that reached the endpoint on a loopback
// address but names another host, and reports whether it did. A web page
// whose DNS name an attacker rebound to 127.0.0.1 sends its own name as
// Host: a gateway listening on loopback serves local clients only, and
// they name localhost (in any case: host names are case-insensitive) or a
// loopback address. It is the endpoint's one Host decision, for the hot
// path and the SDK's alike (the SDK's own check is off); made first, it
// keeps such a request from every other check and answers it with a
// JSON-RPC error. A proxy in front of a loopback-bound gateway must send a
// loopback Host.
func (ep *Endpoint) refuseHost(w http.ResponseWriter, r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil || !loopback.HostPort(local.String()) || loopback.HostPort(r.Host) {
		return false
	}
	ep.logger.Warn("request naming a non-loopback Host on a loopback address refused (DNS rebinding protection)",
		zap.String("host", r.Host), zap.String("local", local.String()))
	_, port, _ := net.SplitHostPort(local.String())
	writeJSONRPCError(w, http.StatusForbidden, -32600, fmt.Sprintf(
		"Host %q is refused: this endpoint listens on a loopback address and serves loopback names only "+
			"(DNS rebinding protection); use http://localhost:%s or http://127.0.0.1:%s",
		r.Host, port, port), nil)
	return true
}
