// Package egress decides what a connection may reach, where it is
// dialled. An operation's Rules (a catalog's upstreams, as its handler
// allows them) are checked twice: on the address as written, when its
// config is read (Rules.Target), and on the address actually dialled,
// after DNS resolution, on every connection, redirect and reconnect
// (Rules.DialContext, Rules.Control). A name that resolves to a local
// address, a numeric spelling of one, a redirect to one: each is refused
// when the socket is about to connect, not when a string is read.
//
// A nil *Rules allows everything: an operations file's entries, which the
// operator writes, and the gateway's own connections. The package uses
// the standard library only, so the gateway and every adapter share it.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ErrRefused is what every refusal of this package matches (errors.Is).
var ErrRefused = errors.New("egress refused")

// Error is a connection or an address the rules refuse. Its message names
// the host and address and why, never a path or query (they may hold
// secrets).
type Error struct {
	// Host is the name the connection was for, "" when it is not known
	// (a gRPC target resolved by gRPC's own resolver).
	Host string
	// Address is what was dialled or written: ip:port, a unix socket.
	Address string
	// Reason says what it is, e.g. "a loopback address".
	Reason string
	// Local: it is on the gateway's host or networks, which only a rule
	// naming it allows.
	Local bool
	// Rules are the rules that refused it.
	Rules string
}

func (e *Error) Error() string {
	what := e.Address
	if e.Host != "" && e.Host != e.Address && !strings.HasPrefix(e.Address, e.Host+":") {
		what = e.Host + " (" + e.Address + ")"
	}
	msg := fmt.Sprintf("egress refused: %s is %s, which the rules this entry is held to do not allow (%s)", what, e.Reason, e.Rules)
	if e.Local {
		msg += "; a local address is allowed only by a rule naming it (an address, a range such as 10.0.0.0/8, localhost, a unix socket)"
	}
	return msg
}

func (e *Error) Unwrap() error { return ErrRefused }

// Target is an address as written in a config: an absolute URL, a gRPC
// target (host:port, dns:///host:port, passthrough:///host:port,
// unix:///path, unix:path, unix-abstract:name) or a host.
type Target struct {
	Scheme string // http, https, ws, wss; "" for host:port (a gRPC target)
	Host   string // lower case, without brackets
	Port   string // "" when the scheme's default
	Path   string // a URL's escaped path; a unix socket's path or abstract name
	// Unix: a unix socket (Path); Abstract: an abstract one (Linux).
	Unix, Abstract bool
}

func (t Target) String() string {
	switch {
	case t.Abstract:
		return "unix-abstract:" + t.Path
	case t.Unix:
		return "unix://" + t.Path
	case t.Scheme == "" && t.Port == "":
		return hostLiteral(t.Host)
	case t.Scheme == "":
		return net.JoinHostPort(t.Host, t.Port)
	case t.Port == "":
		return t.Scheme + "://" + hostLiteral(t.Host)
	}
	return t.Scheme + "://" + net.JoinHostPort(t.Host, t.Port)
}

