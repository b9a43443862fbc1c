package loopback

import "testing"

func TestHost(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"127.0.0.1", "127.255.0.9", "::1", "[::1]", "localhost", "LocalHost", "::ffff:127.0.0.1"} {
		if !Host(h) {
			t.Errorf("Host(%q) = false, want true", h)
		}
	}
	for _, h := range []string{"", "127.attacker.example", "127.0.0.1.nip.io", "localhost.attacker.example",
		"app.localhost", "localhost.", "127.0.0.1.", "127.1", "0.0.0.0", "::", "[::2]", "10.0.0.1", "example.com", "[localhost]x"} {
		if Host(h) {
			t.Errorf("Host(%q) = true, want false", h)
		}
	}
}

func TestHostPort(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"127.0.0.1:80", "[::1]:8080", "localhost:1", "localhost", "[::1]", "127.0.0.1"} {
		if !HostPort(h) {
			t.Errorf("HostPort(%q) = false, want true", h)
		}
	}
	for _, h := range []string{"127.attacker.example:80", "localhost.attacker.example:443", "[::2]:1", ":80", "10.0.0.1:80"} {
		if HostPort(h) {
			t.Errorf("HostPort(%q) = true, want false", h)
		}
	}
}
