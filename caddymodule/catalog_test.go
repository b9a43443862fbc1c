package caddymodule

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
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

// A bad catalog name or history fails at load, naming the field; a
// handler without files or a catalog is refused.
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
