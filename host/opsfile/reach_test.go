package opsfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Which addresses a catalog's upstream rules admit: URL prefixes by whole
// path segments, hosts with or without a port, domain wildcards and *,
// and a local address only when a rule names it.
func TestCatalogAllowUpstreams(t *testing.T) {
	t.Parallel()
	a := &CatalogAllow{Upstreams: []string{
		"https://api.example.com/v1/", "10.0.0.5:8443", "*.partner.example", "orders.example.com", "http://127.0.0.1:9000", "unix:///run/api.sock",
	}}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	for addr, ok := range map[string]bool{
		"https://api.example.com/v1/users/{id}":   true,
		"https://API.example.com:443/v1":          true,
		"https://api.example.com/v10/users":       false,
		"https://api.example.com/v1/../admin":     false,
		"http://api.example.com/v1/users":         false,
		"https://api.example.com:8443/v1/users":   false,
		"https://10.0.0.5:8443/x":                 true,
		"10.0.0.5:8443":                           true,
		"10.0.0.5:22":                             false,
		"dns:///10.0.0.5:8443":                    true,
		"wss://feed.partner.example/ws":           true,
		"https://partner.example/":                false,
		"grpc.orders.example.com:443":             false,
		"orders.example.com:443":                  true,
		"passthrough:///orders.example.com:50051": true,
		"http://127.0.0.1:9000/users":             true,
		"http://127.0.0.1:9001/users":             false,
		"http://localhost:9000/users":             false,
		"unix:///run/api.sock":                    true,
		"unix:///run/other.sock":                  false,
		"https://user:pw@api.example.com/v1/":     false,
		"ftp://api.example.com/v1/":               false,
	} {
		if msg := a.upstream(addr); (msg == "") != ok {
			t.Errorf("%s: allowed = %v, want %v (%s)", addr, msg == "", ok, msg)
		}
	}
	any := &CatalogAllow{Upstreams: []string{"*"}}
	for addr, ok := range map[string]bool{
		"https://api.example.com/":       true,
		"http://127.0.0.1:8080/":         false,
		"http://127.7.7.7/":              false,
		"http://[::1]:80/":               false,
		"http://[::ffff:127.0.0.1]/":     false,
		"http://10.1.2.3/":               false,
		"http://192.168.1.1/":            false,
		"http://169.254.169.254/latest/": false,
		"http://100.64.0.1/":             false,
		"http://0.0.0.0:80/":             false,
		"http://localhost/":              false,
		"http://db.localhost/":           false,
		"http://127.attacker.example/":   true, // a name, not a loopback address
		"unix:///var/run/docker.sock":    false,
		"dns://8.8.8.8/10.0.0.1:443":     false,
		"https://8.8.8.8/":               true,
		"http://[fd00::1]/":              false,
		"http://[fe80::1%25eth0]/":       false,
		// Numeric spellings, read as the resolver (inet_aton) reads them.
		"http://2130706433/":      false,
		"http://0x7f000001/":      false,
		"http://0177.0.0.1/":      false,
		"http://127.1/":           false,
		"http://0x08080808/":      true, // 8.8.8.8
		"127.0.0.1.:80":           false,
		"http://LOCALHOST./":      false,
		"unix-abstract:4242":      false,
		"unix-abstract:/a/b":      false,
		"xds:///svc":              false,
		"http://[::ffff:7f00:1]/": false,
	} {
		if msg := any.upstream(addr); (msg == "") != ok {
			t.Errorf("*: %s: allowed = %v, want %v (%s)", addr, msg == "", ok, msg)
		}
	}
	if msg := (&CatalogAllow{}).upstream("https://api.example.com/"); !strings.Contains(msg, "allows its catalog no upstreams") {
		t.Errorf("nothing allowed: %q", msg)
	}
	if msg := a.upstream("http://127.0.0.1:1/x"); !strings.Contains(msg, "a local address must be listed itself") ||
		strings.Contains(msg, "/x") {
		t.Errorf("a local address: %q", msg)
	}
	for _, bad := range []string{"ftp://x/", "https://x/?q=1", "*.", "**", "unix:relative", "https://u:p@x/"} {
		if err := (&CatalogAllow{Upstreams: []string{bad}}).Check(); err == nil || !strings.Contains(err.Error(), "upstreams") {
			t.Errorf("rule %q: %v", bad, err)
		}
	}
}