func hostLiteral(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// ParseTarget reads an address as written (see Target).
func ParseTarget(s string) (Target, error) {
	if name, ok := strings.CutPrefix(s, "unix-abstract:"); ok {
		if name == "" {
			return Target{}, errors.New("an abstract unix socket needs a name (unix-abstract:name)")
		}
		return Target{Unix: true, Abstract: true, Path: name}, nil
	}
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		p = strings.TrimPrefix(p, "//")
		if !strings.HasPrefix(p, "/") {
			return Target{}, errors.New("a unix socket must be an absolute path (unix:///path)")
		}
		return Target{Unix: true, Path: filepath.Clean(p)}, nil
	}
	for _, pre := range []string{"dns:", "passthrough:"} {
		if rest, ok := strings.CutPrefix(s, pre); ok {
			// dns:[//authority]/host:port: the endpoint is the last segment.
			rest = strings.TrimPrefix(rest, "//")
			if i := strings.LastIndexByte(rest, '/'); i >= 0 {
				rest = rest[i+1:]
			}
			s = rest
			break
		}
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return Target{}, errors.New("not a valid URL")
		}
		scheme := strings.ToLower(u.Scheme)
		if _, ok := defaultPorts[scheme]; !ok {
			return Target{}, fmt.Errorf("scheme %q is not http, https, ws or wss", u.Scheme)
		}
		if u.Host == "" || u.User != nil {
			return Target{}, errors.New("a URL needs a host and no userinfo")
		}
		for seg := range strings.SplitSeq(u.Path, "/") {
			if seg == "." || seg == ".." {
				return Target{}, errors.New("a URL path with . or .. segments")
			}
		}
		port := u.Port()
		if port == defaultPorts[scheme] {
			port = ""
		}
		if !validHost(u.Hostname()) || !validPort(port) {
			return Target{}, errors.New("not a host name or IP address and port")
		}
		return Target{Scheme: scheme, Host: canonicalHost(u.Hostname()), Port: port, Path: u.EscapedPath()}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.Trim(s, "[]"), ""
	}
	if !validHost(host) || !validPort(port) {
		// A gRPC resolver scheme of its own (xds:, vsock:, ...) lands
		// here too: it is not an address the rules can judge.
		return Target{}, errors.New("not a host or host:port")
	}
	return Target{Host: canonicalHost(host), Port: port}, nil
}

// validHost reports whether h is an IP address or a DNS name.
func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return h != "" && strings.Trim(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == ""
}

func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n <= 65535 && strings.Trim(p, "0123456789") == ""
}

// canonicalHost is a host as the resolver reads it: lower case, without a
// trailing dot, and an IPv4 address written in one of the forms
// inet_aton takes (2130706433, 0x7f000001, 0177.0.0.1, 127.1) in
// dotted decimal.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if ip, ok := legacyIPv4(h); ok {
		return ip.String()
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

// legacyIPv4 parses the IPv4 spellings inet_aton accepts: one to four
// parts separated by dots, each decimal, octal (a leading 0) or
// hexadecimal (0x), the last filling the bytes left.
func legacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			p, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil || p == "" && base != 8 {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// Local reports whether the target is on the gateway's own host or
// network as written: a unix socket, a localhost name, or an address
// that Class finds local.
func (t Target) Local() bool {
	if t.Unix || t.Host == "localhost" || strings.HasSuffix(t.Host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(t.Host)
	return err == nil && Class(ip) != ""
}

// special are the address ranges that are not the public internet: the
// gateway's own host, its networks, cloud metadata services, and
// addresses no upstream has.
var special = []struct {
	p    netip.Prefix
	what string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"}, // connects to this host
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud metadata lives there)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address (cloud metadata lives there)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("fc00::/7"), "a private address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	compat    = netip.MustParsePrefix("::/96")
)

// Class says what kind of local or non-public address ip is ("a loopback
// address", "a private address", ...), "" for a public one. An IPv4
// address inside IPv6 (mapped, compatible, NAT64, 6to4) is judged by the
// IPv4 address it carries.
func Class(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip), compat.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback():
			ip = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(ip):
			ip = netip.AddrFrom4([4]byte(b[2:6]))
		}
	}
	for _, s := range special {
		if s.p.Contains(ip) {
			return s.what
		}
	}
	return ""
}

// rule is one rule of Rules.
type rule struct {
	any    bool         // *
	suffix string       // *.example.com: ".example.com"
	prefix netip.Prefix // 10.0.0.0/8
	t      Target       // a host, host:port, URL prefix or unix socket
}

func parseRule(s string) (rule, error) {
	switch {
	case s == "*":
		return rule{any: true}, nil
	case strings.HasPrefix(s, "*."):
		d := strings.ToLower(s[1:])
		if strings.ContainsAny(d, "*/:@ ") || len(d) < 2 {
			return rule{}, errors.New("a domain wildcard is *.example.com")
		}
		return rule{suffix: d}, nil
	case strings.Contains(s, "/") && !strings.Contains(s, ":/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return rule{}, errors.New("an address range is written 10.0.0.0/8 or fd00::/8")
		}
		return rule{prefix: p.Masked()}, nil
	}
	t, err := ParseTarget(s)
	if err != nil {
		return rule{}, err
	}
	if t.Scheme != "" && strings.ContainsAny(s[len(t.Scheme)+3:], "?#") {
		return rule{}, errors.New("a URL prefix has no query or fragment")
	}
	return rule{t: t}, nil
}

