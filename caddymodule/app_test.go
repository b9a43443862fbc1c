package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/crankmcp/crank/internal/mcptest"
	"github.com/crankmcp/crank/store/storetest"
)

// JSON config gets the checks of the Caddyfile parser: Validate refuses
// both an external and the embedded etcd, and an etcd without endpoints.
func TestValidateJSONConfig(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	for _, c := range []struct {
		crank string
		want  []string
	}{
		{`{"etcd": {"endpoints": ["http://127.0.0.1:1"]}, "embedded_etcd": {"data_dir": "etcd"}}`,
			[]string{"crank: invalid configuration", "use either etcd", "or embedded_etcd, not both"}},
		{`{"etcd": {}}`, []string{"crank: invalid configuration", "etcd: endpoints: at least one endpoint is required"}},
		// What the store would refuse when it opens is refused here
		// already, without connecting to anything.
		{`{"etcd": {"endpoints": ["http://127.0.0.1:1"], "owner_ttl": 1000000000}}`,
			[]string{"crank: etcd:", "owner_ttl must be whole seconds and at least 2s"}},
		{`{"etcd": {"endpoints": ["http://127.0.0.1:1"], "username": "crank"}}`,
			[]string{"crank: etcd:", "username and password must be set together"}},
		{`{"etcd": {"endpoints": ["http://127.0.0.1:1"], "tls": {"ca_file": "ca.pem"}}}`,
			[]string{"crank: etcd:", "tls is configured but endpoint http://127.0.0.1:1 is plain http"}},
		{`{"embedded_etcd": {"data_dir": "etcd", "client_url": "https://0.0.0.0:2379"}}`,
			[]string{"crank: embedded_etcd:", "client URL", "loopback address only"}},
		{`{"etcd": {"endpoints": ["http://etcd.example.com:2379"], "username": "crank", "password": "pw"}}`,
			[]string{"crank: etcd:", "in the clear to http://etcd.example.com:2379", "use https://"}},
		{`{"embedded_etcd": {"data_dir": "etcd", "quota_backend_bytes": -1}}`,
			[]string{"crank: embedded_etcd:", "quota_backend_bytes and auto_compaction_retention must not be negative"}},
	} {
		var cfg caddy.Config
		if err := json.Unmarshal([]byte(`{"admin": {"disabled": true}, "apps": {"crank": `+c.crank+`}}`), &cfg); err != nil {
			t.Fatal(err)
		}
		err := caddy.Validate(&cfg)
		if err == nil {
			t.Errorf("%s: valid", c.crank)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.crank, err, w)
			}
		}
	}
}

// Caddy starts its apps in no fixed order, so the HTTP server may pass a
// request to a crank handler before the crank app has started it: the
// request waits, and is served once the app has started.
func TestRequestBeforeAppStart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	up := mcptest.NewUsers(t)
	ops := filepath.Join(dir, "ops.yaml")
	if err := os.WriteFile(ops, []byte(fmt.Sprintf(mcptest.UsersOps, up.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := storetest.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	crank, _ := json.Marshal(map[string]any{"embedded_etcd": map[string]any{
		"data_dir":   filepath.Join(dir, "etcd"),
		"client_url": fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		"peer_url":   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
	}})
	ctx, err := caddy.ProvisionContext(&caddy.Config{AppsRaw: caddy.ModuleMap{"crank": crank}})
	if err != nil {
		t.Fatal(err)
	}
	appVal, err := ctx.App("crank")
	if err != nil {
		t.Fatal(err)
	}
	app := appVal.(*App)
	mod, err := ctx.LoadModuleByID("http.handlers.crank", json.RawMessage(`{"operations": [`+strconv.Quote(ops)+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := mod.(*Handler)
	t.Cleanup(func() {
		_ = h.Cleanup()
		_ = app.Cleanup()
	})

	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		_ = h.ServeHTTP(w, mcptest.NewInitialize("/mcp"), nil)
		done <- w
	}()
	select {
	case w := <-done:
		t.Fatalf("answered before the app started: %d %s", w.Code, w.Body)
	case <-time.After(200 * time.Millisecond):
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-done:
		if w.Code != http.StatusOK || w.Header().Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize once the app started: %d %s", w.Code, w.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not served after the app started")
	}
}
