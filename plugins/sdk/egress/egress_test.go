package egress

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestClass(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1":            "loopback",
		"127.9.9.9":            "loopback",
		"::1":                  "loopback",
		"::ffff:127.0.0.1":     "loopback",
		"64:ff9b::7f00:1":      "loopback", // NAT64 of 127.0.0.1
		"2002:7f00:1::":        "loopback", // 6to4 of 127.0.0.1
		"::127.0.0.1":          "loopback", // IPv4-compatible
		"0.0.0.0":              "unspecified",
		"0.1.2.3":              "unspecified",
		"::":                   "unspecified",
		"10.1.2.3":             "private",
		"172.31.0.1":           "private",
		"192.168.1.1":          "private",
		"fd00:ec2::254":        "private", // AWS's IPv6 metadata
		"169.254.169.254":      "link-local",
		"fe80::1":              "link-local",
		"100.100.100.200":      "carrier-grade NAT", // Alibaba's metadata
		"192.0.0.192":          "IETF",              // Oracle's metadata
		"224.0.0.1":            "multicast",
		"255.255.255.255":      "reserved",
		"8.8.8.8":              "",
		"2606:4700:4700::1111": "",
		"100.63.255.255":       "",
		"172.32.0.1":           "",
	} {
		got := Class(netip.MustParseAddr(addr))
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("Class(%s) = %q, want %q", addr, got, want)
		}
	}
}