// target reports whether the rule allows t as written.
func (r rule) target(t Target) bool {
	switch {
	case r.any:
		return !t.Local()
	case r.suffix != "":
		return !t.Local() && strings.HasSuffix(t.Host, r.suffix)
	case r.prefix.IsValid():
		ip, err := netip.ParseAddr(t.Host)
		return err == nil && !t.Unix && r.prefix.Contains(ip)
	case r.t.Unix:
		return t.Unix && t.Abstract == r.t.Abstract && t.Path == r.t.Path
	case t.Unix:
		return false
	}
	if r.t.Host != t.Host || r.t.Port != "" && r.t.Port != t.Port {
		return false
	}
	if r.t.Scheme == "" {
		return true // a host (and port): any scheme, any path
	}
	if r.t.Scheme != t.Scheme || r.t.Port != t.Port {
		return false
	}
	prefix := strings.TrimSuffix(r.t.Path, "/")
	return prefix == "" || t.Path == prefix || strings.HasPrefix(t.Path, prefix+"/")
}

// host reports whether the rule allows a connection to host:port, the
// name as dialled (no scheme or path to judge).
func (r rule) host(host, port string) bool {
	t := Target{Host: canonicalHost(host), Port: port}
	switch {
	case r.any, r.suffix != "", r.prefix.IsValid():
		return r.target(t)
	case r.t.Unix:
		return false
	}
	want := r.t.Port
	if want == "" {
		want = defaultPorts[r.t.Scheme] // "" for a host rule: any port
	}
	return r.t.Host == t.Host && (want == "" || want == port)
}

// addr reports whether the rule names the address ip:port itself: an IP
// rule, a range, or localhost for a loopback address.
func (r rule) addr(ip netip.Addr, port string) bool {
	switch {
	case r.prefix.IsValid():
		return r.prefix.Contains(ip)
	case r.any, r.suffix != "", r.t.Unix:
		return false
	}
	want := r.t.Port
	if want == "" {
		want = defaultPorts[r.t.Scheme]
	}
	if want != "" && want != port {
		return false
	}
	if r.t.Host == "localhost" {
		return ip.IsLoopback()
	}
	rip, err := netip.ParseAddr(r.t.Host)
	return err == nil && rip == ip
}

// Rules are what an operation's connections may reach (a catalog's
// upstreams): each a URL prefix (https://api.example.com/v1/: scheme,
// host, port and whole path segments), a host with or without a port
// (api.example.com, 10.0.0.5:8443), every subdomain of one
// (*.example.com), an address range (10.0.0.0/8), a unix socket
// (unix:///run/api.sock, unix-abstract:name), or * for any host that is
// not local.
//
// A connection is allowed when a rule allows its host as written and
// every address it connects to is public — or is named by a rule
// itself: an IP address, a range, localhost (loopback), a socket. So a
// name, a wildcard or * never reaches a loopback, private, link-local,
// carrier-grade NAT, unspecified or metadata address, whatever DNS says.
//
// A nil *Rules allows everything. Rules are immutable.
type Rules struct {
	list []rule
	text []string
}

// New parses rules; the error names the first one that is not a rule.
// New(nil) is a Rules that allows nothing.
func New(rules []string) (*Rules, error) {
	rs := &Rules{text: slices.Clone(rules)}
	for _, s := range rules {
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		rs.list = append(rs.list, r)
	}
	return rs, nil
}

// Check reports whether s is a rule, and if not, why.
func Check(s string) error {
	_, err := parseRule(s)
	return err
}

// List returns the rules as written; nil for a nil Rules.
func (rs *Rules) List() []string {
	if rs == nil {
		return nil
	}
	return slices.Clone(rs.text)
}

// Key identifies the rules, for caching what is built for them
// (connection pools): "" for a nil Rules.
func (rs *Rules) Key() string {
	if rs == nil {
		return ""
	}
	return "\x00" + strings.Join(rs.text, "\x00")
}

func (rs *Rules) String() string {
	if len(rs.text) == 0 {
		return "none"
	}
	return strings.Join(rs.text, ", ")
}

