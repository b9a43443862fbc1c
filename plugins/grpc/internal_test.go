package grpcadapter

import (
	"strings"
	"testing"
)

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"GetUser": "get_user", "ListHTTPRoutes": "list_http_routes", "Get2FACode": "get2_fa_code",
		"getUser": "get_user", "ID": "id", "A": "a", "already_snake": "already_snake", "URLsFor": "ur_ls_for",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestToolName(t *testing.T) {
	used := map[string]bool{}
	if n := toolName("svc_", "GetHTTP", used); n != "svc_get_http" {
		t.Errorf("name %q", n)
	}
	if n := toolName("svc_", "GetHttp", used); n != "svc_get_http_2" {
		t.Errorf("a clash gets a suffix: %q", n)
	}
	long := strings.Repeat("VeryLongMethodName", 10)
	a, b := toolName("p_", long, used), toolName("p_", long+"X", used)
	if len(a) > 128 || len(b) > 128 || a == b || !toolNameOK(a) || !toolNameOK(b) {
		t.Errorf("long names %q %q", a, b)
	}
	c := toolName("p_", long, used)
	if len(c) > 128 || c == a {
		t.Errorf("a clash of long names: %q", c)
	}
}

func toolNameOK(s string) bool { return s != "" && len(s) <= 128 && validToolChars(s) }

func TestSplitMethod(t *testing.T) {
	for _, tc := range []struct{ in, svc, m string }{
		{"pkg.Svc/Get", "pkg.Svc", "Get"},
		{"/pkg.v1.Svc/Get", "pkg.v1.Svc", "Get"},
		{"pkg.Svc.Get", "pkg.Svc", "Get"},
		{"Svc/Get", "Svc", "Get"},
		{".pkg.Svc/Get", "pkg.Svc", "Get"},
	} {
		svc, m, ok := splitMethod(tc.in)
		if !ok || svc != tc.svc || m != tc.m {
			t.Errorf("splitMethod(%q) = %q %q %v", tc.in, svc, m, ok)
		}
	}
	for _, bad := range []string{"", "Get", "pkg.Svc/", "/Get", "pkg..Svc/Get", "pkg.Svc/Get/X", "pkg.Svc/1Get", "pkg Svc/Get"} {
		if _, _, ok := splitMethod(bad); ok {
			t.Errorf("splitMethod(%q) accepted", bad)
		}
	}
}

func TestParseTargetLocal(t *testing.T) {
	for target, local := range map[string]bool{
		"127.0.0.1:50051": true, "localhost:1": true, "[::1]:8080": true, "127.1.2.3:9": true,
		"unix:///run/x.sock": true, "unix:relative.sock": true, "unix-abstract:name": true,
		"dns:///localhost:1": true, "passthrough:///127.0.0.1:5": true,
		"10.0.0.1:443": false, "api.example.com:443": false, "dns:///api.example.com:443": false,
		"dns://8.8.8.8/api.example.com:443": false,
	} {
		var d diags
		if got := parseTarget(target, &d); got != local || d.Failed() {
			t.Errorf("parseTarget(%q) = %v %v, want %v", target, got, d.List(), local)
		}
	}
}
