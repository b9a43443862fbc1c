// Package loopback decides whether a host names this machine's loopback
// interface: an IP literal in 127.0.0.0/8 or ::1 (bracketed or not), or
// exactly the name localhost (in any case). Nothing else is loopback — not
// 127.attacker.example, 127.0.0.1.nip.io or localhost.attacker.example,
// which any DNS server may point anywhere.
//
// It is the one definition Crank uses wherever loopback is decided: plain
// http allowed for an authorization server or an etcd endpoint, plaintext
// gRPC by default, the DNS rebinding protection of the MCP endpoint, the
// console's local user, the embedded etcd's listeners. It lives in the SDK
// module, with the standard library only, so that the gateway's packages
// and the adapters (which import nothing of the gateway) share it.
package loopback

import (
	"net"
	"net/netip"
	"strings"
)

// Host reports whether host — an IP literal (IPv6 bracketed or not) or a
// name, without a port — is a loopback address or localhost.
func Host(host string) bool {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// HostPort is Host for a host[:port], such as a URL's or a request's Host
// or a listener's address.
func HostPort(hostport string) bool {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return Host(h)
	}
	return Host(hostport)
}
