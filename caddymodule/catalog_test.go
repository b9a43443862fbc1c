package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/crankmcp/crank/internal/mcptest"
)

// A handler may serve a catalog beside or instead of operations files;
// the global option bounds the catalogs' history.
func TestCatalogCaddyfile(t *testing.T) {
	for _, c := range []struct {
		input string
		want  Handler
	}{
		{"crank {\n\tcatalog payments\n}", Handler{Catalog: "payments"}},
		{"crank ops.yaml {\n\tcatalog payments\n}", Handler{Operations: []string{"ops.yaml"}, Catalog: "payments"}},
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(c.input)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(h.Operations, c.want.Operations) || h.Catalog != c.want.Catalog {
			t.Errorf("%q: got %+v, want %+v", c.input, h, c.want)
		}
	}
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("crank {\n\tcatalog a b\n}")); err == nil {
		t.Error("catalog with two names parsed")
	}

	var a App
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("crank {\n\tcatalog_history 20\n}")); err != nil || a.CatalogHistory != 20 {
		t.Errorf("catalog_history 20: %v, %d", err, a.CatalogHistory)
	}
	for _, bad := range []string{"0", "x", "10001"} {
		var a App
		err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("crank {\n\tcatalog_history " + bad + "\n}"))
		if err == nil || !strings.Contains(err.Error(), "catalog_history") {
			t.Errorf("catalog_history %s: %v", bad, err)
		}
	}
}

// testCatalogAllow lets the tests' catalogs reach their loopback
// upstreams and environment variables.
var testCatalogAllow = map[string]any{"upstreams": []string{"127.0.0.1"}, "placeholders": []string{"env.*"}}

// A bad catalog name, history or catalog_allow fails at load, naming the
// field; a handler without files or a catalog is refused.
func TestCatalogConfigErrors(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	for _, c := range []struct {
		apps string
		want string
	}{
		{`"crank": {"catalog_history": -1}`, "catalog_history: must be from 1 to 10000"},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank", "catalog": "no/slash"}]}]}}}`,
			`catalog: "no/slash" is not a catalog name`},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank"}]}]}}}`,
			"at least one operations file or a catalog is required"},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank", "catalog": "c", "catalog_allow": {"upstreams": ["ftp://x/"]}}]}]}}}`,
			`catalog_allow.upstreams: "ftp://x/": scheme "ftp" is not http, https, ws or wss`},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank", "catalog": "c", "catalog_allow": {"placeholders": ["{env.X}"]}}]}]}}}`,
			`catalog_allow.placeholders: "{env.X}" is not a placeholder name`},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank", "catalog": "c", "catalog_allow": {"files": ["specs"]}}]}]}}}`,
			`catalog_allow.files: "specs" must be an absolute, clean directory path`},
		{`"crank": {}, "http": {"servers": {"s": {"listen": ["127.0.0.1:0"], "routes": [{"handle": [{"handler": "crank", "operations": ["x.yaml"], "catalog_allow": {}}]}]}}}`,
			`catalog_allow: set only with catalog`},
	} {
		var cfg caddy.Config
		if err := json.Unmarshal([]byte(`{"admin": {"disabled": true}, "apps": {`+c.apps+`}}`), &cfg); err != nil {
			t.Fatal(err)
		}
		err := caddy.Validate(&cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.apps, err, c.want)
		}
	}
}