// Hosts as the resolver reads them: inet_aton's numeric spellings, case,
// a trailing dot.
func TestCanonicalHost(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2130706433":       "127.0.0.1",
		"0x7f000001":       "127.0.0.1",
		"0177.0.0.1":       "127.0.0.1",
		"127.1":            "127.0.0.1",
		"127.0.1":          "127.0.0.1",
		"0x7f.1":           "127.0.0.1",
		"010.0.0.1":        "8.0.0.1",
		"LOCALHOST.":       "localhost",
		"::ffff:127.0.0.1": "127.0.0.1",
		"api.example.com":  "api.example.com",
		"1.2.3.4.5":        "1.2.3.4.5", // not an address: a name
		"256.1":            "256.1",     // a leading part over 255: a name
		"1.256":            "1.0.1.0",
		"08.1.1.1":         "08.1.1.1", // 8 is no octal digit: a name
		"4294967296":       "4294967296",
	} {
		if got := canonicalHost(in); got != want {
			t.Errorf("canonicalHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustRules(t *testing.T, rules ...string) *Rules {
	t.Helper()
	rs, err := New(rules)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// The address dialled: public, or named by a rule itself.
func TestAddr(t *testing.T) {
	t.Parallel()
	any := mustRules(t, "*")
	named := mustRules(t, "*", "localhost:8080", "10.0.0.0/8", "192.168.1.5", "unix:///run/api.sock", "unix-abstract:feed", "https://[fd00::7]/v1/")
	for _, c := range []struct {
		rs        *Rules
		net, addr string
		ok        bool
	}{
		{any, "tcp", "8.8.8.8:443", true},
		{any, "tcp4", "127.0.0.1:2019", false},
		{any, "tcp6", "[::1]:2019", false},
		{any, "tcp6", "[::ffff:127.0.0.1]:2019", false},
		{any, "tcp", "169.254.169.254:80", false},
		{any, "tcp", "10.0.0.8:80", false},
		{any, "unix", "/run/api.sock", false},
		{any, "unix", "@feed", false},
		{named, "tcp", "127.0.0.1:8080", true},
		{named, "tcp", "[::1]:8080", true},
		{named, "tcp", "127.0.0.1:2019", false},
		{named, "tcp", "10.200.0.1:22", true},
		{named, "tcp", "192.168.1.5:443", true},
		{named, "tcp", "192.168.1.6:443", false},
		{named, "tcp", "[fd00::7]:443", true},
		{named, "tcp", "[fd00::7]:80", false},
		{named, "tcp", "169.254.169.254:80", false},
		{named, "unix", "/run/api.sock", true},
		{named, "unix", "/run/../run/api.sock", true},
		{named, "unix", "/run/other.sock", false},
		{named, "unix", "@feed", true},
		{named, "unix", "\x00feed", true},
		{named, "unix", "@other", false},
		{nil, "tcp", "127.0.0.1:2019", true},
	} {
		err := c.rs.Addr(c.net, c.addr)
		if (err == nil) != c.ok {
			t.Errorf("%v: %s %q: %v, want allowed %v", c.rs.List(), c.net, c.addr, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("%v is not ErrRefused", err)
		}
	}
}

// The name dialled, before resolution: the host as written must match a
// rule, as the config's address did.
func TestHost(t *testing.T) {
	t.Parallel()
	rs := mustRules(t, "https://api.example.com/v1/", "*.partner.example", "grpc.internal:50051", "localhost")
	for _, c := range []struct {
		host, port string
		ok         bool
	}{
		{"api.example.com", "443", true},
		{"API.example.com.", "443", true},
		{"api.example.com", "80", false},
		{"feed.partner.example", "8443", true},
		{"grpc.internal", "50051", true},
		{"grpc.internal", "50052", false},
		{"localhost", "2019", true}, // its addresses are checked as dialled
		{"127.0.0.1", "2019", false},
		{"2130706433", "2019", false},
		{"evil.example", "443", false},
	} {
		if err := rs.Host(c.host, c.port); (err == nil) != c.ok {
			t.Errorf("%s:%s: %v, want allowed %v", c.host, c.port, err, c.ok)
		}
	}
	if err := mustRules(t, "*").Host("0x7f000001", "80"); err == nil || !strings.Contains(err.Error(), "0x7f000001:80 is a loopback address") {
		t.Errorf("a numeric loopback under *: %v", err)
	}
}

// A DNS server on loopback that answers every A question with the
// address its name says (ten.0.0.8.test: 10.0.0.8, anything else:
// 127.0.0.1) and every other question with no answer.
func fakeDNS(t *testing.T) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	answers := map[string][4]byte{"metadata.test.": {169, 254, 169, 254}, "private.test.": {10, 0, 0, 8}}
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			// The question: its name's labels after the 12-byte header.
			var name strings.Builder
			i := 12
			for i < len(q) && q[i] != 0 {
				l := int(q[i])
				name.Write(q[i+1 : i+1+l])
				name.WriteByte('.')
				i += 1 + l
			}
			qend := i + 5 // the root label, type and class
			qtype := binary.BigEndian.Uint16(q[i+1:])
			resp := append([]byte(nil), q[:qend]...)
			resp[2] |= 0x84 // a response, authoritative
			resp[3] = 0
			binary.BigEndian.PutUint16(resp[6:], 0) // no answers yet
			if qtype == 1 {
				ip, ok := answers[name.String()]
				if !ok {
					ip = [4]byte{127, 0, 0, 1}
				}
				binary.BigEndian.PutUint16(resp[6:], 1)
				resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
				resp = append(resp, ip[:]...)
			}
			_, _ = pc.WriteTo(resp, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// A name that DNS points at a local address is refused where it is
// dialled, after resolution, whatever the config said of the name.
func TestDialContextChecksResolvedAddresses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	d := &net.Dialer{Timeout: 5 * time.Second, Resolver: fakeDNS(t)}
	ctx := context.Background()
	for name, want := range map[string]string{
		"internal.corp.example": "(127.0.0.1:" + port + ") is a loopback address",
		"metadata.test":         "(169.254.169.254:" + port + ") is a link-local address",
		"private.test":          "(10.0.0.8:" + port + ") is a private address",
	} {
		_, err := mustRules(t, "*").DialContext(d)(ctx, "tcp", net.JoinHostPort(name, port))
		var ee *Error
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), name+" "+want) {
			t.Errorf("%s: %v, want a refusal naming it and %q", name, err, want)
		}
	}
	// A rule that names the address lets it through.
	conn, err := mustRules(t, "*", "127.0.0.1").DialContext(d)(ctx, "tcp", net.JoinHostPort("internal.corp.example", port))
	if err != nil {
		t.Fatalf("a named address: %v", err)
	}
	conn.Close()
	// No rules, no check.
	if conn, err = (*Rules)(nil).DialContext(d)(ctx, "tcp", net.JoinHostPort("internal.corp.example", port)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestRulesParse(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"ftp://x/", "https://x/?q=1", "*.", "**", "unix:relative", "https://u:p@x/", "10.0.0.0/33", "host:99999", "unix-abstract:"} {
		if _, err := New([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("rule %q: %v", bad, err)
		}
	}
	rs := mustRules(t, "*", "10.0.0.0/8")
	if rs.Key() == mustRules(t, "*").Key() || (*Rules)(nil).Key() != "" || mustRules(t).Key() == "" {
		t.Error("keys of different rules are equal")
	}
	if nothing := mustRules(t); nothing.Target(Target{Scheme: "https", Host: "api.example.com"}) || nothing.Addr("tcp", "8.8.8.8:443") == nil && nothing.Host("api.example.com", "443") == nil {
		t.Error("no rules allow something")
	}
}