// Files: only below an allowed directory, relative paths against the
// first, no way out by .. or a symbolic link.
func TestCatalogAllowFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	specs := filepath.Join(dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(specs, "etc")); err != nil {
		t.Fatal(err)
	}
	a := &CatalogAllow{Files: []string{specs}}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	for path, ok := range map[string]bool{
		"api.yaml":                     true,
		specs + "/sub/api.yaml":        true,
		"../secret":                    false,
		specs + "/../secret":           false,
		"etc/passwd":                   false,
		"/etc/passwd":                  false,
		filepath.Join(dir, "specsx/a"): false,
	} {
		if msg := a.file(path, a.Dir("/elsewhere")); (msg == "") != ok {
			t.Errorf("%s: allowed = %v, want %v (%s)", path, msg == "", ok, msg)
		}
	}
	if msg := (&CatalogAllow{}).file("api.yaml", dir); !strings.Contains(msg, "cannot read local files") {
		t.Errorf("no directories: %q", msg)
	}
	for _, bad := range []string{"relative", "/a/../b", "/a/"} {
		if err := (&CatalogAllow{Files: []string{bad}}).Check(); err == nil {
			t.Errorf("files %q accepted", bad)
		}
	}
}

// A catalog entry's placeholders: only the allowed ones are expanded; one
// it may not use is refused naming the field, and is never evaluated.
func TestCatalogAllowPlaceholders(t *testing.T) {
	t.Parallel()
	var asked []string
	expand := func(s string) string {
		asked = append(asked, s)
		switch s {
		case "{env.OK_KEY}":
			return "ok-value"
		case "{env.OTHER}":
			return "other-value"
		case "{file./etc/hostname}":
			return "the-host"
		}
		return s
	}
	a := &CatalogAllow{Placeholders: []string{"env.OK_*"}}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	doc := `operations:
  - name: good
    description: d
    adapter: rest
    config: {url: "https://x/{id}", headers: {A: "{env.OK_KEY}"}}
  - name: bad
    description: d
    adapter: rest
    config: {url: "https://x/", headers: {B: "{env.OTHER}", C: "{file./etc/hostname}", D: "{system.hostname}"}}
    upstream_auth: {grant: client_credentials, token_endpoint: "https://login/token", client_id: c, client_secret: "{env.OTHER}"}
`
	_, err := Parse("catalog t", []byte(doc), LoadOptions{Expand: expand, Allow: a})
	if err == nil {
		t.Fatal("a refused placeholder loaded")
	}
	for _, want := range []string{
		`"bad": /config/headers/B: placeholder {env.OTHER} is not allowed`,
		`"bad": /config/headers/C: placeholder {file./etc/hostname} is not allowed`,
		`"bad": /config/headers/D: placeholder {system.hostname} is not allowed`,
		`"bad": /upstream_auth/client_secret: placeholder {env.OTHER} is not allowed`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"good"`) {
		t.Errorf("the allowed entry was refused: %v", err)
	}
	for _, s := range asked {
		if s != "{env.OK_KEY}" {
			t.Errorf("evaluated %q", s)
		}
	}
	cat, err := Parse("catalog t", []byte(doc[:strings.Index(doc, "  - name: bad")]), LoadOptions{Expand: expand, Allow: a})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct{ URL, Headers map[string]string }
	_ = json.Unmarshal(cat.Operations[0].Config, &cfg)
	if got := string(cat.Operations[0].Config); !strings.Contains(got, "ok-value") || !strings.Contains(got, "{id}") {
		t.Errorf("config %s", got)
	}
	for _, bad := range []string{"{env.X}", "http.request.host", "env.A*B"} {
		if err := (&CatalogAllow{Placeholders: []string{bad}}).Check(); err == nil {
			t.Errorf("placeholders %q accepted", bad)
		}
	}
	if !(&CatalogAllow{Placeholders: []string{"file./run/secrets/*"}}).placeholder("{file./run/secrets/key}") ||
		(&CatalogAllow{Placeholders: []string{"file./run/secrets/*"}}).placeholder("{file./run/secrets/../../etc/shadow}") {
		t.Error("file placeholders by prefix")
	}
}

// What a config reaches follows its adapter's schema; a schema that says
// nothing of reach serves no catalog entry.
func TestCatalogAllowConfig(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type": "object", "properties": {
		"command": {"type": "string", "x-crank-reach": "command"},
		"args": {"type": "array", "items": {"type": "string"}, "x-crank-reach": "command"},
		"url": {"type": "string", "x-crank-reach": "upstream"},
		"spec": {"type": "string", "x-crank-reach": "location"},
		"refs": {"type": "boolean", "x-crank-reach": "file"},
		"tls": {"type": "object", "properties": {"ca_file": {"type": "string", "x-crank-reach": "file"}}},
		"name": {"type": "string"}}}`)
	a := &CatalogAllow{Upstreams: []string{"https://api.example.com/"}}
	problems := func(cfg string) string {
		var out []string
		for _, p := range a.checkConfig("x", json.RawMessage(cfg), schema, "/srv") {
			out = append(out, p.field+": "+p.reason)
		}
		return strings.Join(out, "\n")
	}
	if ps := problems(`{"url": "https://api.example.com/a", "spec": "https://api.example.com/openapi.json", "refs": false, "name": "n"}`); ps != "" {
		t.Errorf("an allowed config: %s", ps)
	}
	for cfg, want := range map[string]string{
		`{"command": "/bin/sh"}`:                   "/config/command: a catalog entry cannot start a process",
		`{"args": ["-c", "id"]}`:                   "/config/args/0: a catalog entry cannot start a process",
		`{"url": "http://10.0.0.1/"}`:              "/config/url: upstream http://10.0.0.1 is not allowed",
		`{"spec": "./openapi.yaml"}`:               "/config/spec: a catalog entry cannot read local files",
		`{"spec": "http://internal/openapi.json"}`: "/config/spec: upstream http://internal is not allowed",
		`{"refs": true}`:                           "/config/refs: a catalog entry cannot set it",
		`{"tls": {"ca_file": "/etc/shadow"}}`:      "/config/tls/ca_file: a catalog entry cannot read local files",
	} {
		if ps := problems(cfg); !strings.HasPrefix(ps, want) {
			t.Errorf("%s: %q, want %q", cfg, ps, want)
		}
	}
	ps := a.checkConfig("third", json.RawMessage(`{"path": "/etc/passwd"}`), json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}}}`), "/")
	if len(ps) != 1 || ps[0].field != "/adapter" || !strings.Contains(ps[0].reason, "does not say what its config reaches") {
		t.Errorf("an adapter without reach: %v", ps)
	}
	if ps := a.checkConfig("none", json.RawMessage(`{"n": 1}`), json.RawMessage(`{"type": "object", "x-crank-reach": "none"}`), "/"); len(ps) != 0 {
		t.Errorf("an adapter that reaches nothing: %v", ps)
	}
}

// Upstreams are the values of a config's upstream fields and the http(s)
// URLs of its location fields, at any depth, by the adapter's schema.
func TestUpstreams(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{
		"url":{"type":"string","x-crank-reach":"upstream"},
		"spec":{"type":"string","x-crank-reach":"location"},
		"token_file":{"type":"string","x-crank-reach":"file"},
		"mirrors":{"type":"array","items":{"$ref":"#/$defs/m"}}},
		"$defs":{"m":{"type":"object","properties":{"addr":{"type":"string","x-crank-reach":"upstream"}}}}}`)
	cfg := json.RawMessage(`{"url":"https://api.stripe.com/v1/refunds","spec":"./openapi.yaml","token_file":"/run/t",
		"mirrors":[{"addr":"10.0.0.5:8443"}]}`)
	got := Upstreams(cfg, schema)
	if strings.Join(got, " ") != "10.0.0.5:8443 https://api.stripe.com/v1/refunds" {
		t.Errorf("Upstreams = %q", got)
	}
	cfg = json.RawMessage(`{"url":"https://a.example/","spec":"https://b.example/openapi.json"}`)
	if got := Upstreams(cfg, schema); strings.Join(got, " ") != "https://b.example/openapi.json https://a.example/" {
		t.Errorf("Upstreams = %q", got)
	}
}