// In one process, under the race detector: a handler serves a catalog
// beside its file; admin writes, validations and endpoint reads race the
// follower's rebuilds; a config reload hands the catalog to the new
// handler without losing it; the MCP client hears every change.
func TestCatalogInProcess(t *testing.T) {
	up := mcptest.NewUsers(t)
	t.Setenv("CRANK_TEST_USERS_TOKEN", "s3cret-token-value")
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "live", "catalog_allow": testCatalogAllow})
	admin := func(method, path, body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, g.AdminURL+path, strings.NewReader(body))
		return send(t, req, hdr...) // a fresh connection: a reload replaces the admin server
	}
	entry := func(desc string) string {
		return fmt.Sprintf(`{"name": "cat_user", "description": %q, "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, desc, up.URL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	changed := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "catalog-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	// A reload shuts the old server's idle connections: no keep-alives,
	// so no POST is sent on one of them.
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.MCPURL,
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	description := func() string {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "cat_user" {
				return tl.Description
			}
		}
		return ""
	}
	waitDescription := func(want string) {
		t.Helper()
		for description() != want {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("the endpoint never served description %q", want)
			}
		}
	}

	if code, b := admin("POST", "/crank/catalogs/live/operations", entry("v1"), "If-None-Match", "*"); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	waitDescription("v1")

	// Writers, validators and readers at once.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				switch (i + j) % 3 {
				case 0:
					admin("PATCH", "/crank/catalogs/live/operations/cat_user", fmt.Sprintf(`{"title": "t%d%d"}`, i, j), "If-Match", "*")
				case 1:
					admin("POST", "/crank/catalogs/live/validate?operation=cat_user", entry("draft"))
				default:
					admin("GET", "/crank/endpoints", "")
				}
			}
		}()
	}
	wg.Wait()
	if code, b := admin("PUT", "/crank/catalogs/live/operations/cat_user", entry("v2"), "If-Match", "*"); code != http.StatusOK {
		t.Fatalf("replace: %d %s", code, b)
	}
	waitDescription("v2")

	// A reload (another session timeout: a new handler) keeps serving the
	// catalog, and the new handler follows later versions.
	code, cfg := admin("GET", "/config/", "")
	if code != http.StatusOK {
		t.Fatalf("config: %d", code)
	}
	cfg = []byte(strings.Replace(string(cfg), `"catalog":"live"`, `"catalog":"live","session_timeout":3600000000000`, 1))
	if code, b := admin("POST", "/load", string(cfg), "Content-Type", "application/json"); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, b)
	}
	if description() != "v2" {
		t.Fatal("the reload lost the catalog's tool")
	}
	if code, b := admin("PUT", "/crank/catalogs/live/operations/cat_user", entry("v3"), "If-Match", "*"); code != http.StatusOK {
		t.Fatalf("replace after reload: %d %s", code, b)
	}
	// (Another handler config is another MCP endpoint: the client's
	// session moved to it, its notification stream did not; poll.)
	for description() != "v3" {
		select {
		case <-ctx.Done():
			t.Fatal("the new handler never served v3")
		case <-time.After(50 * time.Millisecond):
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cat_user", Arguments: map[string]any{"id": 3}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	_, eps := admin("GET", "/crank/endpoints", "")
	if !strings.Contains(string(eps), `"version": `) || !strings.Contains(string(eps), `"tools": 2`) {
		t.Fatalf("endpoints: %s", eps)
	}

	// A config whose file and catalog define one tool name fails to load,
	// naming both; the running config serves on.
	refs := func() int {
		spec, _ := builtinSpec("rest")
		n, _ := adapterPool.References(spec.Key())
		return n
	}
	before := refs()
	clash := fmt.Sprintf(`{"name": "get_user", "description": "d", "adapter": "rest", "config": {"method": "GET", "url": "%s/users/{id}"}}`, up.URL)
	if code, b := admin("POST", "/crank/catalogs/other/operations", clash, "If-None-Match", "*"); code != http.StatusCreated {
		t.Fatalf("create other: %d %s", code, b)
	}
	// No handler serves "other": its check was of its shape alone, and
	// took no adapter.
	if after := refs(); after != before {
		t.Fatalf("the rest adapter has %d references after a standalone check, %d before", after, before)
	}
	bad := strings.Replace(string(cfg), `"catalog":"live"`, `"catalog":"other"`, 1)
	code, b := admin("POST", "/load", bad, "Content-Type", "application/json")
	if code == http.StatusOK || !strings.Contains(string(b), "get_user") || !strings.Contains(string(b), "ops.yaml") || !strings.Contains(string(b), "catalog other") {
		t.Fatalf("a clashing config loaded: %d %s", code, b)
	}
	if description() != "v3" {
		t.Fatal("the running config stopped serving the catalog")
	}
}

// crank ops against a running gateway: apply, refuse with placed
// problems, list, export, versions, diff, rollback, delete, test.
func TestOpsCommand(t *testing.T) {
	up := mcptest.NewUsers(t)
	g := startGateway(t, fmt.Sprintf(mcptest.UsersOps, up.URL), map[string]any{"catalog": "cli", "catalog_allow": testCatalogAllow})
	ops := func(args ...string) (string, error) {
		t.Helper()
		pf := pflag.NewFlagSet(OpsCommand, pflag.ContinueOnError)
		pf.AddGoFlagSet(opsFlags())
		if err := pf.Parse(append([]string{"--address", strings.TrimPrefix(g.AdminURL, "http://"), "--operator", "ci"}, args...)); err != nil {
			t.Fatal(err)
		}
		out, err := opsMain(caddycmd.Flags{FlagSet: pf})
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := ops(args...)
		if err != nil {
			t.Fatalf("crank ops %v: %v", args, err)
		}
		return out
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", fmt.Sprintf(`version: 1
operations:
  - name: cat_user
    description: A user.
    adapter: rest
    config: {method: GET, url: "%s/users/{id}"}
`, up.URL))
	bad := file("bad.yaml", "version: 1\noperations:\n  - name: x\n    description: d\n    adapter: rest\n    config: {method: GET, url: \"ftp://h/\"}\n")

	if out := must("apply", "cli", good, "--message", "first"); !strings.Contains(out, "version 1") || !strings.Contains(out, "added cat_user") {
		t.Fatalf("apply: %s", out)
	}
	_, err := ops("apply", "cli", bad)
	if err == nil || !strings.Contains(err.Error(), "HTTP 422") || !strings.Contains(err.Error(), "line 6: /operations/0/config/url") {
		t.Fatalf("bad apply: %v", err)
	}
	if _, err := ops("validate", "cli", bad); err == nil || !strings.Contains(err.Error(), "/operations/0/config/url") {
		t.Fatalf("validate bad: %v", err)
	}
	if out := must("validate", "cli", good); !strings.Contains(out, "valid") {
		t.Fatalf("validate good: %s", out)
	}
	if out := must("list"); !strings.Contains(out, "cli\tversion 1\t1 operations\tby admin") {
		t.Fatalf("list: %q", out)
	}
	if out := must("list", "cli"); out != "cat_user\trest\tunary\n" {
		t.Fatalf("list cli: %q", out)
	}
	if out := must("get", "cli", "cat_user"); !strings.Contains(out, "name: cat_user") {
		t.Fatalf("get: %s", out)
	}
	must("delete", "cli", "cat_user")
	if out := must("versions", "cli"); !strings.Contains(out, "2\t") || !strings.Contains(out, "admin (ci)\tdelete") || !strings.Contains(out, "first") {
		t.Fatalf("versions: %s", out)
	}
	if out := must("diff", "cli", "1", "2"); !strings.Contains(out, `"removed"`) {
		t.Fatalf("diff: %s", out)
	}
	if out := must("rollback", "cli", "1"); !strings.Contains(out, "version 3") {
		t.Fatalf("rollback: %s", out)
	}
	if out := must("test", "cli", "cat_user", "--args", `{"id": 4}`); !strings.Contains(out, `"is_error": false`) {
		t.Fatalf("test: %s", out)
	}
	for _, args := range [][]string{{}, {"nope"}, {"get"}, {"get", "missing"}, {"apply", "cli", dir + "/none.yaml"}} {
		if _, err := ops(args...); err == nil {
			t.Errorf("crank ops %v succeeded", args)
		}
	}
}