// Target reports whether a rule allows the address as written (a URL, a
// gRPC target): the check of a config as it is read. The addresses it
// will connect to are checked again when dialled.
func (rs *Rules) Target(t Target) bool {
	if rs == nil {
		return true
	}
	return slices.ContainsFunc(rs.list, func(r rule) bool { return r.target(t) })
}

// Host checks a connection to host:port (the name as dialled) against
// the rules, before it is resolved.
func (rs *Rules) Host(host, port string) error {
	if rs == nil || slices.ContainsFunc(rs.list, func(r rule) bool { return r.host(host, port) }) {
		return nil
	}
	e := &Error{Host: host, Address: net.JoinHostPort(host, port), Reason: "not a host they name", Rules: rs.String()}
	t := Target{Host: canonicalHost(host)}
	if ip, err := netip.ParseAddr(t.Host); err == nil && Class(ip) != "" {
		e.Reason, e.Local = Class(ip), true
	} else if t.Local() {
		e.Reason, e.Local = "a local host name", true
	}
	return e
}

// Addr checks an address about to be connected to (network tcp, tcp4,
// tcp6, udp…: ip:port; unix: a socket path, an abstract one starting
// with @ or NUL): a public address, or one a rule names.
func (rs *Rules) Addr(network, address string) error {
	if rs == nil {
		return nil
	}
	if strings.HasPrefix(network, "unix") {
		t := Target{Unix: true, Path: filepath.Clean(address)}
		if name, ok := strings.CutPrefix(address, "@"); ok {
			t = Target{Unix: true, Abstract: true, Path: name}
		} else if name, ok := strings.CutPrefix(address, "\x00"); ok {
			t = Target{Unix: true, Abstract: true, Path: name}
		}
		if slices.ContainsFunc(rs.list, func(r rule) bool { return r.t.Unix && r.target(t) }) {
			return nil
		}
		return &Error{Address: t.String(), Reason: "a local socket", Local: true, Rules: rs.String()}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Error{Address: address, Reason: "not an IP address and port", Rules: rs.String()}
	}
	ip, port := ap.Addr().WithZone("").Unmap(), strconv.Itoa(int(ap.Port()))
	class := Class(ip)
	if class == "" || slices.ContainsFunc(rs.list, func(r rule) bool { return r.addr(ip, port) }) {
		return nil
	}
	return &Error{Address: netip.AddrPortFrom(ip, ap.Port()).String(), Reason: class, Local: true, Rules: rs.String()}
}

// Control is a net.Dialer's Control: it checks every address the dialer
// is about to connect to (Addr), after DNS resolution.
func (rs *Rules) Control(network, address string, _ syscall.RawConn) error {
	return rs.Addr(network, address)
}

// DialContext wraps a dialer's DialContext for connections under the
// rules: the name dialled is checked (Host), then every address it
// resolves to as the dialer connects (Control). A nil Rules returns
// d.DialContext itself. d is copied, not changed.
func (rs *Rules) DialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	if rs == nil {
		return d.DialContext
	}
	dc := *d
	dc.ControlContext = nil
	dc.Control = rs.Control
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if !strings.HasPrefix(network, "unix") {
			host, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, &Error{Address: address, Reason: "not a host and port", Rules: rs.String()}
			}
			if err := rs.Host(host, port); err != nil {
				return nil, err
			}
			conn, err := dc.DialContext(ctx, network, address)
			var ee *Error
			if errors.As(err, &ee) {
				named := *ee
				named.Host = host
				return nil, &named
			}
			return conn, err
		}
		return dc.DialContext(ctx, network, address)
	}
}

// Resolve checks a connection to host:port that another party will make
// (a proxy, which resolves the name itself): the name, then every address
// it resolves to now. What the proxy resolves later is its own.
func (rs *Rules) Resolve(ctx context.Context, host, port string) error {
	if rs == nil {
		return nil
	}
	if err := rs.Host(host, port); err != nil {
		return err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if err := rs.Addr("tcp", net.JoinHostPort(ip.String(), port)); err != nil {
			ee := *err.(*Error)
			ee.Host = host
			return &ee
		}
	}
	return nil
}
