package mcpserver

import (
	"fmt"
	"net"
	"net/url"
	"strings"
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
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}
